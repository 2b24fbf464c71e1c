#pragma once
// Per-step metrics and their steady-state summary (definitions and formulas: docs/metrics.md).
#include "sightline/batches.h"
#include "sightline/hardware.h"
#include "sightline/host_outliers.h"
#include "sightline/op_tree.h"
#include "sightline/steps.h"
#include "sightline/tables.h"
#include "sightline/taxonomy.h"
#include "sightline/trace.h"

#include <cmath>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace sightline {

struct CountTime {
    uint64_t count = 0;
    int64_t ns = 0;
};

// Why the compute stream stood idle inside a step (docs/metrics.md, "Idle gaps").
struct IdleCauses {
    int64_t launch_ns = 0;     // the host had not issued the next work yet (launch-bound / host work)
    int64_t sync_ns = 0;       // the host was blocked in a synchronisation just before
    int64_t dataloader_ns = 0; // the host was waiting for the next batch
    int64_t dependency_ns = 0; // the work was queued but waited on another stream or event
    int64_t tail_ns = 0;       // after the step's last GPU work, until the step ends
    int64_t unknown_ns = 0;    // the next work's launch call was not recorded (GPU activity alone)
    uint64_t gaps = 0;
    int64_t total() const { return launch_ns + sync_ns + dataloader_ns + dependency_ns + tail_ns + unknown_ns; }
};

struct StepMetrics {
    Step step;
    // The step on the GPU's clock: from the later of its start and the end of the GPU work launched
    // before it (the host ran ahead) to the later of its end and the end of its own GPU work.
    int64_t begin_ns = 0;
    int64_t time_ns = 0;
    int64_t host_ahead_ns = 0; // begin_ns - step.start_ns: how far the host ran ahead of the GPU
    int64_t gpu_busy_ns = 0;   // union of all GPU activity intervals in the step
    int64_t gpu_time_ns = 0;   // sum of GPU activity durations (exceeds busy when streams overlap)
    uint64_t kernels = 0;
    CountTime small_kernels; // kernels shorter than 10 us
    std::map<std::string, CountTime> families;
    std::map<std::string, CountTime> classes;
    CountTime memcpy, memset, dtod, dtoh;
    uint64_t launches = 0;       // kernel launch API calls
    int64_t api_ns = 0;          // time in CUDA runtime and driver calls
    int64_t cpu_dispatch_ns = 0; // self CPU of ops plus API time, all threads
    uint64_t sync_calls = 0;     // host synchronisation calls
    int64_t sync_wait_ns = 0;    // ... and the host time in them (part of api_ns)
    uint64_t mid_step_syncs = 0; // ... followed by more GPU work in the same step
    uint64_t drained_syncs = 0;  // synchronisations between the last launch before the step and its
                                 // start that returned with nothing left on the GPU: it began idle
    int32_t compute_stream = 0;
    int64_t compute_busy_ns = 0;
    IdleCauses idle;           // on the compute stream
    int64_t dataloader_ns = 0; // host time in DataLoader ops
    int64_t optimizer_gpu_ns = 0;
    uint64_t collectives = 0;    // communication (NCCL) kernels
    int64_t comm_ns = 0;         // union of communication kernels
    int64_t comm_exposed_ns = 0; // ... with no other GPU activity running beside them
    double flops = NAN;          // from recorded GEMM / attention shapes; NaN without shapes
    // From sightline.batch annotations (sums and flags over the step's batches; batches.h).
    double real_tokens = NAN, padded_tokens = NAN, sequences = NAN, ignored_tokens = NAN;
    bool packed = false, boundaries = false, cu_seqlens = false, seq_idx = false;
    std::vector<BatchRecord> batches;
    uint32_t incomplete_batches = 0; // adapter batches whose counts never came (a window closed first)
    uint64_t compile_events = 0;     // torch.compile at work ("... (dynamo_timed)" ranges): warm-up
    uint64_t allocations = 0;        // device memory allocation calls (cudaMalloc, cuMemAlloc, cuMemCreate)
    CountTime host_outliers;         // op calls far longer than their op's median (host_outliers.h), nested ones once: ns beyond it
    HwFigures hw;                    // hardware counters over the step (docs/hardware.md); unknown without samples
};

