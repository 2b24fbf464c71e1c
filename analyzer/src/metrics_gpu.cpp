// The GPU work of each step: time by kernel family and class, kernel counts and sizes, and
// memory operations (docs/metrics.md).
#include "sightline/metric_passes.h"

namespace sightline {

namespace {
constexpr int64_t kSmallKernelNs = 10'000;
} // namespace

void kernelPass(const MetricContext& ctx, std::vector<StepMetrics>& steps) {
    for (size_t gi = 0; gi < ctx.trace.gpu.size(); ++gi) {
        const int32_t s = ctx.gpu_step[gi];
        if (s < 0) continue;
        const GpuEvent& g = ctx.trace.gpu[gi];
        StepMetrics& m = steps[size_t(s)];
        const KernelClass& kc = ctx.classOf(g.name);
        const int64_t d = g.duration();
        m.gpu_time_ns += d;
        CountTime& fam = m.families[kc.family];
        ++fam.count;
        fam.ns += d;
        CountTime& cls = m.classes[kc.name];
        ++cls.count;
        cls.ns += d;
        if (g.kind != GpuKind::Kernel) continue;
        ++m.kernels;
        if (d < kSmallKernelNs) {
            ++m.small_kernels.count;
            m.small_kernels.ns += d;
        }
    }
}

void memopPass(const MetricContext& ctx, std::vector<StepMetrics>& steps) {
    auto add = [](CountTime& ct, int64_t d) {
        ++ct.count;
        ct.ns += d;
    };
    for (size_t gi = 0; gi < ctx.trace.gpu.size(); ++gi) {
        const int32_t s = ctx.gpu_step[gi];
        const GpuEvent& g = ctx.trace.gpu[gi];
        if (s < 0 || (g.kind != GpuKind::Memcpy && g.kind != GpuKind::Memset)) continue;
        StepMetrics& m = steps[size_t(s)];
        const int64_t d = g.duration();
        add(g.kind == GpuKind::Memcpy ? m.memcpy : m.memset, d);
        const std::string_view n = ctx.trace.str(g.name);
        if (n.starts_with("Memcpy DtoD")) add(m.dtod, d);
        if (n.starts_with("Memcpy DtoH")) add(m.dtoh, d);
    }
}

} // namespace sightline
