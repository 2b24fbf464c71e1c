#include "sightline/op_tree.h"

#include "parallel_sort.h"

#include <algorithm>
#include <array>
#include <functional>

namespace sightline {

bool isBookkeepingName(std::string_view name) {
    static constexpr std::array<std::string_view, 8> kNames = {
        "[memory]", "[OutOfMemory]", "profiler::_record_function_enter",
        "profiler::_record_function_enter_new", "profiler::_record_function_exit",
        "aten::is_leaf", "aten::output_nr", "aten::_version"};
    return std::find(kNames.begin(), kNames.end(), name) != kNames.end();
}

namespace {

bool isFrontend(CpuKind k) { return k == CpuKind::Op || k == CpuKind::UserAnnotation; }

struct SortKey {
    uint32_t thread;
    uint32_t index;
    int64_t start;
    int64_t end;
};

// Names to leave out, decided once per distinct name; also takes each event's thread.
void markBookkeeping(const Trace& trace, OpTree& t) {
    std::vector<int8_t> bookkeeping(trace.strings.size(), -1);
    for (size_t i = 0; i < trace.cpu.size(); ++i) {
        const CpuEvent& e = trace.cpu[i];
        t.thread[i] = e.thread;
        int8_t& b = bookkeeping[e.name.value];
        if (b < 0)
            b = isBookkeepingName(trace.str(e.name)) ? 1 : 0;
        if (b) {
            t.counted[i] = 0;
            ++t.links.excluded;
        }
    }
}

// Frontend events by external id (several may share one id; each gets the GPU time).
class OwnersById {
public:
    OwnersById(const Trace& trace, const OpTree& t) {
        const size_t n = trace.cpu.size();
        m_by_id.reserve(n / 2);
        for (size_t i = 0; i < n; ++i)
            if (t.counted[i] && isFrontend(trace.cpu[i].kind) && trace.cpu[i].external_id != 0)
                m_by_id.emplace_back(trace.cpu[i].external_id, static_cast<uint32_t>(i));
        sortOnTwoCores(m_by_id, std::less<std::pair<int64_t, uint32_t>>());
    }
    using Iter = std::vector<std::pair<int64_t, uint32_t>>::const_iterator;
    std::pair<Iter, Iter> of(int64_t id) const {
        auto lo = std::lower_bound(m_by_id.begin(), m_by_id.end(), std::make_pair(id, uint32_t(0)));
        auto hi = lo;
        while (hi != m_by_id.end() && hi->first == id) ++hi;
        return std::make_pair(lo, hi);
    }

private:
    std::vector<std::pair<int64_t, uint32_t>> m_by_id;
};

// API calls nest on the thread of the op they belong to.
void linkApiCalls(const Trace& trace, const OwnersById& owners, OpTree& t) {
    for (size_t i = 0; i < trace.cpu.size(); ++i) {
        const CpuEvent& e = trace.cpu[i];
        if (isFrontend(e.kind) || e.kind == CpuKind::PythonFunction || e.external_id == 0)
            continue;
        auto [lo, hi] = owners.of(e.external_id);
        if (lo != hi) {
            t.thread[i] = trace.cpu[lo->second].thread;
            ++t.links.api_linked;
        }
    }
}

// GPU activities (not GPU-side annotations) add their time to the op that launched them.
void addGpuTime(const Trace& trace, const OwnersById& owners, OpTree& t) {
    for (const GpuEvent& g : trace.gpu) {
        if (g.kind == GpuKind::Annotation)
            continue;
        if (g.external_id == 0) {
            ++t.links.gpu_without_id;
            continue;
        }
        auto [lo, hi] = owners.of(g.external_id);
        if (lo == hi) {
            ++t.links.gpu_unmatched;
            continue;
        }
        ++t.links.gpu_linked;
        for (auto it = lo; it != hi; ++it)
            t.self_device_ns[it->second] += g.duration();
    }
}

// The counted events per thread, by start ascending then end descending: parents before children.
std::vector<SortKey> nestingOrder(const Trace& trace, const OpTree& t) {
    std::vector<SortKey> order;
    order.reserve(trace.cpu.size());
    for (size_t i = 0; i < trace.cpu.size(); ++i)
        if (t.counted[i])
            order.push_back(SortKey{t.thread[i], static_cast<uint32_t>(i), trace.cpu[i].start_ns, trace.cpu[i].end_ns});
    sortOnTwoCores(order, [](const SortKey& a, const SortKey& b) {
        if (a.thread != b.thread) return a.thread < b.thread;
        if (a.start != b.start) return a.start < b.start;
        if (a.end != b.end) return a.end > b.end;
        return a.index < b.index;
    });
    return order;
}

// Each event's parent before folding: the innermost open event that contains it entirely.
struct RawNesting {
    std::vector<int32_t> parent;
    std::vector<uint32_t> child_count;
    std::vector<int32_t> only_child;
};

RawNesting nest(const Trace& trace, const std::vector<SortKey>& order, OpTree& t) {
    const size_t n = trace.cpu.size();
    RawNesting r{std::vector<int32_t>(n, OpTree::kNone), std::vector<uint32_t>(n, 0), std::vector<int32_t>(n, OpTree::kNone)};
    std::vector<uint32_t> stack;
    uint32_t current_thread = UINT32_MAX;
    for (const SortKey& k : order) {
        if (k.thread != current_thread) {
            stack.clear();
            current_thread = k.thread;
        }
        while (!stack.empty()) {
            const CpuEvent& p = trace.cpu[stack.back()];
            if (k.start >= p.end_ns || k.end > p.end_ns) {
                if (k.start < p.end_ns && k.end > p.end_ns)
                    ++t.links.partial_overlaps;
                stack.pop_back();
                continue;
            }
            r.parent[k.index] = static_cast<int32_t>(stack.back());
            ++r.child_count[stack.back()];
            r.only_child[stack.back()] = static_cast<int32_t>(k.index);
            break;
        }
        stack.push_back(k.index);
    }
    return r;
}

// Fold chains of same-name single children into their top (the top keeps its own interval
// and takes the bottom's children and GPU time). Parents come before children in `order`.
void foldSameNameChains(const Trace& trace, const std::vector<SortKey>& order, RawNesting& r, OpTree& t) {
    auto same_name = [&](uint32_t a, uint32_t b) {
        return trace.cpu[a].name == trace.cpu[b].name ||
            (trace.str(trace.cpu[a].name).starts_with("ProfilerStep#") &&
             trace.str(trace.cpu[b].name).starts_with("ProfilerStep#"));
    };
    for (const SortKey& k : order) {
        const uint32_t i = k.index;
        if (!t.counted[i])
            continue;
        while (r.child_count[i] == 1 && same_name(i, static_cast<uint32_t>(r.only_child[i]))) {
            const auto c = static_cast<uint32_t>(r.only_child[i]);
            t.counted[c] = 0;
            ++t.links.folded;
            r.child_count[i] = r.child_count[c];
            r.only_child[i] = r.only_child[c];
            t.self_device_ns[i] = t.self_device_ns[c];
        }
    }
}

// Effective parents (skipping folded events), self CPU time and depth.
void resolveParents(const Trace& trace, const std::vector<SortKey>& order, const std::vector<int32_t>& raw_parent, OpTree& t) {
    for (const SortKey& k : order) {
        const uint32_t i = k.index;
        if (!t.counted[i])
            continue;
        int32_t p = raw_parent[i];
        while (p != OpTree::kNone && !t.counted[static_cast<size_t>(p)])
            p = raw_parent[static_cast<size_t>(p)];
        t.parent[i] = p;
        t.self_cpu_ns[i] += trace.cpu[i].duration();
        if (p != OpTree::kNone) {
            t.self_cpu_ns[static_cast<size_t>(p)] -= trace.cpu[i].duration();
            t.depth[i] = static_cast<uint16_t>(std::min<int>(t.depth[static_cast<size_t>(p)] + 1, UINT16_MAX));
        }
    }
}

// Device totals bottom-up: children come after their parents in `order`. Folded or excluded
// events carry nothing.
void sumDeviceTotals(const std::vector<SortKey>& order, OpTree& t) {
    for (size_t j = 0; j < order.size(); ++j)
        t.device_total_ns[order[j].index] = t.self_device_ns[order[j].index];
    for (size_t j = order.size(); j-- > 0;) {
        const uint32_t i = order[j].index;
        if (t.counted[i] && t.parent[i] != OpTree::kNone)
            t.device_total_ns[static_cast<size_t>(t.parent[i])] += t.device_total_ns[i];
    }
    for (size_t i = 0; i < t.counted.size(); ++i) {
        if (!t.counted[i]) {
            t.self_cpu_ns[i] = 0;
            t.self_device_ns[i] = 0;
            t.device_total_ns[i] = 0;
        }
    }
}

} // namespace

OpTree buildOpTree(const Trace& trace) {
    const size_t n = trace.cpu.size();
    OpTree t;
    t.parent.assign(n, OpTree::kNone);
    t.counted.assign(n, 1);
    t.thread.resize(n);
    t.self_cpu_ns.assign(n, 0);
    t.self_device_ns.assign(n, 0);
    t.device_total_ns.assign(n, 0);
    t.depth.assign(n, 0);

    markBookkeeping(trace, t);
    const OwnersById owners(trace, t);
    linkApiCalls(trace, owners, t);
    addGpuTime(trace, owners, t);
    const std::vector<SortKey> order = nestingOrder(trace, t);
    RawNesting raw = nest(trace, order, t);
    foldSameNameChains(trace, order, raw, t);
    resolveParents(trace, order, raw.parent, t);
    sumDeviceTotals(order, t);
    return t;
}

} // namespace sightline
