// The steady-state figures: one table of definitions (name, what it is, how it is computed) that
// drives both the catalog rule files are checked against and the summary (docs/metrics.md).
#include "sightline/metric_passes.h"

#include <cmath>

namespace sightline {

namespace {

double ms(int64_t ns) { return double(ns) / 1e6; }

// The mean of a per-step figure over the steady steps; NaN when there are none or any is unknown.
double steadyMean(const Metrics& m, double (*field)(const StepMetrics&)) {
    if (m.steady.empty()) return NAN;
    double sum = 0;
    for (size_t i : m.steady) {
        const double x = field(m.steps[i]);
        if (std::isnan(x)) return NAN;
        sum += x;
    }
    return sum / double(m.steady.size());
}

// The same for figures read from the host's ops and annotations: unknown in a trace of GPU
// activity alone.
double hostMean(const Metrics& m, double (*field)(const StepMetrics&)) { return m.host_recorded ? steadyMean(m, field) : NAN; }
// ... and for figures of the host's synchronisations: unknown where the trace could not record them.
double syncMean(const Metrics& m, double (*field)(const StepMetrics&)) { return m.syncs_recorded ? steadyMean(m, field) : NAN; }

double v(const Metrics& m, const char* name) { return m.value(name); }
double ratioOr(double num, double den, double otherwise) { return den > 0 ? num / den : otherwise; }

using S = const StepMetrics&;
using M = const Metrics&;

// 1 when the batches of the steady steps came through the given stack, NaN when none is known.
double stackFlag(M m, uint32_t flag) { return !m.tokens.known ? NAN : (m.tokens.stack & flag) ? 1.0
                                                                                              : 0.0; }

bool sampled(M m) { return m.hw.sampled; }

double hwCoveredPct(M m) {
    double step_ns = 0;
    for (size_t i : m.steady) step_ns += double(m.steps[i].time_ns);
    return step_ns > 0 ? 100.0 * double(m.hw.steady.covered_ns) / step_ns : NAN;
}

// The step-time family first: the others divide by it.
const std::vector<MetricDef> kDefs = {
    {"steps.count", "steps found in the trace", nullptr, [](M m) { return double(m.steps.size()); }},
    {"steps.steady", "steps in the steady state (warm-up left out)", nullptr, [](M m) { return double(m.steady.size()); }},
    {"step.time_ms", "step time, on the GPU's clock when the host runs ahead", [](S s) { return ms(s.time_ns); }},
    {"gpu.busy_ms", "time any GPU activity ran (union over streams)", [](S s) { return ms(s.gpu_busy_ns); }},
    {"gpu.busy_pct", "GPU busy share of the step, what nvidia-smi calls utilization", nullptr,
     [](M m) { return 100.0 * v(m, "gpu.busy_ms") / v(m, "step.time_ms"); }},
    {"gpu.time_ms", "sum of GPU activity durations", [](S s) { return ms(s.gpu_time_ns); }},
    {"gpu.idle_ms", "step time the compute stream stood idle", [](S s) { return ms(s.idle.total()); }},
    {"host.ahead_ms", "how far the host ran ahead of the GPU: GPU work launched before the step still ran this long after the step began",
     [](S s) { return ms(s.host_ahead_ns); }},
    // Kernels and launches.
    {"kernels.count", "kernels per step", [](S s) { return double(s.kernels); }},
    {"kernels.small_count", "kernels shorter than 10 us per step", [](S s) { return double(s.small_kernels.count); }},
    {"kernels.small_share", "share of kernels shorter than 10 us", nullptr,
     [](M m) { return ratioOr(v(m, "kernels.small_count"), v(m, "kernels.count"), 0.0); }},
    {"kernels.small_ms", "GPU time of kernels shorter than 10 us", [](S s) { return ms(s.small_kernels.ns); }},
    {"kernels.small_time_share", "share of GPU time in kernels shorter than 10 us", nullptr,
     [](M m) { return ratioOr(v(m, "kernels.small_ms"), v(m, "gpu.time_ms"), 0.0); }},
    {"launches.count", "kernel launch calls per step", [](S s) { return double(s.launches); }},
    {"launches.per_s", "kernel launches per second of step time", nullptr,
     [](M m) { return v(m, "launches.count") / (v(m, "step.time_ms") / 1e3); }},
    // Host dispatch.
    {"api.ms", "host time in CUDA runtime and driver calls", [](S s) { return ms(s.api_ns); }},
    {"cpu.dispatch_ms", "host time in op dispatch: self CPU of ops plus CUDA API time, all threads", nullptr,
     [](M m) { return hostMean(m, [](S s) { return ms(s.cpu_dispatch_ns); }); }},
    {"launches.host_ms_each", "host dispatch time per kernel launch (cpu.dispatch_ms / launches.count)", nullptr,
     [](M m) { return ratioOr(v(m, "cpu.dispatch_ms"), v(m, "launches.count"), NAN); }},
    {"host.outlier_ms", "host time a step in op calls far longer than their op's median, beyond that median (per-shape setup: host_outliers.h)",
     nullptr, [](M m) { return hostMean(m, [](S s) { return ms(s.host_outliers.ns); }); }},
    {"host.outlier_calls", "op calls a step far longer than their op's median", nullptr,
     [](M m) { return hostMean(m, [](S s) { return double(s.host_outliers.count); }); }},
    {"cpu.dispatch_ratio", "host dispatch time over GPU busy time", nullptr,
     [](M m) { return ratioOr(v(m, "cpu.dispatch_ms"), v(m, "gpu.busy_ms"), NAN); }},
    // Idle gaps on the compute stream.
    {"idle.launch_ms", "compute-stream idle time waiting for the host to issue work", [](S s) { return ms(s.idle.launch_ns); }},
    {"idle.launch_share", "share of the step the compute stream idles waiting for the host to issue work", nullptr,
     [](M m) { return ratioOr(v(m, "idle.launch_ms"), v(m, "step.time_ms"), NAN); }},
    {"step.host_bound", "1 when the step is host-bound: idle.launch_share at least kHostBoundLaunchShare (0.2)", nullptr,
     [](M m) { const double s = v(m, "idle.launch_share"); return std::isnan(s) ? NAN : s >= kHostBoundLaunchShare ? 1.0 : 0.0; }},
    {"idle.sync_ms", "compute-stream idle time after a host synchronisation", nullptr,
     [](M m) { return syncMean(m, [](S s) { return ms(s.idle.sync_ns); }); }},
    {"idle.dataloader_ms", "compute-stream idle time while the host waited for data", nullptr,
     [](M m) { return hostMean(m, [](S s) { return ms(s.idle.dataloader_ns); }); }},
    {"idle.dependency_ms", "compute-stream idle time with work queued behind another stream or event",
     [](S s) { return ms(s.idle.dependency_ns); }},
    {"idle.tail_ms", "compute-stream idle time after the step's last GPU work (final sync, logging)", [](S s) { return ms(s.idle.tail_ns); }},
    {"idle.unknown_ms", "compute-stream idle time before work whose launch call was not recorded (GPU activity alone)",
     [](S s) { return ms(s.idle.unknown_ns); }},
    {"idle.gaps", "idle gaps on the compute stream", [](S s) { return double(s.idle.gaps); }},
    // Memory operations.
    {"memcpy.count", "memcpy operations per step", [](S s) { return double(s.memcpy.count); }},
    {"memcpy.ms", "memcpy GPU time", [](S s) { return ms(s.memcpy.ns); }},
    {"memcpy.dtod_count", "device-to-device copies per step", [](S s) { return double(s.dtod.count); }},
    {"memcpy.dtod_ms", "device-to-device copy time", [](S s) { return ms(s.dtod.ns); }},
    {"memcpy.dtoh_count", "device-to-host copies per step", [](S s) { return double(s.dtoh.count); }},
    {"memset.count", "memsets per step", [](S s) { return double(s.memset.count); }},
    {"memset.ms", "memset GPU time", [](S s) { return ms(s.memset.ns); }},
    {"memops.share", "share of GPU time in memcpy and memset", nullptr,
     [](M m) { return ratioOr(v(m, "memcpy.ms") + v(m, "memset.ms"), v(m, "gpu.time_ms"), 0.0); }},
    // Host synchronisations: unknown (not zero) when the trace could not record them.
    {"sync.calls", "host synchronisation calls per step", nullptr,
     [](M m) { return syncMean(m, [](S s) { return double(s.sync_calls); }); }},
    {"sync.mid_step", "synchronisations followed by more GPU work in the same step", nullptr,
     [](M m) { return syncMean(m, [](S s) { return double(s.mid_step_syncs); }); }},
    {"sync.wait_ms", "host time a step in synchronisation calls (part of api.ms and cpu.dispatch_ms)", nullptr,
     [](M m) { return syncMean(m, [](S s) { return ms(s.sync_wait_ns); }); }},
    {"sync.drained", "synchronisations before the step (after the last launch before it) that left the GPU nothing queued", nullptr,
     [](M m) { return syncMean(m, [](S s) { return double(s.drained_syncs); }); }},
    {"idle.drained_ms", "compute-stream idle time waiting for launches in steps that began on an idle GPU after such a synchronisation", nullptr,
     [](M m) { return syncMean(m, [](S s) { return s.drained_syncs > 0 ? ms(s.idle.launch_ns) : 0.0; }); }},
    {"dataloader.ms", "host time in DataLoader ops", nullptr, [](M m) { return hostMean(m, [](S s) { return ms(s.dataloader_ns); }); }},
    // Communication.
    {"comm.collectives", "communication (NCCL) kernels a step", [](S s) { return double(s.collectives); }},
    {"comm.ms", "time communication kernels ran (union)", [](S s) { return ms(s.comm_ns); }},
    {"comm.exposed_ms", "communication time with no other GPU work beside it", [](S s) { return ms(s.comm_exposed_ns); }},
    {"comm.exposed_pct", "exposed communication as a share of the step time, %", nullptr,
     [](M m) { return 100.0 * v(m, "comm.exposed_ms") / v(m, "step.time_ms"); }},
    {"optimizer.gpu_ms", "GPU time of the optimizer step", nullptr, [](M m) { return hostMean(m, [](S s) { return ms(s.optimizer_gpu_ns); }); }},
    // FLOPs.
    {"flops.per_step", "FLOPs of GEMM and attention ops from recorded shapes", [](S s) { return s.flops; }},
    {"flops.tflops_per_s", "achieved TFLOP/s over the step time", nullptr,
     [](M m) { return v(m, "flops.per_step") / (v(m, "step.time_ms") / 1e3) / 1e12; }},
    {"mfu.pct", "model FLOPs utilisation against the device's bf16 dense peak", nullptr,
     [](M m) { return 100.0 * v(m, "flops.tflops_per_s") / m.peak_tflops; }},
    // Tokens, batches and the batching simulator: over the steady steps whose batches are all
    // known (Metrics::tokens, token_metrics.cpp).
    {"tokens.real", "real tokens per step (sightline.batch annotations)", nullptr, [](M m) { return m.tokens.real; }},
    {"tokens.padded", "padded tokens per step (sightline.batch annotations)", nullptr, [](M m) { return m.tokens.padded; }},
    {"tokens.per_s", "real tokens per second", nullptr, [](M m) { return m.tokens.per_s; }},
    {"padding.efficiency", "real over padded tokens", nullptr, [](M m) { return m.tokens.real / m.tokens.padded; }},
    {"tokens.ignored", "real tokens per step whose label the loss ignores (-100)", nullptr, [](M m) { return m.tokens.ignored; }},
    {"batch.packed", "1 when batches are annotated as packed", nullptr, [](M m) { return m.tokens.packed; }},
    {"batch.boundaries", "1 when packed batches carry sequence boundaries to attention (position_ids restarts or cu_seqlens)",
     nullptr, [](M m) { return m.tokens.boundaries; }},
    {"batch.cu_seqlens", "1 when packed batches pass their boundaries as cu_seqlens (varlen attention, linear-attention kernels)",
     nullptr, [](M m) { return m.tokens.cu_seqlens; }},
    {"batch.seq_idx", "1 when packed batches pass a per-token sequence index (seq_idx, the causal conv's boundaries)",
     nullptr, [](M m) { return m.tokens.seq_idx; }},
    {"batch.sequences", "sequences per step", nullptr, [](M m) { return m.tokens.sequences; }},
    {"stack.transformers", "1 when the batches entered a transformers model (Python adapter)", nullptr,
     [](M m) { return stackFlag(m, kStackTransformers); }},
    {"stack.hf_trainer", "1 when transformers' Trainer drove the batches (Python adapter)", nullptr,
     [](M m) { return stackFlag(m, kStackHfTrainer); }},
    {"stack.trl", "1 when a TRL trainer drove the batches (Python adapter)", nullptr, [](M m) { return stackFlag(m, kStackTrl); }},
    {"stack.reference_trainer", "1 when Sightline's reference trainer wrote the batches", nullptr,
     [](M m) { return stackFlag(m, kStackReferenceTrainer); }},
    {"padding.budget", "tokens per batch the batching simulator packs to: the largest recorded batch", nullptr,
     [](M m) { return m.tokens.budget; }},
    {"padding.token_cost_us", "measured step cost per padded token (cost model of the batching simulator)", nullptr,
     [](M m) { return m.tokens.token_cost_us; }},
    {"padding.batch_cost_ms", "measured fixed cost per batch (0 when the tokens per batch varied too little to tell)", nullptr,
     [](M m) { return m.tokens.batch_cost_ms; }},
    {"padding.chunk_cost_ms",
     "cost per step of a chunk loop over each batch's longest row (the Gated DeltaNet torch fallback's), NaN without one: "
     "packing lengthens it",
     nullptr, [](M m) { return m.tokens.chunk_cost_ms; }},
    {"padding.packed_after_loop_pct",
     "with a chunk loop: the time a real token packed rows would save once the loop is gone (its fix first), percent", nullptr,
     [](M m) { return m.tokens.packed_after_loop_pct; }},
    {"padding.packed_tokens_per_s", "predicted real tokens per second with the recorded sequences in packed rows", nullptr,
     [](M m) { return m.tokens.packed_tokens_per_s; }},
    {"padding.packed_saving_ms", "predicted step time saved per step by packed rows (the same tokens in less time)", nullptr,
     [](M m) { return m.tokens.packed_saving_ms; }},
    // Hardware counters (--hw): over the steady steps (Metrics::hw, hardware.cpp); only for a trace
    // with samples.
    {"hw.sm_active_pct", "SMs active, % of the step (hardware counters, --hw)", nullptr,
     [](M m) { return m.hw.steady[HwMetric::SmActive]; }, sampled},
    {"hw.warps_active_pct", "warps active against the most the SMs hold, % of the step (hardware counters)", nullptr,
     [](M m) { return m.hw.steady[HwMetric::WarpsActive]; }, sampled},
    {"hw.tensor_pct", "tensor pipes active, % of the step (hardware counters)", nullptr,
     [](M m) { return m.hw.steady[HwMetric::TensorActive]; }, sampled},
    {"hw.dram_pct", "DRAM throughput, % of its peak (hardware counters)", nullptr, [](M m) { return m.hw.steady[HwMetric::DramPct]; },
     sampled},
    {"hw.dram_tbps", "DRAM bandwidth, read + write, TB/s (hardware counters)", nullptr,
     [](M m) { return m.hw.steady[HwMetric::DramBytesPerS] / 1e12; }, sampled},
    {"hw.dram_ceiling_pct", "DRAM bandwidth against the device's measured ceiling, %", nullptr,
     [](M m) { return 100.0 * m.hw.steady[HwMetric::DramBytesPerS] / dramCeiling(m.device_name); }, sampled},
    {"hw.covered_pct", "share of the step time hardware samples cover, %", nullptr, hwCoveredPct, sampled},
    // Set by `sightline ranks` (docs/multi-rank.md).
    {"ranks.count", "ranks analysed together (sightline ranks)"},
    {"ranks.straggler", "the rank the others wait on at the collectives, -1 when none"},
    {"ranks.straggler_delay_ms", "how long after all the others the straggler reaches the collectives, a step"},
    {"ranks.straggler_delay_pct", "that delay as a share of the mean step time, %"},
    {"ranks.heaviest", "the rank with the most compute"},
    {"ranks.imbalance_pct", "compute of the heaviest rank above the mean of the ranks, %"},
    {"ranks.excess_compute_ms", "compute of the heaviest rank above the mean, a step"},
};

} // namespace

const std::vector<MetricDef>& metricDefs() { return kDefs; }

const std::map<std::string, std::string>& metricCatalog() {
    static const std::map<std::string, std::string> catalog = [] {
        std::map<std::string, std::string> c;
        for (const MetricDef& d : kDefs) c.emplace(d.name, d.description);
        return c;
    }();
    return catalog;
}

void summarize(Metrics& m) {
    for (const MetricDef& d : kDefs) {
        if (d.applies && !d.applies(m)) continue;
        if (d.per_step) m.values[d.name] = steadyMean(m, d.per_step);
        else if (d.derived) m.values[d.name] = d.derived(m);
    }
}

} // namespace sightline
