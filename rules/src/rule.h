#pragma once
// A compiled rule (from one TOML file).
#include "expression.h"
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

// A fix for one stack: used instead of the rule's own when its condition holds ([[fixes]]).
struct FixVariant {
    rules::Expression when;
    std::string fix;
};

struct Rule {
    std::string id, title, fix, saving_explained, description, source;
    std::vector<FixVariant> fixes; // the first whose `when` holds replaces `fix`
    Severity severity = Severity::Warning;
    double escalate_pct = NAN; // error when the saving reaches this share of the step
    std::map<std::string, double> thresholds;
    std::map<std::string, rules::Expression> lets;
    rules::Expression when;
    rules::Expression saving_ms;
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
