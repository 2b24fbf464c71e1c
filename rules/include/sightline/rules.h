#pragma once
// The advisor: rules kept as data (one TOML file each, docs/rules.md), evaluated on the metrics
// and steady-state tables of a trace into findings with evidence, a saving and the fix.
#include "sightline/metrics.h"
#include "sightline/replay.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace sightline {

enum class Severity { Info = 0,
                      Warning = 1,
                      Error = 2 };
const char* toString(Severity s);
bool parseSeverity(std::string_view text, Severity& out);

// What an evidence row names: one of the rule's metrics, or a kernel class or an op of the
// steady-state tables.
enum class EvidenceKind { Metric,
                          KernelClass,
                          Op };
const char* toString(EvidenceKind k); // "metric", "kernel class", "op"

struct EvidenceRow {
    EvidenceKind kind = EvidenceKind::Metric;
    std::string name;
    double calls = 0; // per step (kernel class and op rows)
    double ms = 0;    // per step (kernel class and op rows)
    double value = 0; // the metric's value (metric rows)
};

struct Finding {
    std::string rule;
    std::string title;
    Severity severity = Severity::Info;
    std::string message;
    std::string fix;
    std::string saving_explained;
    double saving_ms = 0;  // per step
    double saving_pct = 0; // of the step time
    // The range the saving may take where the fix's effect is not known well (NaN when the rule
    // states none), and why the estimate is uncertain (empty when it is within +-25%).
    double saving_low_ms = NAN, saving_high_ms = NAN;
    std::string uncertainty;
    bool replayed = false; // the saving comes from the what-if replay (else from the rule's formula)
    // Set when the fix cuts much more work than the step gains: how much, and why the rest does not count.
    std::string critical_path;
    bool minor = false; // worth under 1% of the step: at most info, listed apart
    std::vector<EvidenceRow> evidence;
    std::string source; // the rule file
    // Why the finding cannot be trusted (no step after warm-up); empty when it can.
    std::string unreliable;
};

// Several findings' fixes replayed together (RuleSet::combined).
struct CombinedSaving {
    std::vector<std::string> rules;    // those replayed
    std::vector<std::string> left_out; // asked for, but not firing or not replayable
    double saving_ms = NAN, saving_pct = NAN;
};

struct Rule; // defined in the rules library

// A rule file that could not be used: "FILE:LINE: what".
struct RuleError {
    std::string message;
};

class RuleSet {
public:
    RuleSet();
    ~RuleSet();
    RuleSet(RuleSet&&) noexcept;
    RuleSet& operator=(RuleSet&&) noexcept;

    // The built-in catalog (rules/catalog/*.toml, compiled in).
    static RuleSet builtin();
    // Adds every *.toml of a directory (or one file); a rule with the id of an earlier one
    // replaces it. Files with errors are skipped and reported in errors().
    void addPath(const std::filesystem::path& path);
    // Adds one rule file's text (`source` names it in errors).
    void addText(const std::string& text, const std::string& source);

    const std::vector<RuleError>& errors() const { return m_errors; }
    size_t size() const;
    std::vector<std::string> ids() const;
    // "id — title" and the rule's documentation, or empty when unknown.
    std::string explain(const std::string& id) const;

    // The findings on a trace's metrics. With a replay model (built from the same trace and
    // metrics), rules that state their fix as changes have it priced by the replay; without one,
    // by their saving_ms formula where they have one.
    std::vector<Finding> evaluate(const Metrics& metrics, const ReplayModel* replay = nullptr) const;
    // The fixes of several rules applied at once in one replay (each rule's changes at its
    // estimate): what they save together, where their findings overlap. Rules that do not fire,
    // state no changes or are priced by a formula are left out (CombinedSaving::rules names those
    // replayed); saving_ms is NaN when none is.
    CombinedSaving combined(const Metrics& metrics, const ReplayModel& replay, const std::vector<std::string>& ids) const;

private:
    std::vector<std::shared_ptr<const Rule>> m_rules;
    std::vector<RuleError> m_errors;
};

} // namespace sightline
