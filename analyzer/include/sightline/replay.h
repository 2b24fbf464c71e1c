#pragma once
// The what-if replay (docs/rules.md, "How savings are estimated"): a trace's steps as a dependency
// graph (the host's launch and synchronisation calls in the order they ran, each launch to its GPU
// work by correlation, each stream in order, waits across streams and events inferred from the
// timing), replayed with a fix applied as a transformation (GPU work removed, merged or shortened,
// host time shortened, synchronisations dropped). A fix's saving is how much shorter the replayed
// steady steps are than the replay of the trace as it is; only what leaves the critical path counts.
#include "sightline/metrics.h"

#include <memory>
#include <string>
#include <vector>

namespace sightline {

// Which GPU activities (or, for ScaleHost, which host time) a change touches. An empty list does
// not restrict; names ending in '*' are prefixes.
struct Selector {
    std::vector<std::string> families; // kernel families of the taxonomy
    std::vector<std::string> classes;  // kernel classes
    std::vector<std::string> ops;      // the op that launched it, or one around that op
    std::vector<std::string> within;   // an annotation range around its launch (Optimizer.step#*)
    std::vector<std::string> outside;  // no such range around its launch
    // Stretches of the host's launches where launches of these ops are at most `near_launches`
    // apart (the Gated DeltaNet fallback's chunk loop around its aten::bmm): everything launched
    // in such a stretch.
    std::vector<std::string> near_ops;
    // The other way round: what is launched outside such stretches of these ops (the elementwise
    // kernels that are not the Gated DeltaNet fallback's loop, which its own rule prices).
    std::vector<std::string> away_from_ops;
    int near_launches = 8;
};

enum class ChangeKind {
    RemoveKernels,     // a share (`amount`) of the selected activities goes, with the host time of the ops that launched them
    ScaleKernels,      // each selected activity takes `amount` of its time
    MergeKernels,      // each group of selected activities becomes one of `amount` x their total time, launched by the
                       // first's call; the others' launching ops go; `host_left` of the host time inside a group stays
    ScaleHost,         // host time inside the selected ops (all host time for ops = ["*"]) takes `amount` of it
    DropSyncs,         // synchronisations followed by more launches in their step no longer wait for the GPU
    DropBoundarySyncs, // synchronisations followed by launches only in later steps (between steps) no longer wait
    TrimHostOutliers,  // outlier calls of the selected ops (host_outliers.h) keep `amount` of their host time beyond
                       // their op's median
};
const char* toString(ChangeKind kind);
// "remove_kernels", "scale_kernels", "merge_kernels", "scale_host", "drop_syncs", "drop_boundary_syncs",
// "trim_host_outliers"; false when unknown.
bool parseChangeKind(std::string_view text, ChangeKind& out);

enum class MergeGroup { Step,
                        Within,
                        Region };

struct Change {
    ChangeKind kind = ChangeKind::ScaleKernels;
    Selector select;
    double amount = 1;
    MergeGroup group = MergeGroup::Step;
    double host_left = 1;
};

struct ReplayResult {
    double step_ms = NAN;    // mean replayed time of the steady steps
    size_t gpu_changed = 0;  // GPU activities the changes touched
    size_t host_changed = 0; // launch and synchronisation calls they touched
    // What the changes cut, a steady step: GPU activity time, and host time between and in the
    // launch and synchronisation calls (whether or not it was on the critical path).
    double gpu_cut_ms = 0, host_cut_ms = 0;
};

class ReplayModel {
public:
    ReplayModel(const Trace& trace, const OpTree& tree, const Taxonomy& taxonomy, const Metrics& metrics);
    ~ReplayModel();
    ReplayModel(ReplayModel&&) noexcept;
    ReplayModel& operator=(ReplayModel&&) noexcept;

    // The replay with these changes; with none, the trace as it ran. Deflated: with the
    // recorder's own cost (recorderCostUs) taken off the host's time at every op and API call it
    // recorded, each stretch of host time keeping at least kHostLeftMin of itself.
    ReplayResult replay(const std::vector<Change>& changes = {}, bool deflated = false) const;
    // The baseline replay's mean steady step time, the same deflated (NaN where the recorder's
    // cost is unknown), and the measured one the baseline should reproduce.
    double baselineMs() const { return m_baseline_ms; }
    double deflatedBaselineMs() const { return m_deflated_baseline_ms; }
    double measuredMs() const { return m_measured_ms; }
    // What the trace's recorder adds to the host's time for each op and CUDA API call it records,
    // us: torch.profiler (CPU and CUDA activities) kTorchProfilerCostUs, Sightline's collector
    // kSightlineCostUs; 0 where the recorder or its ops are unknown.
    double recorderCostUs() const { return m_recorder_cost_us; }
    const std::string& recorder() const { return m_recorder; }
    // Measured on the H200's host: torch.profiler, the profiled step minus the unprofiled one over
    // the ops and API calls a step records, 5.2 to 6.1 us on the four host-bound calibration pairs
    // (docs/rules.md; on the bundled GDN fixture's workload the collector's cost benchmark measured
    // about 1.6 to 3.9 us, docs/collector.md: the high figure serves as the far end of a range).
    static constexpr double kTorchProfilerCostUs = 5.5;
    // Sightline's collector (ops, kernels, copies, API calls) on the same benchmark: +53 ms on a
    // 110 ms step of about 24,700 ops and 4,430 launches (docs/collector.md).
    static constexpr double kSightlineCostUs = 1.8;
    // No stretch of host time loses more than this share of itself to the deflation: the
    // calibration pairs' profiled steps were at most 2.5 times the unprofiled ones.
    static constexpr double kHostLeftMin = 0.4;
    // Whether the launch calls of the GPU work are in the trace (otherwise the replay keeps the
    // GPU's idle gaps as they were: it cannot tell when the host would have launched the work).
    bool launchesRecorded() const { return m_launches_recorded; }
    // Whether the CPU ops are in the trace (otherwise a removed kernel takes only its launch call's
    // host time with it, not its op's).
    bool opsRecorded() const { return m_ops_recorded; }
    // False when the trace has no steady step with GPU work to replay.
    bool usable() const { return m_usable; }

    struct Graph; // the dependency graph (analyzer/src/replay_graph.h)

private:
    std::unique_ptr<Graph> m_graph;
    double m_baseline_ms = NAN, m_deflated_baseline_ms = NAN;
    double m_measured_ms = NAN;
    double m_recorder_cost_us = 0;
    std::string m_recorder;
    bool m_launches_recorded = false;
    bool m_ops_recorded = false;
    bool m_usable = false;
};

} // namespace sightline
