#include "expression.h"

#include "table_functions.h"

#include "sightline/metrics.h"

#include <cctype>
#include <cmath>
#include <stdexcept>

namespace sightline::rules {

struct Expression::Node {
    enum Kind { Number,
                Metric,
                Call,
                Unary,
                Binary } kind = Number;
    double number = 0;
    std::string name;     // metric, function or operator
    std::string argument; // string argument of a table function
    const TableFunction* table = nullptr;
    std::vector<std::shared_ptr<const Node>> children;
};

namespace {

using NodePtr = std::shared_ptr<const Expression::Node>;

class Parser {
public:
    Parser(const std::string& text, const std::map<std::string, double>& thresholds,
           const std::map<std::string, Expression>& lets, std::vector<std::string>& metrics)
        : m_s(text), m_thresholds(thresholds), m_lets(lets), m_metrics(metrics) {}

    NodePtr parse() {
        NodePtr n = orExpr();
        skip();
        if (m_i != m_s.size())
            fail("unexpected '" + m_s.substr(m_i, 12) + "'");
        return n;
    }

private:
    [[noreturn]] void fail(const std::string& why) { throw std::invalid_argument(why); }
    void skip() {
        while (m_i < m_s.size() && std::isspace(static_cast<unsigned char>(m_s[m_i]))) ++m_i;
    }
    bool eat(const char* op) {
        skip();
        const size_t n = std::char_traits<char>::length(op);
        if (m_s.compare(m_i, n, op) == 0) {
            // "<" must not eat the start of "<="
            if (n == 1 && (op[0] == '<' || op[0] == '>' || op[0] == '!' || op[0] == '=') && m_i + 1 < m_s.size() && m_s[m_i + 1] == '=')
                return false;
            m_i += n;
            return true;
        }
        return false;
    }
    static NodePtr binary(const std::string& op, NodePtr a, NodePtr b) {
        auto n = std::make_shared<Expression::Node>();
        n->kind = Expression::Node::Binary;
        n->name = op;
        n->children = {std::move(a), std::move(b)};
        return n;
    }
    NodePtr orExpr() {
        NodePtr n = andExpr();
        while (eat("||")) n = binary("||", n, andExpr());
        return n;
    }
    NodePtr andExpr() {
        NodePtr n = cmpExpr();
        while (eat("&&")) n = binary("&&", n, cmpExpr());
        return n;
    }
    NodePtr cmpExpr() {
        NodePtr n = addExpr();
        for (const char* op : {"<=", ">=", "==", "!=", "<", ">"})
            if (eat(op)) return binary(op, n, addExpr());
        return n;
    }
    NodePtr addExpr() {
        NodePtr n = mulExpr();
        for (;;) {
            if (eat("+")) n = binary("+", n, mulExpr());
            else if (eat("-")) n = binary("-", n, mulExpr());
            else return n;
        }
    }
    NodePtr mulExpr() {
        NodePtr n = unary();
        for (;;) {
            if (eat("*")) n = binary("*", n, unary());
            else if (eat("/")) n = binary("/", n, unary());
            else return n;
        }
    }
    NodePtr unary() {
        for (const char* op : {"-", "!"}) {
            if (eat(op)) {
                auto n = std::make_shared<Expression::Node>();
                n->kind = Expression::Node::Unary;
                n->name = op;
                n->children = {unary()};
                return n;
            }
        }
        return primary();
    }
    std::string stringLiteral() {
        skip();
        if (m_i >= m_s.size() || (m_s[m_i] != '\'' && m_s[m_i] != '"'))
            fail("expected a quoted name");
        const char q = m_s[m_i++];
        const size_t end = m_s.find(q, m_i);
        if (end == std::string::npos) fail("unterminated string");
        std::string out = m_s.substr(m_i, end - m_i);
        m_i = end + 1;
        return out;
    }
    NodePtr primary() {
        skip();
        if (m_i >= m_s.size()) fail("unexpected end of expression");
        auto n = std::make_shared<Expression::Node>();
        const char c = m_s[m_i];
        if (c == '(') {
            ++m_i;
            NodePtr inner = orExpr();
            if (!eat(")")) fail("missing ')'");
            return inner;
        }
        if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
            size_t used = 0;
            n->number = std::stod(m_s.substr(m_i), &used);
            m_i += used;
            return n;
        }
        if (!std::isalpha(static_cast<unsigned char>(c)) && c != '_')
            fail(std::string("unexpected '") + c + "'");
        size_t j = m_i;
        while (j < m_s.size() && (std::isalnum(static_cast<unsigned char>(m_s[j])) || m_s[j] == '_' || m_s[j] == '.')) ++j;
        const std::string ident = m_s.substr(m_i, j - m_i);
        m_i = j;
        if (eat("(")) {
            n->kind = Expression::Node::Call;
            n->name = ident;
            if ((n->table = findTableFunction(ident))) {
                n->argument = stringLiteral();
            } else if (ident == "min" || ident == "max") {
                n->children.push_back(orExpr());
                if (!eat(",")) fail(ident + "() takes two arguments");
                n->children.push_back(orExpr());
            } else if (ident == "abs" || ident == "known") {
                n->children.push_back(orExpr());
            } else {
                fail("unknown function '" + ident + "'");
            }
            if (!eat(")")) fail("missing ')' after the arguments of " + ident + "()");
            return n;
        }
        if (auto t = m_thresholds.find(ident); t != m_thresholds.end()) {
            n->number = t->second;
            return n;
        }
        if (auto l = m_lets.find(ident); l != m_lets.end()) {
            for (const std::string& m : l->second.metrics()) m_metrics.push_back(m);
            return l->second.root();
        }
        if (!metricCatalog().count(ident))
            fail("unknown metric '" + ident + "'");
        n->kind = Expression::Node::Metric;
        n->name = ident;
        m_metrics.push_back(ident);
        return n;
    }

