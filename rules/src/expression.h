#pragma once
// The small expression language of rule files: numbers, metric names, thresholds, string
// arguments, function calls, arithmetic, comparisons and && || !. Compiled once (names checked)
// and evaluated against the metrics of a trace. Missing values are NaN: comparisons with NaN are
// false, so a rule that needs an unknown figure does not fire.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sightline::rules {

struct TableFunction;

// What an expression may call and read; the engine supplies it at evaluation time.
struct EvalContext {
    std::function<double(const std::string& metric)> metric;
    std::function<double(const TableFunction& function, const std::string& argument)> table;
};

class Expression {
public:
    Expression() = default;
    // Throws std::invalid_argument with a message (no file or line) on a syntax error, an
    // unknown name or a wrong call. Names resolve to, in order: a threshold, a named
    // sub-expression of the rule ([let]), a metric.
    static Expression compile(const std::string& text, const std::map<std::string, double>& thresholds,
                              const std::map<std::string, Expression>& lets = {});

    double eval(const EvalContext& ctx) const;
    const std::string& text() const { return m_text; }
    // Metric names the expression reads.
    const std::vector<std::string>& metrics() const { return m_metrics; }
    bool empty() const { return !m_root; }

    struct Node;
    std::shared_ptr<const Node> root() const { return m_root; }

private:
    std::string m_text;
    std::shared_ptr<const Node> m_root;
    std::vector<std::string> m_metrics;
};

} // namespace sightline::rules
