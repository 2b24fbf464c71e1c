// The what-if replay's entry points (replay.h, docs/rules.md).
#include "replay_graph.h"
#include "search.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace sightline {

const char* toString(ChangeKind kind) {
    switch (kind) {
    case ChangeKind::RemoveKernels: return "remove_kernels";
    case ChangeKind::ScaleKernels: return "scale_kernels";
    case ChangeKind::MergeKernels: return "merge_kernels";
    case ChangeKind::ScaleHost: return "scale_host";
    case ChangeKind::DropSyncs: return "drop_syncs";
    case ChangeKind::DropBoundarySyncs: return "drop_boundary_syncs";
    case ChangeKind::TrimHostOutliers: return "trim_host_outliers";
    }
    return "?";
}

bool parseChangeKind(std::string_view text, ChangeKind& out) {
    for (ChangeKind k : {ChangeKind::RemoveKernels, ChangeKind::ScaleKernels, ChangeKind::MergeKernels, ChangeKind::ScaleHost,
                         ChangeKind::DropSyncs, ChangeKind::DropBoundarySyncs, ChangeKind::TrimHostOutliers})
        if (text == toString(k)) {
            out = k;
            return true;
        }
    return false;
}

namespace {

// The recorder's cost per op and API call it records, us (ReplayModel::recorderCostUs).
double recorderCost(const Trace& trace, bool ops_recorded) {
    if (!ops_recorded) return 0;
    if (trace.recorder == "torch.profiler") return ReplayModel::kTorchProfilerCostUs;
    if (trace.recorder == "sightline") return ReplayModel::kSightlineCostUs;
    return 0;
}

std::vector<int64_t> recordedStarts(const Trace& trace) {
    std::vector<int64_t> out;
    for (const CpuEvent& e : trace.cpu)
        if (e.kind == CpuKind::Op || e.kind == CpuKind::Runtime || e.kind == CpuKind::Driver) out.push_back(e.start_ns);
    std::sort(out.begin(), out.end());
    return out;
}

// The recorded events in each item's lead and call (Graph::lead_events, own_events).
void countRecorded(ReplayModel::Graph& g) {
    g.lead_events.resize(g.items.size());
    g.own_events.resize(g.items.size());
    for (size_t i = 0; i < g.items.size(); ++i) {
        const ReplayModel::Graph::Item& it = g.items[i];
        g.lead_events[i] = uint32_t(countIn(g.recorded_starts, it.lead_from, it.start));
        g.own_events[i] = uint32_t(countIn(g.recorded_starts, it.start, it.end));
    }
}

} // namespace

ReplayModel::ReplayModel(const Trace& trace, const OpTree& tree, const Taxonomy& taxonomy, const Metrics& metrics)
    : m_graph(std::make_unique<Graph>()) {
    m_graph->build(trace, tree, taxonomy, metrics);
    m_graph->outliers = metrics.outlier_calls;
    m_measured_ms = metrics.value("step.time_ms");
    m_ops_recorded = metrics.host_recorded;
    for (const Graph::Node& n : m_graph->nodes) m_launches_recorded |= n.item >= 0;
    m_baseline_ms = replay().step_ms;
    m_recorder = trace.recorder;
    m_recorder_cost_us = recorderCost(trace, m_ops_recorded);
    if (m_recorder_cost_us > 0) {
        m_graph->recorded_starts = recordedStarts(trace);
        countRecorded(*m_graph);
        m_deflated_baseline_ms = replay({}, true).step_ms;
    }
    // A trace without GPU activity (a job on the CPU) has no work for a fix to change: its rules
    // are priced by their formulas.
    m_usable = !trace.gpu.empty() && !std::isnan(m_baseline_ms) && m_baseline_ms > 0;
}

ReplayModel::~ReplayModel() = default;
ReplayModel::ReplayModel(ReplayModel&&) noexcept = default;
ReplayModel& ReplayModel::operator=(ReplayModel&&) noexcept = default;

ReplayResult ReplayModel::replay(const std::vector<Change>& changes, bool deflated) const {
    ReplayEdits edits = editsFor(*m_graph, changes);
    if (deflated && m_recorder_cost_us > 0) {
        edits.event_cost_ns = int64_t(std::llround(m_recorder_cost_us * 1e3));
        edits.host_left_min = kHostLeftMin;
    }
    const ReplayTimes times = runReplay(*m_graph, edits);
    ReplayResult r;
    r.step_ms = times.step_ms;
    r.gpu_changed = edits.gpu_changed;
    r.host_changed = edits.host_changed;
    std::tie(r.gpu_cut_ms, r.host_cut_ms) = timeCut(*m_graph, edits, times);
    return r;
}

} // namespace sightline
