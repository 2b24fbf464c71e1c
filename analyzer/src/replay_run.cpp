// Replaying the dependency graph with a set of edits, and the steps' times on the replay
// (replay.h, docs/rules.md).
#include "replay_graph.h"
#include "search.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <set>

namespace sightline {

namespace {

using Graph = ReplayModel::Graph;

// The share of host time kept, as a step function of time (1 where no change applies; where
// changes overlap, the smallest share), and how much of an interval is kept: less, in a deflated
// replay, the recorder's cost for each event that starts in it (down to a floor).
class KeptTime {
public:
    KeptTime(const Graph& g, const ReplayEdits& edits)
        : KeptTime(edits.host_keep) {
        if (edits.event_cost_ns <= 0) return;
        m_starts = &g.recorded_starts;
        m_cost = edits.event_cost_ns;
        m_left_min = edits.host_left_min;
    }
    explicit KeptTime(const std::vector<ReplayEdits::Keep>& keeps) {
        std::vector<std::pair<int64_t, int32_t>> bounds; // (time, +k begin / -k-1 end)
        for (size_t k = 0; k < keeps.size(); ++k) {
            if (keeps[k].end <= keeps[k].begin || keeps[k].share >= 1) continue;
            bounds.emplace_back(keeps[k].begin, int32_t(k));
            bounds.emplace_back(keeps[k].end, -int32_t(k) - 1);
        }
        std::sort(bounds.begin(), bounds.end());
        std::multiset<double> active;
        double lost = 0;
        for (size_t b = 0; b < bounds.size(); ++b) {
            const auto [t, k] = bounds[b];
            if (!m_x.empty()) lost += double(t - m_x.back()) * (1.0 - (active.empty() ? 1.0 : *active.begin()));
            if (k >= 0) active.insert(keeps[size_t(k)].share);
            else active.erase(active.find(keeps[size_t(-k - 1)].share));
            m_x.push_back(t);
            m_lost.push_back(lost);
            m_share.push_back(active.empty() ? 1.0 : *active.begin());
        }
    }
    // Host time kept of [a, b).
    int64_t kept(int64_t a, int64_t b) const { return kept(a, b, m_starts ? int64_t(countIn(*m_starts, a, b)) : 0); }
    // The same, where `events` of the recorder's events start in [a, b) (Graph::lead_events, own_events).
    int64_t kept(int64_t a, int64_t b, int64_t events) const {
        if (b <= a) return 0;
        const int64_t k = m_x.empty() ? b - a : b - a - int64_t(lostBefore(b) - lostBefore(a) + 0.5);
        if (!m_starts) return k;
        return std::max(int64_t(m_left_min * double(k)), k - m_cost * events);
    }

private:
    double lostBefore(int64_t t) const {
        const size_t n = upperBoundFrom(m_x, t, m_hint); // the replay asks in nearly increasing order of t
        if (n == 0) return 0;
        const size_t i = n - 1;
        return m_lost[i] + double(t - m_x[i]) * (1.0 - m_share[i]);
    }
    const std::vector<int64_t>* m_starts = nullptr; // the recorder's events, in a deflated replay
    int64_t m_cost = 0;
    double m_left_min = 1.0;
    std::vector<int64_t> m_x;    // boundaries
    std::vector<double> m_lost;  // time lost before each boundary
    std::vector<double> m_share; // the share kept from each boundary to the next
    mutable size_t m_hint = 0;   // where the last search ended (a KeptTime serves one replay, on one thread)
};

struct Replayer {
    const Graph& g;
    const ReplayEdits& edits;
    KeptTime kept;
    ReplayTimes t;

