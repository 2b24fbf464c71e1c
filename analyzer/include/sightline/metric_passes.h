#pragma once
// computeMetrics in parts (docs/metrics.md): a context built once (the steps, each event's step,
// each GPU activity's launch call, what each name is), then one pass per metric family, each
// filling its own fields of StepMetrics and testable alone, then the steady-state summary, driven
// by one table of metric definitions.
#include "sightline/metrics.h"

#include <string>
#include <vector>

namespace sightline {

// What the passes share, built once per trace.
class MetricContext {
public:
    MetricContext(const Trace& trace, const OpTree& tree, const Taxonomy& taxonomy);

    const Trace& trace;
    const OpTree& tree;
    const Taxonomy& taxonomy;
    std::vector<Step> steps;
    std::vector<int32_t> cpu_step; // the step of each CPU event, by its start; -1 outside every step
    std::vector<int32_t> gpu_step; // the step of each GPU activity, by when the host began its launch
                                   // (its own start without a launch call); -1 for GPU annotations
    std::vector<int32_t> launch;   // each GPU activity's launch call (index into trace.cpu), -1 when unknown
    bool runtime_calls = false;    // the trace holds CUDA runtime calls
    bool host_recorded = false;    // the trace holds CPU ops or annotations (not GPU activity alone)

    enum NameFlag : uint8_t { kSync = 1,
                              kLoader = 2,
                              kBatch = 4,
                              kLaunch = 8,
                              kOptimizer = 16,
                              kCompile = 32,
                              kAlloc = 64 };
    // What a name is (the NameFlag bits), decided once per name.
    uint8_t flags(StringId name) const;
    // The taxonomy's class of a GPU activity name, decided once per name.
    const KernelClass& classOf(StringId name) const;
    // The step a host timestamp falls in, -1 for none.
    int32_t stepOf(int64_t ts) const;
    // When the host began and ended the launch of GPU activity `gi` (its own start without a
    // recorded launch call).
    int64_t launchBegin(size_t gi) const;
    int64_t launchEnd(size_t gi) const;

private:
    mutable std::vector<uint8_t> m_flags;
    mutable std::vector<int8_t> m_class_known;
    mutable std::vector<KernelClass> m_classes;
};

// A kernel or graph launch call (cudaLaunchKernel, cuLaunchKernelEx, cudaGraphLaunch, ...).
bool isLaunchCall(std::string_view name);
// A host synchronisation call (cudaStreamSynchronize, a blocking cudaMemcpy, their driver forms, ...).
bool isHostSyncCall(std::string_view name);
// The launch call of each GPU activity (index into trace.cpu), by correlation id; -1 when unknown.
std::vector<int32_t> launchCalls(const Trace& trace);

// The passes, one per family; each fills only the StepMetrics fields named.
// Host work: api_ns, cpu_dispatch_ns, launches, sync_calls, dataloader_ns, optimizer_gpu_ns.
void hostPass(const MetricContext& ctx, std::vector<StepMetrics>& steps);
// GPU work: gpu_time_ns, kernels, small_kernels, families, classes.
void kernelPass(const MetricContext& ctx, std::vector<StepMetrics>& steps);
// Memory operations: memcpy, memset, dtod, dtoh.
void memopPass(const MetricContext& ctx, std::vector<StepMetrics>& steps);
// The GPU timeline: the step's window, time_ns, gpu_busy_ns, compute_stream, compute_busy_ns,
// idle (gaps and their causes), mid_step_syncs.
void timelinePass(const MetricContext& ctx, std::vector<StepMetrics>& steps);
// Communication: collectives, comm_ns, comm_exposed_ns.
void commPass(const MetricContext& ctx, std::vector<StepMetrics>& steps);
// FLOPs from recorded shapes: flops.
void flopsPass(const MetricContext& ctx, std::vector<StepMetrics>& steps);
// Tokens and batches from sightline.batch annotations: real_tokens, padded_tokens, sequences,
// packed, boundaries.
void tokensPass(const MetricContext& ctx, std::vector<StepMetrics>& steps);
// Signs of warm-up: compile_events, allocations.
void warmupPass(const MetricContext& ctx, std::vector<StepMetrics>& steps);
// Host outliers (host_outliers.h), from each GPU activity's launch call: Metrics::outlier_calls,
// each step's host_outliers, and Metrics::host_outliers by op over the steady steps.
void hostOutlierMetrics(const Trace& trace, const OpTree& tree, const std::vector<int32_t>& launch, Metrics& metrics);
// The steady steps: steadySteps() by time, less every step that compiles; a lone step left that
// allocated device memory is warm-up too. When none is left, all steps, and `why` says so.
std::vector<size_t> steadyAfterWarmup(const std::vector<StepMetrics>& steps, std::string& why);

// A step is host-bound when its compute stream idles waiting for the host to launch work at least
// this share of it (`idle.launch_share`, `step.host_bound`): the launch-bound rule fires on it, and
// the advisor's replayed savings there carry the recorder's cost as a range (docs/rules.md).
inline constexpr double kHostBoundLaunchShare = 0.2;

// One steady-state figure: its name, what it is, and how it is computed: the mean over the steady
// steps of a per-step value, or derived from the figures defined before it and the passes'
// summaries (Metrics::tokens, Metrics::hw). `applies`, where given, says whether the trace has the
// figure at all (hw.* only with hardware samples): otherwise it is left out, not unknown.
struct MetricDef {
    const char* name;
    const char* description;
    double (*per_step)(const StepMetrics&) = nullptr;
    double (*derived)(const Metrics&) = nullptr;
    bool (*applies)(const Metrics&) = nullptr;
};
// Every figure in the order they are computed (ranks.* have no function: they describe a job of
// several traces, and `sightline ranks` sets them from its own analysis, ranks.h).
const std::vector<MetricDef>& metricDefs();
// Fills metrics.values from metrics.steps and metrics.steady.
void summarize(Metrics& metrics);

} // namespace sightline