    const std::string& m_s;
    size_t m_i = 0;
    const std::map<std::string, double>& m_thresholds;
    const std::map<std::string, Expression>& m_lets;
    std::vector<std::string>& m_metrics;
};

double evalNode(const Expression::Node& n, const EvalContext& ctx) {
    using K = Expression::Node;
    switch (n.kind) {
    case K::Number: return n.number;
    case K::Metric: return ctx.metric(n.name);
    case K::Unary: {
        const double x = evalNode(*n.children[0], ctx);
        return n.name == "-" ? -x : (x == 0 ? 1.0 : 0.0);
    }
    case K::Call: {
        if (n.table) return ctx.table(*n.table, n.argument);
        const double a = evalNode(*n.children[0], ctx);
        if (n.name == "abs") return std::fabs(a);
        if (n.name == "known") return std::isnan(a) ? 0.0 : 1.0;
        const double b = evalNode(*n.children[1], ctx);
        return n.name == "min" ? std::fmin(a, b) : std::fmax(a, b);
    }
    case K::Binary: {
        const double a = evalNode(*n.children[0], ctx);
        if (n.name == "&&" && !(a != 0 && !std::isnan(a))) return 0.0;
        if (n.name == "||" && (a != 0 && !std::isnan(a))) return 1.0;
        const double b = evalNode(*n.children[1], ctx);
        const std::string& op = n.name;
        if (op == "+") return a + b;
        if (op == "-") return a - b;
        if (op == "*") return a * b;
        if (op == "/") return b == 0 ? NAN : a / b;
        if (op == "<") return a < b;
        if (op == "<=") return a <= b;
        if (op == ">") return a > b;
        if (op == ">=") return a >= b;
        if (op == "==") return a == b;
        if (op == "!=") return a != b;
        return (b != 0 && !std::isnan(b)) ? 1.0 : 0.0; // && and || with a decided by b
    }
    }
    return NAN;
}

} // namespace

Expression Expression::compile(const std::string& text, const std::map<std::string, double>& thresholds,
                               const std::map<std::string, Expression>& lets) {
    Expression e;
    e.m_text = text;
    Parser p(text, thresholds, lets, e.m_metrics);
    e.m_root = p.parse();
    return e;
}

double Expression::eval(const EvalContext& ctx) const { return m_root ? evalNode(*m_root, ctx) : NAN; }

} // namespace sightline::rules
