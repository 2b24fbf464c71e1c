// What a fix's changes do to the replay's graph (replay.h): which GPU activities and host time
// they select, and the durations, host time and waits they leave.
#include "replay_graph.h"

#include "intervals.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>

namespace sightline {

namespace {

using Graph = ReplayModel::Graph;

bool anyMatch(const std::vector<std::string>& patterns, std::string_view name) {
    return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& p) { return globMatch(p, name); });
}

// The host ranges whose names match (CPU ops, annotations), merged; "*" is the whole trace.
std::vector<Interval> rangesNamed(const Graph& g, const std::vector<std::string>& patterns) {
    const Trace& t = *g.trace;
    std::vector<Interval> out;
    if (std::find(patterns.begin(), patterns.end(), "*") != patterns.end()) return {{g.span_begin, g.span_end}};
    for (const CpuEvent& e : t.cpu)
        if (e.kind != CpuKind::Runtime && e.kind != CpuKind::Driver && anyMatch(patterns, t.str(e.name)))
            out.emplace_back(e.start_ns, e.end_ns);
    return mergedIntervals(std::move(out));
}

// The index of the merged range holding `ts`, -1 for none.
int32_t rangeOf(const std::vector<Interval>& ranges, int64_t ts) {
    auto it = std::upper_bound(ranges.begin(), ranges.end(), ts, [](int64_t v, const Interval& r) { return v < r.first; });
    if (it == ranges.begin() || ts >= std::prev(it)->second) return -1;
    return int32_t(it - ranges.begin()) - 1;
}

class Selection {
public:
    Selection(const Graph& g, const Selector& s) : m_g(g), m_s(s) {
        if (!s.within.empty()) m_within = rangesNamed(g, s.within);
        if (!s.outside.empty()) m_outside = rangesNamed(g, s.outside);
        if (!s.near_ops.empty()) m_region = regions(s.near_ops);
        if (!s.away_from_ops.empty()) m_away = regions(s.away_from_ops);
    }
    // Whether node k is selected, and its group for merging.
    bool selected(size_t k) const {
        const Graph::Node& n = m_g.nodes[k];
        if (!m_s.families.empty() || !m_s.classes.empty()) {
            const KernelClass& kc = m_g.classes[n.klass];
            if (!m_s.families.empty() && std::find(m_s.families.begin(), m_s.families.end(), kc.family) == m_s.families.end()) return false;
            if (!m_s.classes.empty() && !anyMatch(m_s.classes, kc.name)) return false;
        }
        if (!m_s.ops.empty() && !launchedUnder(n, m_s.ops)) return false;
        if (!m_s.within.empty() && rangeOf(m_within, n.launch_begin) < 0) return false;
        if (!m_s.outside.empty() && rangeOf(m_outside, n.launch_begin) >= 0) return false;
        if (!m_s.near_ops.empty() && (n.item < 0 || m_region[size_t(n.item)] < 0)) return false;
        if (!m_s.away_from_ops.empty() && n.item >= 0 && m_away[size_t(n.item)] >= 0) return false;
        return true;
    }
    int64_t group(size_t k, MergeGroup how) const {
        const Graph::Node& n = m_g.nodes[k];
        if (how == MergeGroup::Within) return rangeOf(m_within, n.launch_begin);
        if (how == MergeGroup::Region) return n.item < 0 ? -1 : m_region[size_t(n.item)];
        return n.step;
    }

private:
    bool launchedUnder(const Graph::Node& n, const std::vector<std::string>& patterns) const {
        for (int32_t p = n.op; p != OpTree::kNone; p = m_g.tree->parent[size_t(p)])
            if (anyMatch(patterns, m_g.trace->str(m_g.trace->cpu[size_t(p)].name))) return true;
        return false;
    }
    // Stretches of launch calls where calls launched under these ops are at most near_launches
    // calls apart; each call of a stretch gets the stretch's number, the others -1.
    std::vector<int32_t> regions(const std::vector<std::string>& ops) const {
        const size_t ni = m_g.items.size();
        std::vector<uint8_t> anchor(ni, 0);
        for (const Graph::Node& n : m_g.nodes)
            if (n.item >= 0 && launchedUnder(n, ops)) anchor[size_t(n.item)] = 1;
        std::vector<int32_t> region_of(ni, -1);
        int32_t region = -1;
        int64_t last_anchor = -1, launches_since = 0;
        for (size_t i = 0; i < ni; ++i) {
            if (m_g.items[i].nodes == 0) continue;
            if (!anchor[i]) {
                ++launches_since;
                continue;
            }
            if (last_anchor < 0 || launches_since > m_s.near_launches) ++region;
            else
                for (size_t j = size_t(last_anchor) + 1; j < i; ++j) region_of[j] = region;
            region_of[i] = region;
            last_anchor = int64_t(i);
            launches_since = 0;
        }
        return region_of;
    }

