// Per-step metrics and the steady-state summary. Formulas: docs/metrics.md.
#include "sightline/metrics.h"

#include "intervals.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <numeric>
#include <unordered_map>

namespace sightline {

namespace {

constexpr int64_t kSmallKernelNs = 10'000;

bool isLaunch(std::string_view n) {
    return n.starts_with("cudaLaunchKernel") || n.starts_with("cuLaunchKernel") || n.starts_with("cudaLaunchCooperativeKernel") ||
           n == "cudaGraphLaunch" || n == "cuGraphLaunch";
}

bool isSync(std::string_view n) {
    return n == "cudaDeviceSynchronize" || n == "cudaStreamSynchronize" || n == "cudaEventSynchronize" ||
           n == "cuCtxSynchronize" || n == "cuStreamSynchronize" || n == "cuEventSynchronize" || n == "cudaMemcpy" ||
           n == "cuMemcpyDtoH_v2";
}

bool isDataLoader(std::string_view n) {
    return n.find("DataLoader") != std::string_view::npos || n.find("dataloader") != std::string_view::npos;
}

// "sightline.batch real_tokens=3000 padded_tokens=4096 sequences=3 packed=1 cu_seqlens=1"
void parseBatch(std::string_view text, StepMetrics& m) {
    size_t pos = text.find(' ');
    while (pos != std::string_view::npos && pos < text.size()) {
        while (pos < text.size() && text[pos] == ' ') ++pos;
        const size_t end = std::min(text.find(' ', pos), text.size());
        const std::string_view kv = text.substr(pos, end - pos);
        pos = end;
        const size_t eq = kv.find('=');
        if (eq == std::string_view::npos) continue;
        const std::string_view key = kv.substr(0, eq), val = kv.substr(eq + 1);
        double v = 0;
        if (std::from_chars(val.data(), val.data() + val.size(), v).ec != std::errc()) continue;
        auto add = [&](double& field) { field = (std::isnan(field) ? 0.0 : field) + v; };
        if (key == "real_tokens") add(m.real_tokens);
        else if (key == "padded_tokens") add(m.padded_tokens);
        else if (key == "sequences") add(m.sequences);
        else if (key == "packed") m.packed = m.packed || v != 0;
        else if (key == "cu_seqlens" || key == "boundaries") m.boundaries = m.boundaries || v != 0;
    }
}

struct HostSpan {
    int64_t start, end;
};

// Host spans sorted by start, with the running maximum of their ends, to ask in O(log n) whether
// any span overlaps an interval.
class SpanIndex {
public:
    void add(int64_t start, int64_t end) { m_spans.push_back({start, end}); }
    void finish() {
        std::sort(m_spans.begin(), m_spans.end(), [](const HostSpan& a, const HostSpan& b) { return a.start < b.start; });
        m_max_end.resize(m_spans.size());
        int64_t mx = INT64_MIN;
        for (size_t i = 0; i < m_spans.size(); ++i) m_max_end[i] = mx = std::max(mx, m_spans[i].end);
    }
    // Any span with start < b and end > a.
    bool overlaps(int64_t a, int64_t b) const {
        auto it = std::lower_bound(m_spans.begin(), m_spans.end(), b, [](const HostSpan& s, int64_t v) { return s.start < v; });
        return it != m_spans.begin() && m_max_end[size_t(it - m_spans.begin()) - 1] > a;
    }
    const std::vector<HostSpan>& spans() const { return m_spans; }

private:
    std::vector<HostSpan> m_spans;
    std::vector<int64_t> m_max_end;
};

} // namespace

const std::map<std::string, std::string>& metricCatalog() {
    static const std::map<std::string, std::string> catalog = {
        {"steps.count", "steps found in the trace"},
        {"steps.steady", "steps in the steady state (warm-up left out)"},
        {"step.time_ms", "step time"},
        {"gpu.busy_ms", "time any GPU activity ran (union over streams)"},
        {"comm.collectives", "communication (NCCL) kernels a step"},
        {"ranks.count", "ranks analysed together (sightline ranks)"},
        {"ranks.straggler", "the rank the others wait on at the collectives, -1 when none"},
        {"ranks.straggler_delay_ms", "how long after all the others the straggler reaches the collectives, a step"},
        {"ranks.straggler_delay_pct", "that delay as a share of the mean step time, %"},
        {"ranks.heaviest", "the rank with the most compute"},
        {"ranks.imbalance_pct", "compute of the heaviest rank above the mean of the ranks, %"},
        {"ranks.excess_compute_ms", "compute of the heaviest rank above the mean, a step"},
        {"comm.ms", "time communication kernels ran (union)"},
        {"comm.exposed_ms", "communication time with no other GPU work beside it"},
        {"comm.exposed_pct", "exposed communication as a share of the step time, %"},
        {"gpu.busy_pct", "GPU busy share of the step, what nvidia-smi calls utilization"},
        {"gpu.time_ms", "sum of GPU activity durations"},
        {"gpu.idle_ms", "step time the compute stream stood idle"},
        {"kernels.count", "kernels per step"},
        {"kernels.small_count", "kernels shorter than 10 us per step"},
        {"kernels.small_share", "share of kernels shorter than 10 us"},
        {"kernels.small_ms", "GPU time of kernels shorter than 10 us"},
        {"kernels.small_time_share", "share of GPU time in kernels shorter than 10 us"},
        {"launches.count", "kernel launch calls per step"},
        {"launches.per_s", "kernel launches per second of step time"},
        {"launches.host_ms_each", "host dispatch time per kernel launch (cpu.dispatch_ms / launches.count)"},
        {"api.ms", "host time in CUDA runtime and driver calls"},
        {"cpu.dispatch_ms", "host time in op dispatch: self CPU of ops plus CUDA API time, all threads"},
        {"cpu.dispatch_ratio", "host dispatch time over GPU busy time"},
        {"idle.launch_ms", "compute-stream idle time waiting for the host to issue work"},
        {"idle.sync_ms", "compute-stream idle time after a host synchronisation"},
        {"idle.dataloader_ms", "compute-stream idle time while the host waited for data"},
        {"idle.dependency_ms", "compute-stream idle time with work queued behind another stream or event"},
        {"idle.tail_ms", "compute-stream idle time after the step's last GPU work (final sync, logging)"},
        {"idle.gaps", "idle gaps on the compute stream"},
        {"memcpy.count", "memcpy operations per step"},
        {"memcpy.ms", "memcpy GPU time"},
        {"memcpy.dtod_count", "device-to-device copies per step"},
        {"memcpy.dtod_ms", "device-to-device copy time"},
        {"memcpy.dtoh_count", "device-to-host copies per step"},
        {"memset.count", "memsets per step"},
        {"memset.ms", "memset GPU time"},
        {"memops.share", "share of GPU time in memcpy and memset"},
        {"sync.calls", "host synchronisation calls per step"},
        {"sync.mid_step", "synchronisations followed by more GPU work in the same step"},
        {"dataloader.ms", "host time in DataLoader ops"},
        {"optimizer.gpu_ms", "GPU time of the optimizer step"},
        {"flops.per_step", "FLOPs of GEMM and attention ops from recorded shapes"},
        {"flops.tflops_per_s", "achieved TFLOP/s over the step time"},
        {"mfu.pct", "model FLOPs utilisation against the device's bf16 dense peak"},
        {"tokens.real", "real tokens per step (sightline.batch annotations)"},
        {"tokens.padded", "padded tokens per step (sightline.batch annotations)"},
        {"tokens.per_s", "real tokens per second"},
        {"padding.efficiency", "real over padded tokens"},
        {"batch.packed", "1 when batches are annotated as packed"},
        {"hw.sm_active_pct", "SMs active, % of the step (hardware counters, --hw)"},
        {"hw.warps_active_pct", "warps active against the most the SMs hold, % of the step (hardware counters)"},
        {"hw.tensor_pct", "tensor pipes active, % of the step (hardware counters)"},
        {"hw.dram_pct", "DRAM throughput, % of its peak (hardware counters)"},
        {"hw.dram_tbps", "DRAM bandwidth, read + write, TB/s (hardware counters)"},
        {"hw.dram_ceiling_pct", "DRAM bandwidth against the device's measured ceiling, %"},
        {"hw.covered_pct", "share of the step time hardware samples cover, %"},
        {"batch.boundaries", "1 when packed batches carry sequence boundaries (cu_seqlens)"},
        {"batch.sequences", "sequences per step"},
    };
    return catalog;
}

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
    const std::vector<Step> steps = detectSteps(trace);
    out.steps.resize(steps.size());
    for (size_t i = 0; i < steps.size(); ++i)
        out.steps[i].step = steps[i];
    auto stepOf = [&](int64_t ts) -> int32_t {
        auto it = std::upper_bound(steps.begin(), steps.end(), ts, [](int64_t v, const Step& s) { return v < s.start_ns; });
        if (it == steps.begin()) return -1;
        --it;
        return ts < it->end_ns ? int32_t(it - steps.begin()) : -1;
    };

