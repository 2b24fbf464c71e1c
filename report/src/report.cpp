#include "sightline/report/report.h"

#include <algorithm>
#include <charconv>
#include <climits>

#include "sightline/error.h"

#include <fmt/format.h>

namespace sightline {

std::string formatDuration(int64_t ns) {
    const double us = double(ns) / 1000.0;
    if (us >= 1e6 || us <= -1e6) return fmt::format("{:.3f}s", us / 1e6);
    if (us >= 1e3 || us <= -1e3) return fmt::format("{:.3f}ms", us / 1e3);
    return fmt::format("{:.3f}us", us);
}

Report buildReport(const Trace& trace, const Taxonomy& taxonomy, const RuleSet& rules, const ReportOptions& options) {
    return buildReport(trace, buildOpTree(trace), taxonomy, rules, options);
}

Report buildReport(const Trace& trace, const OpTree& tree, const Taxonomy& taxonomy, const RuleSet& rules,
                   const ReportOptions& options) {
    Report r;
    r.source = trace.source;
    r.format = trace.format;
    r.devices = trace.devices;
    r.metadata = trace.metadata;
    r.quality = trace.quality;
    int64_t first = INT64_MAX, last = INT64_MIN;
    for (const CpuEvent& e : trace.cpu) {
        switch (e.kind) {
        case CpuKind::Op:
        case CpuKind::PythonFunction: ++r.cpu_ops; break;
        case CpuKind::UserAnnotation: ++r.user_annotations; break;
        case CpuKind::Runtime:
        case CpuKind::Driver: ++r.api_calls; break;
        }
        first = std::min(first, e.start_ns);
        last = std::max(last, e.end_ns);
    }
    for (const GpuEvent& g : trace.gpu) {
        switch (g.kind) {
        case GpuKind::Kernel: ++r.kernels; break;
        case GpuKind::Memcpy: ++r.memcpys; break;
        case GpuKind::Memset: ++r.memsets; break;
        case GpuKind::Annotation: ++r.gpu_annotations; break;
        }
        first = std::min(first, g.start_ns);
        last = std::max(last, g.end_ns);
    }
    r.span_ns = last > first ? last - first : 0;
    r.links = tree.links;
    r.metrics = computeMetrics(trace, tree, taxonomy);
    EventFilter scope;
    if (options.step.empty()) {
        r.tables = computeTables(trace, tree, taxonomy);
    } else if (options.step == "all") {
        std::vector<size_t> every(r.metrics.steps.size());
        for (size_t i = 0; i < every.size(); ++i) every[i] = i;
        scope = r.metrics.filterFor(every);
        r.tables = computeTables(trace, tree, taxonomy, scope);
        r.tables_scope = fmt::format("all {} steps", every.size());
    } else if (options.step == "steady") {
        r.tables = r.metrics.steady_tables;
        if (!trace.collectives.empty()) scope = r.metrics.filterFor(r.metrics.steady);
        r.tables_scope = fmt::format("the {} steady-state steps", r.metrics.steady.size());
    } else {
        size_t k = 0;
        const auto [p, ec] = std::from_chars(options.step.data(), options.step.data() + options.step.size(), k);
        if (ec != std::errc() || p != options.step.data() + options.step.size() || k == 0 || k > r.metrics.steps.size())
            throw InputError(fmt::format("--step {}: the trace has {} step(s); give 1..{}, 'steady' or 'all'", options.step,
                                         r.metrics.steps.size(), r.metrics.steps.size()));
        scope = r.metrics.filterFor({k - 1});
        r.tables = computeTables(trace, tree, taxonomy, scope);
        r.tables_scope = fmt::format("step {} ({})", k, r.metrics.steps[k - 1].step.name);
    }
    r.comms = commTable(trace, tree, taxonomy, scope);
    const ReplayModel replay(trace, tree, taxonomy, r.metrics);
    r.findings = rules.evaluate(r.metrics, &replay);
    if (!options.combine.empty()) r.combined = rules.combined(r.metrics, replay, options.combine);
    sortOps(r.tables.ops, options.op_sort);
    sortGpu(r.tables.kernel_classes, options.gpu_sort);
    sortGpu(r.tables.kernels, options.gpu_sort);
    return r;
}

} // namespace sightline
