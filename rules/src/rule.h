#pragma once
// A compiled rule (from one TOML file).
#include "expression.h"
#include "sightline/replay.h"
#include "sightline/rules.h"

#include <map>
#include <string>
#include <vector>

namespace sightline {

struct MessagePart {
    std::string literal;
    rules::Expression value; // empty for a literal part
    std::string format;      // "", ".0f", ".1f", ".2f", "pct", "ms"
};

// One change of a rule's fix (a [[change]] table), its numbers still expressions.
struct ChangeSpec {
    Change change; // kind, selector, group; amounts filled in at evaluation
    rules::Expression amount;
    rules::Expression low, high;           // the range of `amount` the fix's effect may take (both or neither)
    rules::Expression host_left;           // empty: 1
    rules::Expression host_low, host_high; // the range of `host_left` (both or neither)
};

// A part of the fix that applies only where its condition holds: it replaces the rule's own fix
// (a [[fixes]] table: the fix for one stack; the first that holds) or adds a sentence to it (a
// [[fix_if]] table: what this trace shows).
struct ConditionalFix {
    enum class Mode : uint8_t { Replace,
                                Add };
    rules::Expression when;
    std::string text;
    Mode mode = Mode::Add;
};

struct Rule {
    std::string id, title, fix, saving_explained, description, source;
    Severity severity = Severity::Warning;
    double escalate_pct = NAN;                     // error when the saving reaches this share of the step
    bool correctness = false;                      // a correctness problem: never demoted for a small saving
    std::string uncertainty;                       // why the rule's estimate is rough, whatever the trace (optional)
    std::vector<ChangeSpec> changes;               // the fix as the replay applies it; empty: saving_ms alone
    std::vector<ConditionalFix> conditional_fixes; // [[fixes]], then [[fix_if]], in file order
    std::map<std::string, double> thresholds;
    std::map<std::string, rules::Expression> lets;
    rules::Expression when;
    rules::Expression saving_ms;
    rules::Expression formula_when; // where it holds, saving_ms prices the fix even with a replay at hand (optional)
    std::vector<MessagePart> message;
    std::vector<std::string> evidence_metrics;
    std::vector<std::string> evidence_families;
    std::vector<std::string> evidence_classes;
    std::vector<std::string> evidence_ops;
};

// Parses and compiles one rule file; throws RuleFileError ("source:line: why").
Rule parseRuleFile(const std::string& text, const std::string& source);

struct RuleFileError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

} // namespace sightline