    const Graph& m_g;
    const Selector& m_s;
    std::vector<Interval> m_within, m_outside;
    std::vector<int32_t> m_region, m_away; // per item: the near_ops and away_from_ops stretches
};

// Each outlier call of the selected ops keeps its op's median, its waiting for the device and
// `amount` of the rest.
void trimOutliers(const Graph& g, const Change& c, ReplayEdits& e) {
    const Trace& t = *g.trace;
    for (const HostOutlier& o : g.outliers) {
        const CpuEvent& ev = t.cpu[o.event];
        if (!anyMatch(c.select.ops, t.str(ev.name))) continue;
        const double kept = double(o.median_ns + o.waiting_ns) + std::max(0.0, c.amount) * double(o.excess_ns);
        e.host_keep.push_back({ev.start_ns, ev.end_ns, std::min(1.0, kept / double(ev.duration()))});
        ++e.host_changed;
    }
}

void removeShare(const Graph& g, const Selection& sel, double share, ReplayEdits& e, std::vector<uint8_t>& removed) {
    double acc = 0;
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        if (removed[k] || !sel.selected(k)) continue;
        acc += share;
        if (acc < 1 - 1e-9) continue;
        acc -= 1;
        removed[k] = 1;
        e.node_duration[k] = 0;
        ++e.gpu_changed;
    }
}

void merge(const Graph& g, const Selection& sel, const Change& c, ReplayEdits& e, std::vector<uint8_t>& removed) {
    std::map<int64_t, std::vector<size_t>> groups;
    for (size_t k = 0; k < g.nodes.size(); ++k)
        if (!removed[k] && sel.selected(k)) groups[sel.group(k, c.group)].push_back(k);
    for (const auto& [key, members] : groups) {
        if (key < 0) continue;
        int64_t total = 0;
        for (size_t k : members) total += e.node_duration[k];
        e.node_duration[members.front()] = int64_t(std::llround(double(total) * c.amount));
        for (size_t m = 1; m < members.size(); ++m) {
            removed[members[m]] = 1;
            e.node_duration[members[m]] = 0;
        }
        e.gpu_changed += members.size();
        const Graph::Node &first = g.nodes[members.front()], &last = g.nodes[members.back()];
        if (c.host_left < 1 && first.item >= 0 && last.item >= 0)
            e.host_keep.push_back({g.items[size_t(first.item)].start, g.items[size_t(last.item)].end, c.host_left});
    }
}

} // namespace

ReplayEdits editsFor(const Graph& g, const std::vector<Change>& changes) {
    ReplayEdits e;
    for (const Graph::Node& n : g.nodes) e.node_duration.push_back(n.end - n.start);
    e.wait_dropped.assign(g.items.size(), 0);
    std::vector<uint8_t> removed(g.nodes.size(), 0);
    for (const Change& c : changes) {
        if (c.kind == ChangeKind::ScaleHost) {
            for (const Interval& r : rangesNamed(g, c.select.ops)) e.host_keep.push_back({r.first, r.second, std::max(0.0, c.amount)});
            ++e.host_changed;
            continue;
        }
        if (c.kind == ChangeKind::TrimHostOutliers) {
            trimOutliers(g, c, e);
            continue;
        }
        if (c.kind == ChangeKind::DropSyncs || c.kind == ChangeKind::DropBoundarySyncs) {
            const bool boundary = c.kind == ChangeKind::DropBoundarySyncs;
            for (size_t i = 0; i < g.items.size(); ++i)
                if (boundary ? g.items[i].boundary_sync : g.items[i].mid_step_sync) e.wait_dropped[i] = 1, ++e.host_changed;
            continue;
        }
        const Selection sel(g, c.select);
        if (c.kind == ChangeKind::RemoveKernels) {
            removeShare(g, sel, std::clamp(c.amount, 0.0, 1.0), e, removed);
        } else if (c.kind == ChangeKind::MergeKernels) {
            merge(g, sel, c, e, removed);
        } else {
            for (size_t k = 0; k < g.nodes.size(); ++k)
                if (!removed[k] && sel.selected(k)) {
                    e.node_duration[k] = int64_t(std::llround(double(e.node_duration[k]) * std::max(0.0, c.amount)));
                    ++e.gpu_changed;
                }
        }
    }
    // A call whose GPU work all went goes too, with the op that launched it.
    std::vector<uint32_t> gone(g.items.size(), 0);
    for (size_t k = 0; k < g.nodes.size(); ++k)
        if (removed[k] && g.nodes[k].item >= 0) ++gone[size_t(g.nodes[k].item)];
    for (size_t i = 0; i < g.items.size(); ++i)
        if (gone[i] > 0 && gone[i] == g.items[i].nodes) {
            e.host_keep.push_back({g.items[i].op_begin, g.items[i].op_end, 0.0});
            ++e.host_changed;
        }
    return e;
}

} // namespace sightline
