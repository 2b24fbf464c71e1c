// Reading a rule file (TOML). Every expression is compiled here, so an unknown metric, a bad
// threshold or a syntax error is reported with the file and line before any trace is analysed.
#include "rule.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <toml++/toml.h>

namespace sightline {

namespace {

[[noreturn]] void fail(const std::string& source, int64_t line, const std::string& why) {
    throw RuleFileError(fmt::format("{}:{}: {}", source, line, why));
}

int64_t lineOf(const toml::node* n) { return n ? int64_t(n->source().begin.line) : 1; }

std::string requireString(const toml::table& t, const char* key, const std::string& source) {
    const toml::node* n = t.get(key);
    if (!n) fail(source, 1, fmt::format("missing key '{}'", key));
    if (!n->is_string()) fail(source, lineOf(n), fmt::format("'{}' must be a string", key));
    return n->as_string()->get();
}

// Prose fields are written across lines in the files; they are one paragraph each.
std::string paragraph(const std::string& text) {
    std::string out;
    bool space = false;
    for (char c : text) {
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
            space = !out.empty();
            continue;
        }
        if (space) out += ' ';
        space = false;
        out += c;
    }
    return out;
}

std::string optionalString(const toml::table& t, const char* key, const std::string& source) {
    const toml::node* n = t.get(key);
    if (!n) return {};
    if (!n->is_string()) fail(source, lineOf(n), fmt::format("'{}' must be a string", key));
    return n->as_string()->get();
}

rules::Expression compileAt(const toml::table& t, const char* key, const std::string& source,
                            const std::map<std::string, double>& thresholds,
                            const std::map<std::string, rules::Expression>& lets, bool required) {
    const toml::node* n = t.get(key);
    if (!n) {
        if (required) fail(source, 1, fmt::format("missing key '{}'", key));
        return {};
    }
    if (!n->is_string()) fail(source, lineOf(n), fmt::format("'{}' must be a string holding an expression", key));
    try {
        return rules::Expression::compile(n->as_string()->get(), thresholds, lets);
    } catch (const std::invalid_argument& e) {
        fail(source, lineOf(n), fmt::format("in '{}': {}", key, e.what()));
    }
}

std::vector<std::string> stringList(const toml::table& t, const char* key, const std::string& source) {
    std::vector<std::string> out;
    const toml::node* n = t.get(key);
    if (!n) return out;
    const toml::array* a = n->as_array();
    if (!a) fail(source, lineOf(n), fmt::format("'{}' must be a list of strings", key));
    for (const toml::node& el : *a) {
        if (!el.is_string()) fail(source, lineOf(&el), fmt::format("'{}' must be a list of strings", key));
        out.push_back(el.as_string()->get());
    }
    return out;
}

// A number or an expression held in a string.
rules::Expression numberOrExpression(const toml::node& n, const std::string& what, const std::string& source,
                                     const std::map<std::string, double>& thresholds,
                                     const std::map<std::string, rules::Expression>& lets) {
    std::string text;
    if (n.is_number()) text = fmt::format("{}", n.value<double>().value_or(NAN));
    else if (n.is_string()) text = n.as_string()->get();
    else fail(source, lineOf(&n), fmt::format("'{}' must be a number or a string holding an expression", what));
    try {
        return rules::Expression::compile(text, thresholds, lets);
    } catch (const std::invalid_argument& e) {
        fail(source, lineOf(&n), fmt::format("in '{}': {}", what, e.what()));
    }
}

// One [[change]] table: what the fix does, for the replay (docs/rules.md).
ChangeSpec parseChange(const toml::table& t, const std::string& source, const std::map<std::string, double>& thresholds,
                       const std::map<std::string, rules::Expression>& lets) {
    static const char* known[] = {"kind", "families", "classes", "ops", "within", "outside", "near_ops", "away_from_ops", "near_launches",
                                  "amount", "range", "group", "host_left", "host_left_range"};
    for (const auto& [k, v] : t)
        if (std::find(std::begin(known), std::end(known), k.str()) == std::end(known))
            fail(source, lineOf(&v), fmt::format("unknown key '{}' in [[change]]", k.str()));
    ChangeSpec c;
    const std::string kind = requireString(t, "kind", source);
    if (!parseChangeKind(kind, c.change.kind))
        fail(source, lineOf(t.get("kind")),
             fmt::format("change kind '{}' is not remove_kernels, scale_kernels, merge_kernels, scale_host, drop_syncs, "
                         "drop_boundary_syncs or trim_host_outliers",
                         kind));
    Selector& s = c.change.select;
    s.families = stringList(t, "families", source);
    s.classes = stringList(t, "classes", source);
    s.ops = stringList(t, "ops", source);
    s.within = stringList(t, "within", source);
    s.outside = stringList(t, "outside", source);
    s.near_ops = stringList(t, "near_ops", source);
    s.away_from_ops = stringList(t, "away_from_ops", source);
    if (const toml::node* n = t.get("near_launches")) {
        if (!n->is_integer()) fail(source, lineOf(n), "'near_launches' must be an integer");
        s.near_launches = int(n->value<int64_t>().value_or(8));
    }
    if (const toml::node* n = t.get("amount")) c.amount = numberOrExpression(*n, "amount", source, thresholds, lets);
    else if (c.change.kind != ChangeKind::DropSyncs && c.change.kind != ChangeKind::DropBoundarySyncs)
        fail(source, lineOf(&t), "[[change]] needs an 'amount'");
    if (const toml::node* n = t.get("range")) {
        const toml::array* a = n->as_array();
        if (!a || a->size() != 2) fail(source, lineOf(n), "'range' must be [low, high]");
        c.low = numberOrExpression(*a->get(0), "range", source, thresholds, lets);
        c.high = numberOrExpression(*a->get(1), "range", source, thresholds, lets);
    }
    if (const toml::node* n = t.get("host_left")) c.host_left = numberOrExpression(*n, "host_left", source, thresholds, lets);
    if (const toml::node* n = t.get("host_left_range")) {
        const toml::array* a = n->as_array();
        if (!a || a->size() != 2) fail(source, lineOf(n), "'host_left_range' must be [low, high]");
        c.host_low = numberOrExpression(*a->get(0), "host_left_range", source, thresholds, lets);
        c.host_high = numberOrExpression(*a->get(1), "host_left_range", source, thresholds, lets);
    }
    const std::string group = optionalString(t, "group", source);
    if (group == "within") c.change.group = MergeGroup::Within;
    else if (group == "region") c.change.group = MergeGroup::Region;
    else if (!group.empty() && group != "step") fail(source, lineOf(t.get("group")), "'group' must be step, within or region");
    if (c.change.group == MergeGroup::Within && s.within.empty()) fail(source, lineOf(&t), "group 'within' needs 'within' ranges");
    if (c.change.group == MergeGroup::Region && s.near_ops.empty()) fail(source, lineOf(&t), "group 'region' needs 'near_ops'");
    return c;
}

// An array of tables ([[name]]); each must be a table.
template <typename F>
void forEachTable(const toml::table& t, const char* key, const std::string& source, F&& f) {
    const toml::node* n = t.get(key);
    if (!n) return;
    const toml::array* a = n->as_array();
    if (!a) fail(source, lineOf(n), fmt::format("'{}' must be an array of tables ([[{}]])", key, key));
    for (const toml::node& el : *a) {
        if (!el.is_table()) fail(source, lineOf(&el), fmt::format("'{}' must be an array of tables ([[{}]])", key, key));
        f(*el.as_table());
    }
}

// [[fixes]] (a `when` and a `fix` each) or [[fix_if]] (a `when` and a `text` each) into the rule's
// conditional fixes.
void parseConditionalFixes(const toml::table& t, const char* key, const char* text_key, ConditionalFix::Mode mode,
                           const std::string& source, Rule& r) {
    const toml::node* n = t.get(key);
    if (!n) return;
    const toml::array* a = n->as_array();
    if (!a || !a->is_array_of_tables()) fail(source, lineOf(n), fmt::format("[[{}]] must be tables with 'when' and '{}'", key, text_key));
    for (const toml::node& el : *a) {
        const toml::table& ft = *el.as_table();
        for (const auto& [k, v] : ft)
            if (k.str() != "when" && k.str() != text_key) fail(source, lineOf(&v), fmt::format("unknown key '{}' in [[{}]]", k.str(), key));
        r.conditional_fixes.push_back(
            {compileAt(ft, "when", source, r.thresholds, r.lets, true), paragraph(requireString(ft, text_key, source)), mode});
    }
}

// "text {expr} more {expr:pct}" -> parts.
std::vector<MessagePart> compileMessage(const std::string& text, const std::string& source, int64_t line,
                                        const std::map<std::string, double>& thresholds,
                                        const std::map<std::string, rules::Expression>& lets) {
    std::vector<MessagePart> parts;
    size_t i = 0;
    std::string literal;
    while (i < text.size()) {
        if (text[i] != '{') {
            literal += text[i++];
            continue;
        }
        const size_t close = text.find('}', i);
        if (close == std::string::npos) fail(source, line, "in 'message': '{' without '}'");
        std::string inner = text.substr(i + 1, close - i - 1);
        std::string format;
        // The format follows the last ':' outside quotes.
        bool quoted = false;
        size_t colon = std::string::npos;
        for (size_t k = 0; k < inner.size(); ++k) {
            if (inner[k] == '\'' || inner[k] == '"') quoted = !quoted;
            else if (inner[k] == ':' && !quoted) colon = k;
        }
        if (colon != std::string::npos) {
            format = inner.substr(colon + 1);
            inner = inner.substr(0, colon);
            if (format != ".0f" && format != ".1f" && format != ".2f" && format != "pct" && format != "ms")
                fail(source, line, fmt::format("in 'message': unknown format ':{}' (use .0f .1f .2f pct ms)", format));
        }
        if (!literal.empty()) parts.push_back(MessagePart{std::move(literal), {}, {}}), literal.clear();
        try {
            parts.push_back(MessagePart{{}, rules::Expression::compile(inner, thresholds, lets), format});
        } catch (const std::invalid_argument& e) {
            fail(source, line, fmt::format("in 'message' {{{}}}: {}", inner, e.what()));
        }
        i = close + 1;
    }
    if (!literal.empty()) parts.push_back(MessagePart{literal, {}, {}});
    return parts;
}

} // namespace

