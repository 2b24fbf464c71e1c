// Warm-up: steps that compile or still grow device memory are not the steady state
// (docs/metrics.md, "Steady state").
#include "sightline/metric_passes.h"

#include <algorithm>

#include <fmt/format.h>

namespace sightline {

void warmupPass(const MetricContext& ctx, std::vector<StepMetrics>& steps) {
    for (size_t i = 0; i < ctx.trace.cpu.size(); ++i) {
        if (ctx.cpu_step[i] < 0) continue;
        const uint8_t flags = ctx.flags(ctx.trace.cpu[i].name);
        StepMetrics& m = steps[size_t(ctx.cpu_step[i])];
        if (flags & MetricContext::kCompile) ++m.compile_events;
        if (flags & MetricContext::kAlloc) ++m.allocations;
    }
}

std::vector<size_t> steadyAfterWarmup(const std::vector<StepMetrics>& steps, std::string& why) {
    why.clear();
    std::vector<Step> ranges;
    std::vector<double> step_ms;
    for (const StepMetrics& m : steps) {
        ranges.push_back(m.step);
        step_ms.push_back(double(m.time_ns) / 1e6);
    }
    std::vector<size_t> steady = steadySteps(ranges, step_ms);
    uint64_t compiles = 0;
    for (const StepMetrics& m : steps) compiles += m.compile_events;
    std::erase_if(steady, [&](size_t i) { return steps[i].compile_events > 0; });
    if (steady.size() == 1 && steps[steady[0]].allocations > 0) {
        why = fmt::format("the only step left allocates device memory ({} allocation calls: the caching allocator is still "
                          "growing)",
                          steps[steady[0]].allocations);
        steady.clear();
    } else if (steady.empty() && compiles > 0) {
        why = fmt::format("every step compiles (torch.compile: {} compilation ranges)", compiles);
    } else if (steady.empty() && !steps.empty()) {
        why = "every step is warm-up";
    }
    if (steady.empty())
        for (size_t i = 0; i < steps.size(); ++i) steady.push_back(i);
    return steady;
}

} // namespace sightline