    void itemStart(size_t i) {
        const int64_t reach = i == 0 ? g.host_origin : t.item_reach[i - 1];
        t.item_start[i] = std::max(reach + t.lead_kept[i], i == 0 ? INT64_MIN : t.item_start[i - 1]);
    }
    void itemEnd(size_t i) {
        const Graph::Item& it = g.items[i];
        const int64_t own = t.own_kept[i];
        int64_t end = t.item_start[i] + own;
        if (it.sync && edits.wait_dropped[i]) {
            end = t.item_start[i] + std::min(it.wake, own);
        } else if (it.sync) {
            int64_t waited = t.item_start[i];
            for (uint32_t w = it.wait_begin; w < it.wait_end; ++w) waited = std::max(waited, t.node_end[g.waits[w]]);
            end = waited + it.wake;
        }
        t.item_end[i] = end;
        t.item_reach[i] = std::max(i == 0 ? g.host_origin : t.item_reach[i - 1], end);
    }
    void node(size_t k) {
        const Graph::Node& n = g.nodes[k];
        int64_t ready = INT64_MIN;
        if (n.item >= 0) {
            const Graph::Item& it = g.items[size_t(n.item)];
            const int64_t dur = it.end - it.start;
            const int64_t own = t.own_kept[size_t(n.item)];
            ready = t.item_start[size_t(n.item)] + (dur > 0 ? int64_t(double(n.offset) * double(own) / double(dur)) : 0);
        }
        if (n.prev >= 0) ready = std::max(ready, t.node_end[size_t(n.prev)]);
        if (n.dep >= 0) ready = std::max(ready, t.node_end[size_t(n.dep)]);
        t.node_start[k] = ready == INT64_MIN ? n.start : ready + n.slack;
        t.node_end[k] = t.node_start[k] + edits.node_duration[k];
    }
};

// Item i's count of the recorder's events (Graph::lead_events, own_events), 0 where none were
// counted: the model counts them whenever a deflated replay can be asked for.
int64_t recordedIn(const std::vector<uint32_t>& counts, size_t i) { return counts.empty() ? 0 : int64_t(counts[i]); }

// The replayed time of a host timestamp: shifted with the calls around it, the host time between
// calls shortened as the edits say.
int64_t hostTime(const Graph& g, const ReplayTimes& t, const KeptTime& kept, int64_t ts) {
    auto it = std::upper_bound(g.items.begin(), g.items.end(), ts, [](int64_t v, const Graph::Item& x) { return v < x.start; });
    if (it == g.items.begin()) return ts;
    const size_t i = size_t(it - g.items.begin()) - 1;
    const int64_t reach = std::max(g.items[i].lead_from, g.items[i].end); // the latest end up to call i, as recorded
    if (ts <= reach) return t.item_reach[i] - (reach - ts);
    return t.item_reach[i] + kept.kept(reach, ts);
}

// The mean time of the steady steps on the replay.
double steadyStepMs(const Graph& g, const ReplayTimes& t, const KeptTime& kept) {
    if (t.item_start.size() != g.items.size()) return NAN;
    // Where each step's own GPU work ends, and the running latest end of the work in launch order.
    std::vector<int64_t> own_end(g.steps.size(), INT64_MIN), own_begin(g.steps.size(), INT64_MAX);
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        const int32_t s = g.nodes[k].step;
        if (s < 0) continue;
        own_end[size_t(s)] = std::max(own_end[size_t(s)], t.node_end[k]);
        own_begin[size_t(s)] = std::min(own_begin[size_t(s)], t.node_start[k]);
    }
    std::vector<int64_t> launched_reach;
    int64_t reach = INT64_MIN;
    for (uint32_t k : g.launch_order) launched_reach.push_back(reach = std::max(reach, t.node_end[k]));
    double sum = 0;
    size_t n = 0;
    for (size_t s = 0; s < g.steps.size(); ++s) {
        const Graph::StepWindow& w = g.steps[s];
        if (!w.steady) continue;
        int64_t begin, end;
        if (w.gpu_clock) {
            begin = s == 0 || own_end[s - 1] == INT64_MIN ? own_begin[s] : own_end[s - 1];
            end = own_end[s];
            if (own_end[s] == INT64_MIN) continue;
        } else {
            // As the metrics: from where the work launched before the step ended (or the step's
            // start) to the later of the step's end and its own work's end.
            auto it = std::lower_bound(g.launch_order.begin(), g.launch_order.end(), w.start,
                                       [&](uint32_t k, int64_t v) { return g.nodes[k].launch_begin < v; });
            const int64_t earlier = it == g.launch_order.begin() ? INT64_MIN : launched_reach[size_t(it - g.launch_order.begin()) - 1];
            begin = std::max(hostTime(g, t, kept, w.start), earlier);
            end = std::max({hostTime(g, t, kept, w.end), own_end[s], begin});
        }
        sum += double(end - begin) / 1e6;
        ++n;
    }
    return n ? sum / double(n) : NAN;
}

} // namespace

ReplayTimes runReplay(const Graph& g, const ReplayEdits& edits) {
    Replayer r{g, edits, KeptTime(g, edits), {}};
    const size_t ni = g.items.size(), nn = g.nodes.size(), base = 2 * ni, total = base + nn;
    r.t.item_start.assign(ni, 0);
    r.t.item_end.assign(ni, 0);
    r.t.item_reach.assign(ni, 0);
    r.t.node_start.assign(nn, 0);
    r.t.node_end.assign(nn, 0);
    r.t.lead_kept.resize(ni);
    r.t.own_kept.resize(ni);
    for (size_t i = 0; i < ni; ++i) {
        const Graph::Item& it = g.items[i];
        r.t.lead_kept[i] = it.lead > 0 ? r.kept.kept(it.lead_from, it.start, recordedIn(g.lead_events, i)) : it.lead;
        r.t.own_kept[i] = r.kept.kept(it.start, it.end, recordedIn(g.own_events, i));
    }
    if (g.order.size() != total) {
        r.t.item_start.clear(); // a cycle: no replay
        return std::move(r.t);
    }
    for (const uint32_t v : g.order) {
        if (v >= base) r.node(v - base);
        else if (v % 2 == 0) r.itemStart(v / 2);
        else r.itemEnd(v / 2);
    }
    r.t.step_ms = steadyStepMs(g, r.t, r.kept);
    return std::move(r.t);
}

std::pair<double, double> timeCut(const Graph& g, const ReplayEdits& edits, const ReplayTimes& t) {
    size_t steady = 0;
    for (const Graph::StepWindow& w : g.steps) steady += w.steady;
    if (steady == 0) return {0, 0};
    auto isSteady = [&](int32_t s) { return s >= 0 && size_t(s) < g.steps.size() && g.steps[size_t(s)].steady; };
    int64_t gpu = 0, host = 0;
    for (size_t k = 0; k < g.nodes.size(); ++k)
        if (isSteady(g.nodes[k].step)) gpu += (g.nodes[k].end - g.nodes[k].start) - edits.node_duration[k];
    for (size_t i = 0; i < g.items.size() && i < t.own_kept.size(); ++i) {
        const Graph::Item& it = g.items[i];
        if (!isSteady(it.step)) continue;
        host += (it.end - it.start) - t.own_kept[i];
        if (it.lead > 0) host += it.lead - t.lead_kept[i];
    }
    return {double(gpu) / 1e6 / double(steady), double(host) / 1e6 / double(steady)};
}

} // namespace sightline