    // Launch time of each GPU activity: the start of the API call with its correlation id.
    std::vector<std::pair<int64_t, uint32_t>> api_by_corr;
    bool runtime_calls = false; // without them, a trace of GPU work holds no host synchronisation
    for (size_t i = 0; i < trace.cpu.size(); ++i) {
        const CpuEvent& e = trace.cpu[i];
        runtime_calls |= e.kind == CpuKind::Runtime;
        if ((e.kind == CpuKind::Runtime || e.kind == CpuKind::Driver) && e.correlation != 0)
            api_by_corr.emplace_back(e.correlation, uint32_t(i));
    }
    std::sort(api_by_corr.begin(), api_by_corr.end());
    auto launchOf = [&](const GpuEvent& g) -> const CpuEvent* {
        auto it = std::lower_bound(api_by_corr.begin(), api_by_corr.end(), std::make_pair(g.correlation, uint32_t(0)));
        return (g.correlation != 0 && it != api_by_corr.end() && it->first == g.correlation) ? &trace.cpu[it->second] : nullptr;
    };

    // A batch annotation counts once: the same text over a range inside (or around) one already
    // counted is the same batch recorded twice (a trainer that opens both a RecordFunction range,
    // which the bridge records, and an NVTX range, which CUPTI records, with one name).
    std::unordered_map<uint32_t, std::vector<HostSpan>> batches_seen;
    auto newBatch = [&](const CpuEvent& e) {
        std::vector<HostSpan>& seen = batches_seen[e.name.value];
        for (const HostSpan& b : seen)
            if ((b.start <= e.start_ns && e.end_ns <= b.end) || (e.start_ns <= b.start && b.end <= e.end_ns)) return false;
        seen.push_back({e.start_ns, e.end_ns});
        return true;
    };

