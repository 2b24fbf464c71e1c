#pragma once
// Sums over the steady-state tables (Metrics::steady_tables) of the rows whose names match a
// pattern (a name, or a prefix ending in '*': globMatch), per steady step: what the rules' table
// functions return (rules/src/table_functions.cpp) and what the analyzer's own fingerprints read
// (padding_sim.h's chunkLoop), so that both read a trace alike.
#include "sightline/metrics.h"
#include "sightline/strings.h"

#include <algorithm>
#include <string_view>

namespace sightline {

// The steady steps the sums are divided by (at least one).
inline double steadyStepCount(const Metrics& m) { return std::max<double>(1.0, double(m.steady.size())); }

// value(row) summed over the kernel classes whose name matches (by_family: whose family is the
// pattern), per steady step.
template <class Value>
double steadyClassSum(const Metrics& m, bool by_family, std::string_view pattern, Value value) {
    double sum = 0;
    for (const GpuRow& r : m.steady_tables.kernel_classes)
        if (by_family ? r.family == pattern : globMatch(pattern, r.name)) sum += value(r);
    return sum / steadyStepCount(m);
}

// value(row) summed over the ops whose name matches, per steady step.
template <class Value>
double steadyOpSum(const Metrics& m, std::string_view pattern, Value value) {
    double sum = 0;
    for (const OpRow& r : m.steady_tables.ops)
        if (globMatch(pattern, r.name)) sum += value(r);
    return sum / steadyStepCount(m);
}

} // namespace sightline
