// Building the replay's dependency graph from a trace (replay.h, docs/rules.md).
#include "replay_graph.h"

#include "sightline/metric_passes.h"

#include <algorithm>
#include <climits>
#include <map>
#include <unordered_map>

namespace sightline {

namespace {

using Graph = ReplayModel::Graph;

constexpr int64_t kWaitNs = 2'000;      // a start this much after its constraints waited for something else
constexpr int64_t kSyncSlackNs = 2'000; // GPU work ending this soon after a synchronisation returned was waited for
constexpr size_t kDepCandidates = 32;   // activities ending just before a wait, looked at for its cause

void buildSteps(Graph& g, const Metrics& m) {
    std::vector<uint8_t> steady(m.steps.size(), 0);
    for (size_t i : m.steady) steady[i] = 1;
    for (size_t i = 0; i < m.steps.size(); ++i)
        g.steps.push_back({m.steps[i].step.start_ns, m.steps[i].step.end_ns, m.steps[i].step.gpu_clock, steady[i] == 1});
}

// The nodes (GPU activities by start) and the items (launch and synchronisation calls by start).
void buildNodesAndItems(Graph& g, const std::vector<int32_t>& launch) {
    const Trace& t = *g.trace;
    std::vector<int32_t> item_of_cpu(t.cpu.size(), -1);
    for (size_t gi = 0; gi < t.gpu.size(); ++gi)
        if (t.gpu[gi].kind != GpuKind::Annotation && launch[gi] >= 0) item_of_cpu[size_t(launch[gi])] = 0;
    std::vector<uint32_t> item_cpu;
    for (size_t i = 0; i < t.cpu.size(); ++i) {
        const CpuEvent& e = t.cpu[i];
        const bool api = e.kind == CpuKind::Runtime || e.kind == CpuKind::Driver;
        if (api && (item_of_cpu[i] == 0 || isHostSyncCall(t.str(e.name)))) item_cpu.push_back(uint32_t(i));
    }
    std::stable_sort(item_cpu.begin(), item_cpu.end(), [&](uint32_t a, uint32_t b) { return t.cpu[a].start_ns < t.cpu[b].start_ns; });
    for (uint32_t c : item_cpu) {
        Graph::Item it;
        it.cpu = c;
        it.start = t.cpu[c].start_ns;
        it.end = std::max(t.cpu[c].end_ns, it.start);
        it.op_begin = it.start;
        it.op_end = it.end;
        it.step = g.metrics->cpu_step.empty() ? -1 : g.metrics->cpu_step[c];
        it.sync = isHostSyncCall(t.str(t.cpu[c].name));
        item_of_cpu[c] = int32_t(g.items.size());
        g.items.push_back(it);
    }
    // The op that launched an activity without a launch call, by its external id.
    std::unordered_map<int64_t, int32_t> op_of_external;
    for (size_t i = 0; i < t.cpu.size(); ++i)
        if ((t.cpu[i].kind == CpuKind::Op || t.cpu[i].kind == CpuKind::UserAnnotation) && t.cpu[i].external_id != 0)
            op_of_external.emplace(t.cpu[i].external_id, int32_t(i));
    for (size_t gi = 0; gi < t.gpu.size(); ++gi) {
        const GpuEvent& e = t.gpu[gi];
        if (e.kind == GpuKind::Annotation) continue;
        Graph::Node n;
        n.gpu = uint32_t(gi);
        n.start = e.start_ns;
        n.end = std::max(e.end_ns, e.start_ns);
        n.step = g.metrics->gpu_step.empty() ? -1 : g.metrics->gpu_step[gi];
        n.launch_begin = e.start_ns;
        if (launch[gi] >= 0) {
            n.item = item_of_cpu[size_t(launch[gi])];
            n.launch_begin = g.items[size_t(n.item)].start;
            n.op = g.tree->parent[size_t(launch[gi])];
        } else if (auto it = op_of_external.find(e.external_id); e.external_id != 0 && it != op_of_external.end()) {
            n.op = it->second;
        }
        g.nodes.push_back(n);
    }
    std::stable_sort(g.nodes.begin(), g.nodes.end(), [](const Graph::Node& a, const Graph::Node& b) { return a.start < b.start; });
    std::vector<int32_t> class_of_name(t.strings.size(), -1);
    for (Graph::Node& n : g.nodes) {
        int32_t& c = class_of_name[t.gpu[n.gpu].name.value];
        if (c < 0) {
            c = int32_t(g.classes.size());
            g.classes.push_back(g.taxonomy->classify(t.str(t.gpu[n.gpu].name)));
        }
        n.klass = uint32_t(c);
    }
    for (const Graph::Node& n : g.nodes)
        if (n.item >= 0) ++g.items[size_t(n.item)].nodes;
}

// The host time before each call, measured from the latest end of the calls before it.
void hostLeads(Graph& g) {
    int64_t reach = g.items.empty() ? 0 : g.items.front().start;
    for (const Graph::StepWindow& s : g.steps)
        if (!s.gpu_clock) reach = std::min(reach, s.start);
    g.host_origin = reach;
    for (Graph::Item& it : g.items) {
        it.lead_from = reach;
        it.lead = it.start - reach;
        reach = std::max(reach, it.end);
    }
}

// The outermost op around each launch call that launched nothing else: the host time that goes
// when its GPU work goes.
void launchingOps(Graph& g) {
    const Trace& t = *g.trace;
    const OpTree& tree = *g.tree;
    std::vector<uint32_t> launches_under(t.cpu.size(), 0);
    for (const Graph::Item& it : g.items) {
        if (it.nodes == 0) continue;
        for (int32_t p = tree.parent[it.cpu]; p != OpTree::kNone; p = tree.parent[size_t(p)]) ++launches_under[size_t(p)];
    }
    for (Graph::Item& it : g.items) {
        if (it.nodes == 0) continue;
        int32_t op = OpTree::kNone;
        for (int32_t p = tree.parent[it.cpu]; p != OpTree::kNone && launches_under[size_t(p)] == 1; p = tree.parent[size_t(p)]) op = p;
        if (op == OpTree::kNone) continue;
        it.op_begin = std::min(it.op_begin, t.cpu[size_t(op)].start_ns);
        it.op_end = std::max(it.op_end, t.cpu[size_t(op)].end_ns);
    }
}

// Each node's constraints: its launch call, the activity before it on its stream, and, when it
// started later than both allow, the activity on another stream that ended just before it (an
// event or stream wait). What is left is its slack, kept in every replay.
void streamOrderAndWaits(Graph& g) {
    std::map<std::pair<int32_t, int32_t>, int32_t> last_on_stream;
    std::vector<std::pair<int64_t, uint32_t>> by_end;
    for (uint32_t k = 0; k < g.nodes.size(); ++k) by_end.emplace_back(g.nodes[k].end, k);
    std::sort(by_end.begin(), by_end.end());
    for (uint32_t k = 0; k < g.nodes.size(); ++k) {
        Graph::Node& n = g.nodes[k];
        const GpuEvent& e = g.trace->gpu[n.gpu];
        auto& last = last_on_stream[{e.device, e.stream}];
        n.prev = last == 0 ? -1 : last - 1;
        last = int32_t(k) + 1;
        int64_t base = INT64_MIN;
        if (n.item >= 0) {
            const Graph::Item& it = g.items[size_t(n.item)];
            n.offset = std::clamp(std::min(n.start, it.end) - it.start, int64_t(0), it.end - it.start);
            base = it.start + n.offset;
        }
        if (n.prev >= 0) base = std::max(base, g.nodes[size_t(n.prev)].end);
        if (base == INT64_MIN || n.start - base > kWaitNs) {
            auto it = std::upper_bound(by_end.begin(), by_end.end(), std::make_pair(n.start + 500, uint32_t(UINT32_MAX)));
            for (size_t c = 0; c < kDepCandidates && it != by_end.begin(); ++c) {
                const Graph::Node& d = g.nodes[(--it)->second];
                if (d.end <= base) break;
                const GpuEvent& de = g.trace->gpu[d.gpu];
                const bool launched_before = (d.item >= 0 && n.item >= 0) ? d.item < n.item : d.launch_begin <= n.launch_begin;
                if (de.stream != e.stream && launched_before && d.start < n.start) {
                    n.dep = int32_t(it->second);
                    base = std::max(base, d.end);
                    break;
                }
            }
        }
        n.slack = base == INT64_MIN ? 0 : std::max<int64_t>(0, n.start - base);
    }
}

// What each synchronisation waited for: on each stream, the last activity launched before it that
// ended by the time it returned.
void syncWaits(Graph& g) {
    std::map<std::pair<int32_t, int32_t>, std::vector<uint32_t>> streams;
    for (uint32_t k = 0; k < g.nodes.size(); ++k) {
        const GpuEvent& e = g.trace->gpu[g.nodes[k].gpu];
        streams[{e.device, e.stream}].push_back(k);
    }
    for (size_t i = 0; i < g.items.size(); ++i) {
        Graph::Item& it = g.items[i];
        if (!it.sync) continue;
        it.wait_begin = uint32_t(g.waits.size());
        int64_t waited_end = INT64_MIN;
        for (const auto& [key, list] : streams) {
            auto launched = std::upper_bound(list.begin(), list.end(), it.start,
                                             [&](int64_t v, uint32_t k) { return v < g.nodes[k].launch_begin; });
            auto ended = std::upper_bound(list.begin(), list.end(), it.end + kSyncSlackNs,
                                          [&](int64_t v, uint32_t k) { return v < g.nodes[k].end; });
            auto last = std::min(launched, ended);
            // Work launched by a later call (one that began at the same time) was not waited for.
            while (last != list.begin() && g.nodes[*std::prev(last)].item > int32_t(i)) --last;
            if (last == list.begin()) continue;
            g.waits.push_back(*std::prev(last));
            waited_end = std::max(waited_end, g.nodes[*std::prev(last)].end);
        }
        it.wait_end = uint32_t(g.waits.size());
        it.wake = it.end - std::max(it.start, waited_end);
    }
    // A synchronisation followed by more launches in its step, or only by later ones (a boundary).
    std::map<int32_t, bool> launch_after;
    bool launch_later = false;
    for (size_t i = g.items.size(); i-- > 0;) {
        Graph::Item& it = g.items[i];
        if (it.sync && it.step >= 0) it.mid_step_sync = launch_after[it.step];
        if (it.sync) it.boundary_sync = !it.mid_step_sync && launch_later;
        if (it.nodes > 0) {
            launch_later = true;
            if (it.step >= 0) launch_after[it.step] = true;
        }
    }
}

// The vertices in a topological order (Kahn's algorithm over the edges in compressed form).
// Vertices: each call's start (2i) and end (2i + 1), then the nodes (2 x items + k). A call's end
// waits for what a synchronisation waited for; its GPU work waits only for its start, so a blocking
// copy that waits for its own work makes no cycle.
void topologicalOrder(Graph& g) {
    const uint32_t ni = uint32_t(g.items.size()), base = 2 * ni, total = base + uint32_t(g.nodes.size());
    std::vector<std::pair<uint32_t, uint32_t>> edges;
    for (uint32_t i = 0; i < ni; ++i) {
        edges.emplace_back(2 * i, 2 * i + 1);
        if (i > 0) edges.emplace_back(2 * i - 1, 2 * i);
        for (uint32_t w = g.items[i].wait_begin; w < g.items[i].wait_end; ++w) edges.emplace_back(base + g.waits[w], 2 * i + 1);
    }
    for (uint32_t k = 0; k < g.nodes.size(); ++k) {
        const Graph::Node& n = g.nodes[k];
        if (n.item >= 0) edges.emplace_back(2 * uint32_t(n.item), base + k);
        if (n.prev >= 0) edges.emplace_back(base + uint32_t(n.prev), base + k);
        if (n.dep >= 0) edges.emplace_back(base + uint32_t(n.dep), base + k);
    }
    std::sort(edges.begin(), edges.end());
    edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
    std::vector<uint32_t> begin(total + 1, 0), degree(total, 0), ready;
    for (const auto& [from, to] : edges) {
        ++begin[from + 1];
        ++degree[to];
    }
    for (uint32_t v = 0; v < total; ++v) begin[v + 1] += begin[v];
    for (uint32_t v = 0; v < total; ++v)
        if (degree[v] == 0) ready.push_back(v);
    g.order.reserve(total);
    while (!ready.empty()) {
        const uint32_t v = ready.back();
        ready.pop_back();
        g.order.push_back(v);
        for (uint32_t e = begin[v]; e < begin[v + 1]; ++e) // `edges` is sorted by `from`
            if (--degree[edges[e].second] == 0) ready.push_back(edges[e].second);
    }
    if (g.order.size() != total) g.order.clear();
}

} // namespace

void ReplayModel::Graph::build(const Trace& t, const OpTree& op_tree, const Taxonomy& tax, const Metrics& m) {
    trace = &t;
    tree = &op_tree;
    taxonomy = &tax;
    metrics = &m;
    span_begin = INT64_MAX;
    span_end = INT64_MIN;
    for (const CpuEvent& e : t.cpu) span_begin = std::min(span_begin, e.start_ns), span_end = std::max(span_end, e.end_ns);
    for (const GpuEvent& e : t.gpu) span_begin = std::min(span_begin, e.start_ns), span_end = std::max(span_end, e.end_ns);
    buildSteps(*this, m);
    buildNodesAndItems(*this, launchCalls(t));
    hostLeads(*this);
    launchingOps(*this);
    streamOrderAndWaits(*this);
    syncWaits(*this);
    for (uint32_t k = 0; k < nodes.size(); ++k) launch_order.push_back(k);
    std::stable_sort(launch_order.begin(), launch_order.end(),
                     [&](uint32_t a, uint32_t b) { return nodes[a].launch_begin < nodes[b].launch_begin; });
    topologicalOrder(*this);
}

} // namespace sightline