    // Host spans that explain idle gaps.
    SpanIndex syncs, loaders;
    std::vector<std::vector<int64_t>> launch_times(steps.size());
    std::vector<int32_t>& cpu_step = out.cpu_step;
    cpu_step.assign(trace.cpu.size(), -1);
    out.gpu_step.assign(trace.gpu.size(), -1);
    // What each distinct name is, decided once per name rather than once per event.
    enum NameFlag : uint8_t { kSync = 1, kLoader = 2, kBatch = 4, kLaunch = 8, kOptimizer = 16, kKnown = 128 };
    std::vector<uint8_t> name_flags(trace.strings.size(), 0);
    auto flagsOf = [&](StringId id) {
        uint8_t& f = name_flags[id.value];
        if (!(f & kKnown)) {
            const std::string_view n = trace.str(id);
            f = uint8_t(kKnown | (isSync(n) ? kSync : 0) | (isDataLoader(n) ? kLoader : 0) |
                        (n.starts_with("sightline.batch") ? kBatch : 0) | (isLaunch(n) ? kLaunch : 0) |
                        (n.starts_with("Optimizer.step#") ? kOptimizer : 0));
        }
        return f;
    };
    for (size_t i = 0; i < trace.cpu.size(); ++i) {
        const CpuEvent& e = trace.cpu[i];
        const std::string_view name = trace.str(e.name);
        const uint8_t flags = flagsOf(e.name);
        const int32_t s = stepOf(e.start_ns);
        cpu_step[i] = s;
        if (flags & kSync) syncs.add(e.start_ns, e.end_ns);
        if (flags & kLoader) loaders.add(e.start_ns, e.end_ns);
        if (s < 0) {
            // Batch annotations often sit just before the step range: give them to the next step.
            if ((flags & kBatch) && newBatch(e)) {
                auto it = std::upper_bound(steps.begin(), steps.end(), e.start_ns, [](int64_t v, const Step& st) { return v < st.start_ns; });
                if (it != steps.end()) parseBatch(name, out.steps[size_t(it - steps.begin())]);
            }
            continue;
        }
        StepMetrics& m = out.steps[size_t(s)];
        if (tree.counted[i]) {
            if (e.kind == CpuKind::Runtime || e.kind == CpuKind::Driver) {
                m.api_ns += e.duration();
                m.cpu_dispatch_ns += e.duration();
                if (flags & kLaunch) {
                    ++m.launches;
                    launch_times[size_t(s)].push_back(e.start_ns);
                }
                if (flags & kSync) ++m.sync_calls;
            } else if (e.kind == CpuKind::Op) {
                m.cpu_dispatch_ns += tree.self_cpu_ns[i];
            }
        }
        if ((flags & kLoader) && (tree.parent[i] == OpTree::kNone || !(flagsOf(trace.cpu[size_t(tree.parent[i])].name) & kLoader)))
            m.dataloader_ns += e.duration();
        if (e.kind == CpuKind::UserAnnotation && (flags & kOptimizer))
            m.optimizer_gpu_ns += tree.device_total_ns[i];
        if ((flags & kBatch) && newBatch(e))
            parseBatch(name, m);
        const double f = !e.input_dims.empty() ? opFlops(name, trace.str(e.input_dims)) : NAN;
        if (!std::isnan(f) && tree.counted[i])
            m.flops = (std::isnan(m.flops) ? 0.0 : m.flops) + f;
    }
    syncs.finish();
    loaders.finish();
    for (auto& v : launch_times) std::sort(v.begin(), v.end());

