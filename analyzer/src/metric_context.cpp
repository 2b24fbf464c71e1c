// What the metric passes share: steps, each event's step, each GPU activity's launch call, and
// what each name is (docs/metrics.md).
#include "sightline/metric_passes.h"

#include "sightline/step_names.h"

#include <algorithm>

namespace sightline {

namespace {

// torch.compile's phases, as its dynamo_timed ranges name them ("compile_fx (dynamo_timed)").
bool isCompile(std::string_view n) { return n.ends_with("(dynamo_timed)"); }

// Device memory allocation: the caching allocator growing (or expandable segments mapping more).
bool isAllocation(std::string_view n) {
    return n == "cudaMalloc" || n == "cudaMallocAsync" || n.starts_with("cuMemAlloc") || n == "cuMemCreate";
}

bool isDataLoader(std::string_view n) {
    return n.find("DataLoader") != std::string_view::npos || n.find("dataloader") != std::string_view::npos;
}

} // namespace

bool isLaunchCall(std::string_view n) {
    return n.starts_with("cudaLaunchKernel") || n.starts_with("cuLaunchKernel") || n.starts_with("cudaLaunchCooperativeKernel") ||
        n == "cudaGraphLaunch" || n == "cuGraphLaunch";
}

bool isHostSyncCall(std::string_view n) {
    return n == "cudaDeviceSynchronize" || n == "cudaStreamSynchronize" || n == "cudaEventSynchronize" ||
        n == "cuCtxSynchronize" || n == "cuStreamSynchronize" || n == "cuEventSynchronize" || n == "cudaMemcpy" ||
        n == "cuMemcpyDtoH_v2";
}

// The runtime or driver call with the activity's correlation id.
std::vector<int32_t> launchCalls(const Trace& trace) {
    std::vector<std::pair<int64_t, int32_t>> api_by_corr;
    for (size_t i = 0; i < trace.cpu.size(); ++i) {
        const CpuEvent& e = trace.cpu[i];
        if ((e.kind == CpuKind::Runtime || e.kind == CpuKind::Driver) && e.correlation != 0)
            api_by_corr.emplace_back(e.correlation, int32_t(i));
    }
    std::sort(api_by_corr.begin(), api_by_corr.end());
    std::vector<int32_t> out(trace.gpu.size(), -1);
    for (size_t gi = 0; gi < trace.gpu.size(); ++gi) {
        const int64_t corr = trace.gpu[gi].correlation;
        if (corr == 0) continue;
        auto it = std::lower_bound(api_by_corr.begin(), api_by_corr.end(), std::make_pair(corr, int32_t(0)));
        if (it != api_by_corr.end() && it->first == corr) out[gi] = it->second;
    }
    return out;
}

MetricContext::MetricContext(const Trace& t, const OpTree& op_tree, const Taxonomy& tax)
    : trace(t), tree(op_tree), taxonomy(tax), steps(detectSteps(t, &tax)), m_flags(t.strings.size(), 0),
      m_class_known(t.strings.size(), 0), m_classes(t.strings.size()) {
    launch = launchCalls(t);
    cpu_step.assign(t.cpu.size(), -1);
    for (size_t i = 0; i < t.cpu.size(); ++i) {
        const CpuEvent& e = t.cpu[i];
        runtime_calls |= e.kind == CpuKind::Runtime;
        host_recorded |= e.kind == CpuKind::Op || e.kind == CpuKind::UserAnnotation;
        cpu_step[i] = stepOf(e.start_ns);
    }
    gpu_step.assign(t.gpu.size(), -1);
    const bool gpu_clock = !steps.empty() && steps.front().gpu_clock;
    for (size_t gi = 0; gi < t.gpu.size(); ++gi) {
        if (t.gpu[gi].kind == GpuKind::Annotation) continue;
        // Steps found on the GPU's timeline hold the activities that ran in them, and their
        // launch calls with them.
        gpu_step[gi] = stepOf(gpu_clock ? t.gpu[gi].start_ns : launchBegin(gi));
        if (gpu_clock && launch[gi] >= 0) cpu_step[size_t(launch[gi])] = gpu_step[gi];
    }
}

uint8_t MetricContext::flags(StringId id) const {
    constexpr uint8_t kKnown = 128;
    uint8_t& f = m_flags[id.value];
    if (!(f & kKnown)) {
        const std::string_view n = trace.str(id);
        f = uint8_t(kKnown | (isHostSyncCall(n) ? kSync : 0) | (isDataLoader(n) ? kLoader : 0) |
                    (n.starts_with("sightline.batch") ? kBatch : 0) | (isLaunchCall(n) ? kLaunch : 0) |
                    (step_names::isOptimizerStep(n) ? kOptimizer : 0) | (isCompile(n) ? kCompile : 0) |
                    (isAllocation(n) ? kAlloc : 0));
    }
    return uint8_t(f & ~kKnown);
}

const KernelClass& MetricContext::classOf(StringId id) const {
    if (!m_class_known[id.value]) {
        m_classes[id.value] = taxonomy.classify(trace.str(id));
        m_class_known[id.value] = 1;
    }
    return m_classes[id.value];
}

int32_t MetricContext::stepOf(int64_t ts) const {
    auto it = std::upper_bound(steps.begin(), steps.end(), ts, [](int64_t v, const Step& s) { return v < s.start_ns; });
    if (it == steps.begin()) return -1;
    --it;
    return ts < it->end_ns ? int32_t(it - steps.begin()) : -1;
}

int64_t MetricContext::launchBegin(size_t gi) const {
    return launch[gi] >= 0 ? trace.cpu[size_t(launch[gi])].start_ns : trace.gpu[gi].start_ns;
}

int64_t MetricContext::launchEnd(size_t gi) const {
    return launch[gi] >= 0 ? trace.cpu[size_t(launch[gi])].end_ns : trace.gpu[gi].start_ns;
}

} // namespace sightline
