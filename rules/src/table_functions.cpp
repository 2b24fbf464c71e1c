#include "table_functions.h"

#include "sightline/steady_sums.h"

#include <algorithm>

namespace sightline::rules {

namespace {

template <class Value>
double overOutliers(const Metrics& m, const std::string& arg, Value value) {
    double sum = 0;
    for (const auto& [name, ct] : m.host_outliers)
        if (globMatch(arg, name)) sum += value(ct);
    return sum / steadyStepCount(m);
}

// The hardware figures of kernel families or classes: averages over their kernels weighted by
// time; NaN without samples.
HwFigures hardwareOf(const Metrics& m, bool by_family, const std::string& arg) {
    HwAverage avg;
    for (const auto& [name, f] : by_family ? m.hw.families : m.hw.classes)
        if (by_family ? name == arg : globMatch(arg, name)) avg.add(f);
    return avg.result();
}

double smActive(const HwFigures& f, const Metrics&) { return f[HwMetric::SmActive]; }
double tensorActive(const HwFigures& f, const Metrics&) { return f[HwMetric::TensorActive]; }
double dramCeilingPct(const HwFigures& f, const Metrics& m) {
    return 100.0 * f[HwMetric::DramBytesPerS] / dramCeiling(m.device_name);
}

double gpuMs(const GpuRow& r) { return double(r.total_ns) / 1e6; }
double gpuCount(const GpuRow& r) { return double(r.calls); }

#define SIGHTLINE_HW_FUNCTION(by_family, figure) \
    [](const Metrics& m, const std::string& a) { return figure(hardwareOf(m, by_family, a), m); }

constexpr TableFunction kTableFunctions[] = {
    {"family_ms", "GPU time of a kernel family",
     [](const Metrics& m, const std::string& a) { return steadyClassSum(m, true, a, gpuMs); }},
    {"family_count", "activities of a kernel family",
     [](const Metrics& m, const std::string& a) { return steadyClassSum(m, true, a, gpuCount); }},
    {"class_ms", "GPU time of kernel classes (name, or prefix ending in *)",
     [](const Metrics& m, const std::string& a) { return steadyClassSum(m, false, a, gpuMs); }},
    {"class_count", "activities of kernel classes (name, or prefix ending in *)",
     [](const Metrics& m, const std::string& a) { return steadyClassSum(m, false, a, gpuCount); }},
    {"op_calls", "calls of ops (name, or prefix ending in *)",
     [](const Metrics& m, const std::string& a) { return steadyOpSum(m, a, [](const OpRow& r) { return double(r.calls); }); }},
    {"op_self_device_ms", "self GPU time of ops",
     [](const Metrics& m, const std::string& a) { return steadyOpSum(m, a, [](const OpRow& r) { return double(r.self_device_ns) / 1e6; }); }},
    {"op_device_ms", "GPU time of ops including their children's",
     [](const Metrics& m, const std::string& a) { return steadyOpSum(m, a, [](const OpRow& r) { return double(r.device_total_ns) / 1e6; }); }},
    {"op_cpu_ms", "self CPU time of ops",
     [](const Metrics& m, const std::string& a) { return steadyOpSum(m, a, [](const OpRow& r) { return double(r.self_cpu_ns) / 1e6; }); }},
    {"op_outlier_ms", "host time of ops' outlier calls beyond their op's median (per-shape setup: docs/metrics.md, \"Host outliers\")",
     [](const Metrics& m, const std::string& a) { return overOutliers(m, a, [](const CountTime& c) { return double(c.ns) / 1e6; }); }},
    {"op_outlier_calls", "outlier calls of ops: far longer than their op's median",
     [](const Metrics& m, const std::string& a) { return overOutliers(m, a, [](const CountTime& c) { return double(c.count); }); }},
    {"family_sm_active_pct", "SMs active during a kernel family's kernels, % (hardware counters)",
     SIGHTLINE_HW_FUNCTION(true, smActive)},
    {"family_tensor_pct", "tensor pipes active during a kernel family's kernels, %",
     SIGHTLINE_HW_FUNCTION(true, tensorActive)},
    {"family_dram_ceiling_pct", "DRAM bandwidth during a kernel family's kernels against the ceiling, %",
     SIGHTLINE_HW_FUNCTION(true, dramCeilingPct)},
    {"class_sm_active_pct", "SMs active during kernel classes' kernels, %",
     SIGHTLINE_HW_FUNCTION(false, smActive)},
    {"class_tensor_pct", "tensor pipes active during kernel classes' kernels, %",
     SIGHTLINE_HW_FUNCTION(false, tensorActive)},
    {"class_dram_ceiling_pct", "DRAM bandwidth during kernel classes' kernels against the ceiling, %",
     SIGHTLINE_HW_FUNCTION(false, dramCeilingPct)},
};

#undef SIGHTLINE_HW_FUNCTION

} // namespace

std::span<const TableFunction> tableFunctions() { return kTableFunctions; }

const TableFunction* findTableFunction(std::string_view name) {
    auto it = std::find_if(std::begin(kTableFunctions), std::end(kTableFunctions),
                           [&](const TableFunction& f) { return name == f.name; });
    return it == std::end(kTableFunctions) ? nullptr : it;
}

} // namespace sightline::rules