    // GPU activities by step.
    struct Activity {
        int64_t start, end, launch;
        int32_t stream;
        bool comm; // a communication (NCCL) kernel
    };
    std::vector<std::vector<Activity>> acts(steps.size());
    std::vector<int8_t> class_cached(trace.strings.size(), 0);
    std::vector<KernelClass> class_of(trace.strings.size());
    for (size_t gi = 0; gi < trace.gpu.size(); ++gi) {
        const GpuEvent& g = trace.gpu[gi];
        if (g.kind == GpuKind::Annotation) continue;
        const CpuEvent* api = launchOf(g);
        const int64_t launch = api ? api->start_ns : g.start_ns;      // when the host began the launch
        const int64_t submitted = api ? api->end_ns : g.start_ns;     // when the work was queued
        const int32_t s = stepOf(launch);
        if (s < 0) continue;
        StepMetrics& m = out.steps[size_t(s)];
        if (!class_cached[g.name.value]) {
            class_of[g.name.value] = taxonomy.classify(trace.str(g.name));
            class_cached[g.name.value] = 1;
        }
        const KernelClass& kc = class_of[g.name.value];
        const int64_t d = g.duration();
        m.gpu_time_ns += d;
        auto& fam = m.families[kc.family];
        ++fam.count;
        fam.ns += d;
        auto& cls = m.classes[kc.name];
        ++cls.count;
        cls.ns += d;
        const bool comm = kc.isCommunication();
        if (comm) ++m.collectives;
        if (g.kind == GpuKind::Kernel) {
            ++m.kernels;
            if (d < kSmallKernelNs) {
                ++m.small_kernels.count;
                m.small_kernels.ns += d;
            }
        } else {
            CountTime& ct = g.kind == GpuKind::Memcpy ? m.memcpy : m.memset;
            ++ct.count;
            ct.ns += d;
            const std::string_view n = trace.str(g.name);
            if (n.starts_with("Memcpy DtoD")) { ++m.dtod.count; m.dtod.ns += d; }
            if (n.starts_with("Memcpy DtoH")) { ++m.dtoh.count; m.dtoh.ns += d; }
        }
        acts[size_t(s)].push_back({g.start_ns, g.end_ns, submitted, g.stream, comm});
        out.gpu_step[gi] = s;
    }

