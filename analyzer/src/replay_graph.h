#pragma once
// The replay's dependency graph (replay.h), built once per trace and replayed once per set of
// changes. Internal to the analyzer.
#include "sightline/host_outliers.h"
#include "sightline/replay.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace sightline {

struct ReplayModel::Graph {
    // A launch or synchronisation call. The calls of all host threads form one lane in the order
    // they began: PyTorch's autograd thread runs while the main thread waits for it.
    struct Item {
        int64_t start = 0, end = 0;       // as recorded
        int64_t lead = 0;                 // start minus the latest end of the calls before it (the host
                                          // time between them when positive; an overlap when negative)
        int64_t lead_from = 0;            // that latest end: where the host time before it begins
        int64_t op_begin = 0, op_end = 0; // the outermost op around it that launched nothing else
        int64_t wake = 0;                 // a synchronisation: from the GPU work it waited for ending to the call returning
        uint32_t cpu = 0;                 // index into trace.cpu
        int32_t step = -1;
        uint32_t nodes = 0;                    // GPU activities it launched
        uint32_t wait_begin = 0, wait_end = 0; // a synchronisation: the activities it waited for (Graph::waits)
        bool sync = false;
        bool mid_step_sync = false; // followed by more launches in its step
        bool boundary_sync = false; // not mid-step, and followed by more launches later (the next step's)
    };
    // A GPU activity.
    struct Node {
        int64_t start = 0, end = 0; // as recorded
        int64_t offset = 0;         // from its launch call's start to when it could start
        int64_t slack = 0;          // its start minus the latest of its constraints (launch latency, waits not modelled)
        int32_t item = -1;          // its launch call
        int32_t prev = -1;          // the activity before it on its stream
        int32_t dep = -1;           // an activity on another stream it waited for (inferred from the timing)
        int32_t op = -1;            // the op that launched it (index into trace.cpu)
        int32_t step = -1;
        uint32_t gpu = 0;         // index into trace.gpu
        uint32_t klass = 0;       // its kernel class (Graph::classes)
        int64_t launch_begin = 0; // when the host began its launch (its own start without a call)
    };
    struct StepWindow {
        int64_t start = 0, end = 0; // the step range (host clock, or GPU clock for GPU-only traces)
        bool gpu_clock = false;
        bool steady = false;
    };

    const Trace* trace = nullptr;
    const OpTree* tree = nullptr;
    const Taxonomy* taxonomy = nullptr;
    const Metrics* metrics = nullptr;
    std::vector<Item> items; // by start
    std::vector<Node> nodes; // by start
    std::vector<uint32_t> waits;
    std::vector<KernelClass> classes;   // the taxonomy's classes of the nodes' names, each once
    std::vector<uint32_t> launch_order; // nodes by launch_begin
    // Where the recorder paid its cost on the host: the starts of the ops and the runtime and
    // driver calls it recorded, sorted (ReplayModel::recorderCostUs).
    std::vector<int64_t> recorded_starts;
    // How many of them start in each item's lead [lead_from, start) and in the call [start, end):
    // counted once, so that a deflated replay needs no search per item.
    std::vector<uint32_t> lead_events, own_events;
    // The trace's host outliers (Metrics::outlier_calls), for every replay that trims them.
    std::vector<HostOutlier> outliers;
    std::vector<StepWindow> steps;
    int64_t host_origin = 0;              // where the host lane starts
    int64_t span_begin = 0, span_end = 0; // the trace's first and last timestamps
    // The vertices in a topological order, found once (the edges never change; the replay's
    // times need only the order): each item's start (2i) and end (2i + 1), then the nodes
    // (2 x items.size() + k). Empty when the graph has a cycle (then there is no replay).
    std::vector<uint32_t> order;

    void build(const Trace& trace, const OpTree& tree, const Taxonomy& taxonomy, const Metrics& metrics);
};

// The times of one replay, per item and per node, and the host time each item keeps.
struct ReplayTimes {
    std::vector<int64_t> item_start, item_end, item_reach; // reach: the latest item end so far
    std::vector<int64_t> node_start, node_end;
    std::vector<int64_t> lead_kept, own_kept; // of each item's lead and of the call itself
    double step_ms = NAN;                     // the steady steps' mean time (NaN: no replay)
};

// What a set of changes does to the graph: new GPU durations, host time kept by interval, dropped waits.
struct ReplayEdits {
    std::vector<int64_t> node_duration;
    std::vector<uint8_t> wait_dropped; // per item
    struct Keep {
        int64_t begin, end;
        double share; // of the host time in [begin, end) that is left
    };
    std::vector<Keep> host_keep;
    // The recorder's cost taken off each host event's time (0: the host's time as recorded), and
    // the share of each stretch of host time that stays at least.
    int64_t event_cost_ns = 0;
    double host_left_min = 1.0;
    size_t gpu_changed = 0, host_changed = 0;
};

ReplayEdits editsFor(const ReplayModel::Graph& g, const std::vector<Change>& changes);
// GPU and host time the edits cut in the steady steps, ms a steady step.
std::pair<double, double> timeCut(const ReplayModel::Graph& g, const ReplayEdits& edits, const ReplayTimes& t);
ReplayTimes runReplay(const ReplayModel::Graph& g, const ReplayEdits& edits);

} // namespace sightline