// The steady state's batches and the batching simulator's prediction (token_metrics.cpp): means
// over the steady steps whose batches are all known; NaN when unknown (metrics tokens.*,
// padding.*, batch.*, stack.*: docs/metrics.md).
struct TokenSummary {
    double real = NAN, padded = NAN, ignored = NAN, per_s = NAN, sequences = NAN;
    double packed = NAN, boundaries = NAN, cu_seqlens = NAN, seq_idx = NAN;
    bool known = false; // some steady step has all its batches
    uint32_t stack = 0; // the kStack* flags of those steps' batches
    // The recorded sequences in packed rows, priced with the measured cost per token and batch.
    double budget = NAN, token_cost_us = NAN, batch_cost_ms = NAN, packed_tokens_per_s = NAN, packed_saving_ms = NAN;
    // Where the steps run a chunk loop (padding_sim.h): its cost per step of it, and the saving a
    // real token of packed rows once the loop is gone (its own fix first), percent; else NaN.
    double chunk_cost_ms = NAN, packed_after_loop_pct = NAN;
};

struct Metrics {
    std::vector<StepMetrics> steps;
    std::vector<size_t> steady; // indices into steps
    // Non-empty when no step is left after warm-up (a job that stopped early, a one-step capture
    // that includes compilation): why. The steady figures then average all steps, and the findings
    // made from them are unreliable.
    std::string warmup_only;
    std::string device_name;
    double peak_tflops = NAN; // bf16 dense peak of the device, NaN when unknown
    // False for a trace of GPU work without CUDA runtime calls whose synchronisations the
    // collector did not record either (no kHostSyncsKey): they are unknown, the sync figures NaN.
    bool syncs_recorded = true;
    // False for a trace of GPU activity alone (no CPU ops or annotations: torch.profiler with
    // activities=[CUDA] only): ops, host dispatch and DataLoader figures are unknown.
    bool host_recorded = true;
    // False when no GPU activity has its launch call in the trace: launches and the causes of idle
    // gaps are unknown.
    bool launches_recorded = true;
    // Steady-state figures, per step (means over the steady steps); NaN when unknown.
    std::map<std::string, double> values;
    // Op and kernel tables summed over the steady steps (divide by steady.size() for per step).
    Tables steady_tables;
    // The step of each CPU event (by its start) and GPU activity (by its launch); -1 for none.
    std::vector<int32_t> cpu_step, gpu_step;
    // Hardware counters over the steady steps and over the kernels of each class, family and op
    // there (empty without samples).
    HwBreakdown hw;
    TokenSummary tokens;
    // Every host outlier call in the trace (host_outliers.h), found once for the metrics and the replay.
    std::vector<HostOutlier> outlier_calls;
    // The outlier calls of each op over the steady steps (host_outliers.h), the innermost of nested
    // ones: how many, and their host time beyond the op's median (divide by steady.size() for per step).
    std::map<std::string, CountTime> host_outliers;

    // The events of the given steps, for computeTables.
    EventFilter filterFor(const std::vector<size_t>& step_indices) const;
    // A steady-state figure by its name; NaN when unknown.
    double value(std::string_view name) const {
        auto it = values.find(std::string(name));
        return it == values.end() ? double(NAN) : it->second;
    }
};

Metrics computeMetrics(const Trace& trace, const OpTree& tree, const Taxonomy& taxonomy);

// The metric names computeMetrics fills (for validating rule files), with one line each.
const std::map<std::string, std::string>& metricCatalog();

// bf16 dense peak TFLOP/s for a device name from analyzer/data/gpu_peaks.tsv; NaN if unknown.
double peakTflops(std::string_view device_name);

// FLOPs of one op from its name and recorded input dims ("[[4096, 1024], [1024, 3072]]");
// NaN when the op is not a GEMM/attention op or its dims are missing.
double opFlops(std::string_view name, std::string_view input_dims);

} // namespace sightline