Rule parseRuleFile(const std::string& text, const std::string& source) {
    toml::table t;
    try {
        t = toml::parse(text, source);
    } catch (const toml::parse_error& e) {
        fail(source, int64_t(e.source().begin.line), std::string(e.description()));
    }
    Rule r;
    r.source = source;
    r.id = requireString(t, "id", source);
    r.title = requireString(t, "title", source);
    r.fix = paragraph(requireString(t, "fix", source));
    r.description = paragraph(optionalString(t, "description", source));
    r.saving_explained = paragraph(requireString(t, "saving_explained", source));
    r.uncertainty = paragraph(optionalString(t, "uncertainty", source));
    const std::string sev = requireString(t, "severity", source);
    if (!parseSeverity(sev, r.severity))
        fail(source, lineOf(t.get("severity")), fmt::format("severity '{}' is not info, warning or error", sev));
    if (const toml::node* n = t.get("escalate_pct")) {
        if (!n->is_number()) fail(source, lineOf(n), "'escalate_pct' must be a number");
        r.escalate_pct = n->value<double>().value_or(NAN);
    }
    if (const toml::node* n = t.get("thresholds")) {
        const toml::table* th = n->as_table();
        if (!th) fail(source, lineOf(n), "[thresholds] must be a table of numbers");
        for (const auto& [k, v] : *th) {
            if (!v.is_number()) fail(source, lineOf(&v), fmt::format("threshold '{}' must be a number", k.str()));
            r.thresholds[std::string(k.str())] = v.value<double>().value_or(NAN);
        }
    }
    if (const toml::node* n = t.get("let")) {
        // Named sub-expressions may use each other: compile them in rounds until none is left.
        const toml::table* lt = n->as_table();
        if (!lt) fail(source, lineOf(n), "[let] must be a table of expressions");
        std::vector<std::pair<std::string, const toml::node*>> pending;
        for (const auto& [k, v] : *lt) {
            if (!v.is_string()) fail(source, lineOf(&v), fmt::format("let '{}' must be a string holding an expression", k.str()));
            pending.emplace_back(std::string(k.str()), &v);
        }
        while (!pending.empty()) {
            std::vector<std::pair<std::string, const toml::node*>> later;
            std::string last_error;
            int64_t last_line = 1;
            for (const auto& [name, node] : pending) {
                try {
                    r.lets[name] = rules::Expression::compile(node->as_string()->get(), r.thresholds, r.lets);
                } catch (const std::invalid_argument& e) {
                    later.emplace_back(name, node);
                    last_error = fmt::format("in let '{}': {}", name, e.what());
                    last_line = lineOf(node);
                }
            }
            if (later.size() == pending.size()) fail(source, last_line, last_error);
            pending = std::move(later);
        }
    }
    r.when = compileAt(t, "when", source, r.thresholds, r.lets, true);
    forEachTable(t, "change", source, [&](const toml::table& c) { r.changes.push_back(parseChange(c, source, r.thresholds, r.lets)); });
    r.formula_when = compileAt(t, "formula_when", source, r.thresholds, r.lets, false);
    r.saving_ms = compileAt(t, "saving_ms", source, r.thresholds, r.lets, r.changes.empty() || !r.formula_when.empty());
    if (const toml::node* n = t.get("correctness")) {
        if (!n->is_boolean()) fail(source, lineOf(n), "'correctness' must be true or false");
        r.correctness = n->value<bool>().value_or(false);
    }
    const std::string message = requireString(t, "message", source);
    r.message = compileMessage(message, source, lineOf(t.get("message")), r.thresholds, r.lets);
    parseConditionalFixes(t, "fixes", "fix", ConditionalFix::Mode::Replace, source, r);
    parseConditionalFixes(t, "fix_if", "text", ConditionalFix::Mode::Add, source, r);
    if (const toml::node* n = t.get("evidence")) {
        const toml::table* ev = n->as_table();
        if (!ev) fail(source, lineOf(n), "[evidence] must be a table");
        r.evidence_metrics = stringList(*ev, "metrics", source);
        for (const std::string& m : r.evidence_metrics)
            if (!metricCatalog().count(m))
                fail(source, lineOf(ev->get("metrics")), fmt::format("unknown metric '{}' in evidence", m));
        r.evidence_families = stringList(*ev, "families", source);
        r.evidence_classes = stringList(*ev, "classes", source);
        r.evidence_ops = stringList(*ev, "ops", source);
    }
    for (const auto& [k, v] : t) {
        static const char* known[] = {"id", "title", "severity", "escalate_pct", "description", "when", "saving_ms",
                                      "saving_explained", "message", "fix", "thresholds", "evidence", "let", "change",
                                      "fix_if", "fixes", "correctness", "uncertainty", "formula_when"};
        if (std::find(std::begin(known), std::end(known), k.str()) == std::end(known))
            fail(source, lineOf(&v), fmt::format("unknown key '{}'", k.str()));
    }
    return r;
}

} // namespace sightline