    // Busy time, step time, compute stream and its idle gaps.
    for (size_t s = 0; s < steps.size(); ++s) {
        StepMetrics& m = out.steps[s];
        auto& a = acts[s];
        int64_t gpu_end = m.step.end_ns;
        std::vector<Interval> iv, comm_iv, work_iv;
        std::map<int32_t, int64_t> per_stream, per_comm_stream;
        for (const Activity& x : a) {
            iv.emplace_back(x.start, x.end);
            (x.comm ? comm_iv : work_iv).emplace_back(x.start, x.end);
            (x.comm ? per_comm_stream : per_stream)[x.stream] += x.end - x.start;
            gpu_end = std::max(gpu_end, x.end);
        }
        if (per_stream.empty()) per_stream = per_comm_stream; // a step of nothing but communication
        m.time_ns = gpu_end - m.step.start_ns;
        m.gpu_busy_ns = unionLength(iv);
        const auto comm_merged = mergedIntervals(std::move(comm_iv));
        m.comm_ns = totalLength(comm_merged);
        m.comm_exposed_ns = m.comm_ns - overlapLength(comm_merged, mergedIntervals(std::move(work_iv)));
        if (per_stream.empty()) {
            m.idle.launch_ns = m.time_ns;
            continue;
        }
        m.compute_stream = std::max_element(per_stream.begin(), per_stream.end(),
                                            [](const auto& x, const auto& y) { return x.second < y.second; })->first;
        std::vector<Activity> cs;
        for (const Activity& x : a)
            if (x.stream == m.compute_stream) cs.push_back(x);
        std::sort(cs.begin(), cs.end(), [](const Activity& x, const Activity& y) { return x.start < y.start; });
        std::vector<Interval> civ;
        for (const Activity& x : cs) civ.emplace_back(x.start, x.end);
        m.compute_busy_ns = unionLength(civ);
        auto classify = [&](int64_t idle_from, int64_t idle_to, int64_t next_launch, bool queued) {
            const int64_t gap = idle_to - idle_from;
            if (gap <= 0) return;
            ++m.idle.gaps;
            if (queued) { m.idle.dependency_ns += gap; return; }
            // The host issued the next work late: what was it doing?
            const int64_t until = std::max(next_launch, idle_from);
            if (loaders.overlaps(idle_from, until)) m.idle.dataloader_ns += gap;
            else if (syncs.overlaps(idle_from - 2'000, until)) m.idle.sync_ns += gap;
            else m.idle.launch_ns += gap;
        };
        classify(m.step.start_ns, cs.front().start, cs.front().launch, false);
        int64_t busy_until = cs.front().end;
        for (size_t k = 1; k < cs.size(); ++k) {
            if (cs[k].start > busy_until)
                classify(busy_until, cs[k].start, cs[k].launch, cs[k].launch < busy_until);
            busy_until = std::max(busy_until, cs[k].end);
        }
        const int64_t step_end = m.step.start_ns + m.time_ns;
        if (step_end > busy_until) {
            ++m.idle.gaps;
            m.idle.tail_ns += step_end - busy_until;
        }
        // Synchronisations followed by more launches in the step.
        const auto& lt = launch_times[s];
        for (const HostSpan& sp : syncs.spans())
            if (sp.start >= m.step.start_ns && sp.start < m.step.end_ns &&
                std::upper_bound(lt.begin(), lt.end(), sp.end) != lt.end())
                ++m.mid_step_syncs;
    }

    // Steady state.
    std::vector<double> step_ms;
    for (const StepMetrics& m : out.steps) step_ms.push_back(double(m.time_ns) / 1e6);
    out.steady = steadySteps(steps, step_ms);
    out.steady_tables = computeTables(trace, tree, taxonomy, out.filterFor(out.steady));

    auto& v = out.values;
    const double n = double(out.steady.size());
    v["steps.count"] = double(steps.size());
    v["steps.steady"] = n;
    auto mean = [&](auto field) {
        if (out.steady.empty()) return double(NAN);
        double sum = 0;
        for (size_t i : out.steady) {
            const double x = field(out.steps[i]);
            if (std::isnan(x)) return double(NAN);
            sum += x;
        }
        return sum / n;
    };
    auto ms = [](int64_t ns) { return double(ns) / 1e6; };
    v["step.time_ms"] = mean([&](const StepMetrics& m) { return ms(m.time_ns); });
    v["gpu.busy_ms"] = mean([&](const StepMetrics& m) { return ms(m.gpu_busy_ns); });
    v["gpu.busy_pct"] = 100.0 * v["gpu.busy_ms"] / v["step.time_ms"];
    v["gpu.time_ms"] = mean([&](const StepMetrics& m) { return ms(m.gpu_time_ns); });
    v["gpu.idle_ms"] = mean([&](const StepMetrics& m) { return ms(m.idle.total()); });
    v["kernels.count"] = mean([](const StepMetrics& m) { return double(m.kernels); });
    v["kernels.small_count"] = mean([](const StepMetrics& m) { return double(m.small_kernels.count); });
    v["kernels.small_share"] = v["kernels.count"] > 0 ? v["kernels.small_count"] / v["kernels.count"] : 0.0;
    v["kernels.small_ms"] = mean([&](const StepMetrics& m) { return ms(m.small_kernels.ns); });
    v["kernels.small_time_share"] = v["gpu.time_ms"] > 0 ? v["kernels.small_ms"] / v["gpu.time_ms"] : 0.0;
    v["launches.count"] = mean([](const StepMetrics& m) { return double(m.launches); });
    v["launches.per_s"] = v["launches.count"] / (v["step.time_ms"] / 1e3);
    v["api.ms"] = mean([&](const StepMetrics& m) { return ms(m.api_ns); });
    v["cpu.dispatch_ms"] = mean([&](const StepMetrics& m) { return ms(m.cpu_dispatch_ns); });
    v["launches.host_ms_each"] = v["launches.count"] > 0 ? v["cpu.dispatch_ms"] / v["launches.count"] : NAN;
    v["cpu.dispatch_ratio"] = v["gpu.busy_ms"] > 0 ? v["cpu.dispatch_ms"] / v["gpu.busy_ms"] : NAN;
    v["idle.launch_ms"] = mean([&](const StepMetrics& m) { return ms(m.idle.launch_ns); });
    v["idle.sync_ms"] = mean([&](const StepMetrics& m) { return ms(m.idle.sync_ns); });
    v["idle.dataloader_ms"] = mean([&](const StepMetrics& m) { return ms(m.idle.dataloader_ns); });
    v["idle.dependency_ms"] = mean([&](const StepMetrics& m) { return ms(m.idle.dependency_ns); });
    v["idle.tail_ms"] = mean([&](const StepMetrics& m) { return ms(m.idle.tail_ns); });
    v["idle.gaps"] = mean([](const StepMetrics& m) { return double(m.idle.gaps); });
    v["memcpy.count"] = mean([](const StepMetrics& m) { return double(m.memcpy.count); });
    v["memcpy.ms"] = mean([&](const StepMetrics& m) { return ms(m.memcpy.ns); });
    v["memcpy.dtod_count"] = mean([](const StepMetrics& m) { return double(m.dtod.count); });
    v["memcpy.dtod_ms"] = mean([&](const StepMetrics& m) { return ms(m.dtod.ns); });
    v["memcpy.dtoh_count"] = mean([](const StepMetrics& m) { return double(m.dtoh.count); });
    v["memset.count"] = mean([](const StepMetrics& m) { return double(m.memset.count); });
    v["memset.ms"] = mean([&](const StepMetrics& m) { return ms(m.memset.ns); });
    v["memops.share"] = v["gpu.time_ms"] > 0 ? (v["memcpy.ms"] + v["memset.ms"]) / v["gpu.time_ms"] : 0.0;
    v["sync.calls"] = mean([](const StepMetrics& m) { return double(m.sync_calls); });
    v["sync.mid_step"] = mean([](const StepMetrics& m) { return double(m.mid_step_syncs); });
    out.syncs_recorded = runtime_calls || trace.gpu.empty() || trace.metadata.count(std::string(kHostSyncsKey));
    if (!out.syncs_recorded) {
        // Recorded without CUDA runtime calls and without the collector's host-sync hooks (the
        // light mode where the collector could not count launches, or a capture of format 3):
        // synchronisations are unknown, not absent, and so is the idle time after them (it is
        // counted with the waiting for launches).
        v["sync.calls"] = v["sync.mid_step"] = v["idle.sync_ms"] = NAN;
    }
    v["dataloader.ms"] = mean([&](const StepMetrics& m) { return ms(m.dataloader_ns); });
    v["comm.collectives"] = mean([](const StepMetrics& m) { return double(m.collectives); });
    v["comm.ms"] = mean([&](const StepMetrics& m) { return ms(m.comm_ns); });
    v["comm.exposed_ms"] = mean([&](const StepMetrics& m) { return ms(m.comm_exposed_ns); });
    v["comm.exposed_pct"] = 100.0 * v["comm.exposed_ms"] / v["step.time_ms"];
    v["optimizer.gpu_ms"] = mean([&](const StepMetrics& m) { return ms(m.optimizer_gpu_ns); });
    v["flops.per_step"] = mean([](const StepMetrics& m) { return m.flops; });
    v["flops.tflops_per_s"] = v["flops.per_step"] / (v["step.time_ms"] / 1e3) / 1e12;
    v["mfu.pct"] = 100.0 * v["flops.tflops_per_s"] / out.peak_tflops;
    v["tokens.real"] = mean([](const StepMetrics& m) { return m.real_tokens; });
    v["tokens.padded"] = mean([](const StepMetrics& m) { return m.padded_tokens; });
    v["tokens.per_s"] = v["tokens.real"] / (v["step.time_ms"] / 1e3);
    v["padding.efficiency"] = v["tokens.real"] / v["tokens.padded"];
    v["batch.sequences"] = mean([](const StepMetrics& m) { return m.sequences; });
    const bool any_batch = !std::isnan(v["tokens.real"]) || !std::isnan(v["batch.sequences"]);
    v["batch.packed"] = any_batch ? mean([](const StepMetrics& m) { return m.packed ? 1.0 : 0.0; }) : NAN;
    v["batch.boundaries"] = any_batch ? mean([](const StepMetrics& m) { return m.boundaries ? 1.0 : 0.0; }) : NAN;
    computeHardwareMetrics(trace, taxonomy, out);
    return out;
}

} // namespace sightline
