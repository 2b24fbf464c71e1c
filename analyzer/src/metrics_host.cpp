// The host's work per step: CUDA API time, op dispatch, launch and synchronisation calls, the
// DataLoader, and the GPU time the optimizer step launched (docs/metrics.md).
#include "sightline/metric_passes.h"

namespace sightline {

void hostPass(const MetricContext& ctx, std::vector<StepMetrics>& steps) {
    const Trace& trace = ctx.trace;
    const OpTree& tree = ctx.tree;
    for (size_t i = 0; i < trace.cpu.size(); ++i) {
        const int32_t s = ctx.cpu_step[i];
        if (s < 0) continue;
        const CpuEvent& e = trace.cpu[i];
        const uint8_t flags = ctx.flags(e.name);
        StepMetrics& m = steps[size_t(s)];
        if (tree.counted[i]) {
            if (e.kind == CpuKind::Runtime || e.kind == CpuKind::Driver) {
                m.api_ns += e.duration();
                m.cpu_dispatch_ns += e.duration();
                if (flags & MetricContext::kLaunch) ++m.launches;
                if (flags & MetricContext::kSync) {
                    ++m.sync_calls;
                    m.sync_wait_ns += e.duration();
                }
            } else if (e.kind == CpuKind::Op) {
                m.cpu_dispatch_ns += tree.self_cpu_ns[i];
            }
        }
        // Only the outermost DataLoader op counts (the iterator's __next__ holds the others).
        const int32_t parent = tree.parent[i];
        if ((flags & MetricContext::kLoader) && (parent == OpTree::kNone || !(ctx.flags(trace.cpu[size_t(parent)].name) & MetricContext::kLoader)))
            m.dataloader_ns += e.duration();
        if (e.kind == CpuKind::UserAnnotation && (flags & MetricContext::kOptimizer))
            m.optimizer_gpu_ns += tree.device_total_ns[i];
    }
}

} // namespace sightline
