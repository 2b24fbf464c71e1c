// computeMetrics: the passes of metric_passes.h in order, then the steady state and its summary.
// Formulas: docs/metrics.md.
#include "sightline/metric_passes.h"

#include "token_metrics.h"

#include <algorithm>

namespace sightline {

EventFilter Metrics::filterFor(const std::vector<size_t>& step_indices) const {
    std::vector<uint8_t> wanted(steps.size(), 0);
    for (size_t i : step_indices)
        if (i < wanted.size()) wanted[i] = 1;
    EventFilter f;
    f.cpu.resize(cpu_step.size());
    f.gpu.resize(gpu_step.size());
    for (size_t i = 0; i < cpu_step.size(); ++i) f.cpu[i] = cpu_step[i] >= 0 && wanted[size_t(cpu_step[i])];
    for (size_t i = 0; i < gpu_step.size(); ++i) f.gpu[i] = gpu_step[i] >= 0 && wanted[size_t(gpu_step[i])];
    return f;
}

Metrics computeMetrics(const Trace& trace, const OpTree& tree, const Taxonomy& taxonomy) {
    Metrics out;
    if (!trace.devices.empty()) {
        out.device_name = trace.devices[0].name;
        out.peak_tflops = peakTflops(out.device_name);
    }
    const MetricContext ctx(trace, tree, taxonomy);
    out.steps.resize(ctx.steps.size());
    for (size_t i = 0; i < ctx.steps.size(); ++i) out.steps[i].step = ctx.steps[i];
    for (auto pass : {hostPass, kernelPass, memopPass, timelinePass, commPass, flopsPass, tokensPass, warmupPass})
        pass(ctx, out.steps);
    out.cpu_step = ctx.cpu_step;
    out.gpu_step = ctx.gpu_step;

    out.steady = steadyAfterWarmup(out.steps, out.warmup_only);
    out.steady_tables = computeTables(trace, tree, taxonomy, out.filterFor(out.steady));
    // Without CUDA runtime calls and without the collector's host-sync hooks (the light mode where
    // the collector could not count launches, or a capture of format 3), synchronisations are
    // unknown, not absent, and so is the idle time after them (it is counted with the waiting for
    // launches).
    out.syncs_recorded = ctx.runtime_calls || trace.gpu.empty() || trace.metadata.count(std::string(kHostSyncsKey));
    out.host_recorded = ctx.host_recorded || trace.gpu.empty();
    out.launches_recorded = trace.gpu.empty() || std::any_of(ctx.launch.begin(), ctx.launch.end(), [](int32_t l) { return l >= 0; });
    hostOutlierMetrics(trace, tree, ctx.launch, out);
    out.tokens = summarizeTokens(out);
    computeHardwareMetrics(trace, taxonomy, out);
    summarize(out);
    return out;
}

} // namespace sightline
