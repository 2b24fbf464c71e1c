// Communication in each step: collectives, their time, and the part with no compute beside it
// (docs/metrics.md).
#include "sightline/metric_passes.h"

#include "intervals.h"

namespace sightline {

void commPass(const MetricContext& ctx, std::vector<StepMetrics>& steps) {
    std::vector<std::vector<Interval>> comm(steps.size()), work(steps.size());
    for (size_t gi = 0; gi < ctx.trace.gpu.size(); ++gi) {
        const int32_t s = ctx.gpu_step[gi];
        if (s < 0) continue;
        const GpuEvent& g = ctx.trace.gpu[gi];
        const bool is_comm = ctx.classOf(g.name).isCommunication();
        if (is_comm) ++steps[size_t(s)].collectives;
        (is_comm ? comm : work)[size_t(s)].emplace_back(g.start_ns, g.end_ns);
    }
    for (size_t s = 0; s < steps.size(); ++s) {
        const auto comm_merged = mergedIntervals(std::move(comm[s]));
        steps[s].comm_ns = totalLength(comm_merged);
        steps[s].comm_exposed_ns = steps[s].comm_ns - overlapLength(comm_merged, mergedIntervals(std::move(work[s])));
    }
}

} // namespace sightline
