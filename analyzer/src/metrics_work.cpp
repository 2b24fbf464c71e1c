// What a step computes: FLOPs from recorded shapes, and tokens, padding and batches from
// sightline.batch annotations (docs/metrics.md).
#include "sightline/metric_passes.h"

#include "token_metrics.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace sightline {

void flopsPass(const MetricContext& ctx, std::vector<StepMetrics>& steps) {
    const Trace& trace = ctx.trace;
    for (size_t i = 0; i < trace.cpu.size(); ++i) {
        const CpuEvent& e = trace.cpu[i];
        if (ctx.cpu_step[i] < 0 || e.input_dims.empty() || !ctx.tree.counted[i]) continue;
        const double f = opFlops(trace.str(e.name), trace.str(e.input_dims));
        double& sum = steps[size_t(ctx.cpu_step[i])].flops;
        if (!std::isnan(f)) sum = (std::isnan(sum) ? 0.0 : sum) + f;
    }
}

void tokensPass(const MetricContext& ctx, std::vector<StepMetrics>& steps) {
    // A batch annotation counts once: the same text over a range inside (or around) one already
    // counted is the same batch recorded twice (a trainer that opens both a RecordFunction range,
    // which the bridge records, and an NVTX range, which CUPTI records, with one name).
    struct Span {
        int64_t start, end;
    };
    std::unordered_map<uint32_t, std::vector<Span>> seen_by_name;
    auto newBatch = [&](const CpuEvent& e) {
        std::vector<Span>& seen = seen_by_name[e.name.value];
        for (const Span& b : seen)
            if ((b.start <= e.start_ns && e.end_ns <= b.end) || (e.start_ns <= b.start && b.end <= e.end_ns)) return false;
        seen.push_back({e.start_ns, e.end_ns});
        return true;
    };
    const Trace& trace = ctx.trace;
    std::vector<BatchMark> marks;
    for (size_t i = 0; i < trace.cpu.size(); ++i) {
        const CpuEvent& e = trace.cpu[i];
        if (!(ctx.flags(e.name) & MetricContext::kBatch) || !newBatch(e)) continue;
        int32_t s = ctx.cpu_step[i];
        if (s < 0) {
            // Batch annotations often sit just before the step range: give them to the next step.
            auto it = std::upper_bound(ctx.steps.begin(), ctx.steps.end(), e.start_ns, [](int64_t v, const Step& st) { return v < st.start_ns; });
            s = it != ctx.steps.end() ? int32_t(it - ctx.steps.begin()) : -1;
        }
        marks.push_back({parseBatchAnnotation(trace.str(e.name)), s, trace.pidOf(e)});
    }
    assignBatches(marks, steps);
}

} // namespace sightline
