#pragma once
// `sightline diff BEFORE AFTER`: what changed between two traces, per step.
#include "sightline/report/report.h"

#include <cmath>

#include <string>
#include <vector>

namespace sightline {

struct DiffRow {
    std::string name;
    std::string detail;  // kind or family
    double before = NAN; // per step
    double after = NAN;
    double calls_before = 0, calls_after = 0;
    double delta() const { return (std::isnan(after) ? 0 : after) - (std::isnan(before) ? 0 : before); }
    double deltaPct() const { return before > 0 ? 100.0 * delta() / before : NAN; }
};

struct Diff {
    std::string before_source, after_source;
    std::vector<DiffRow> metrics;        // steady-state metrics, per step
    std::vector<DiffRow> kernel_classes; // ms per step, largest changes first
    std::vector<DiffRow> ops;            // self CPU + self GPU ms per step, largest changes first
    std::vector<std::string> findings_new, findings_resolved, findings_kept;
    double step_before_ms = NAN, step_after_ms = NAN;
    double max_regression_pct = 5.0;
    bool regression() const;
    double stepChangePct() const;
};

Diff computeDiff(const Report& before, const Report& after, double max_regression_pct);
std::string formatDiffText(const Diff& d, size_t rows, bool markdown);
std::string formatDiffJson(const Diff& d);

} // namespace sightline
