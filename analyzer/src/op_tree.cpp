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

    // Names to leave out, decided once per distinct name.
    std::vector<int8_t> bookkeeping(trace.strings.size(), -1);
    for (size_t i = 0; i < n; ++i) {
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

    // Frontend events by external id (several may share one id; each gets the GPU time).
    std::vector<std::pair<int64_t, uint32_t>> by_id;
    by_id.reserve(n / 2);
    for (size_t i = 0; i < n; ++i)
        if (t.counted[i] && isFrontend(trace.cpu[i].kind) && trace.cpu[i].external_id != 0)
            by_id.emplace_back(trace.cpu[i].external_id, static_cast<uint32_t>(i));
    sortOnTwoCores(by_id, std::less<std::pair<int64_t, uint32_t>>());
    auto owners = [&](int64_t id) {
        auto lo = std::lower_bound(by_id.begin(), by_id.end(), std::make_pair(id, uint32_t(0)));
        auto hi = lo;
        while (hi != by_id.end() && hi->first == id) ++hi;
        return std::make_pair(lo, hi);
    };

    // API calls nest on the thread of the op they belong to.
    for (size_t i = 0; i < n; ++i) {
        const CpuEvent& e = trace.cpu[i];
        if (isFrontend(e.kind) || e.kind == CpuKind::PythonFunction || e.external_id == 0)
            continue;
        auto [lo, hi] = owners(e.external_id);
        if (lo != hi) {
            t.thread[i] = trace.cpu[lo->second].thread;
            ++t.links.api_linked;
        }
    }

    // GPU activities (not GPU-side annotations) add their time to the op that launched them.
    for (const GpuEvent& g : trace.gpu) {
        if (g.kind == GpuKind::Annotation)
            continue;
        if (g.external_id == 0) {
            ++t.links.gpu_without_id;
            continue;
        }
        auto [lo, hi] = owners(g.external_id);
        if (lo == hi) {
            ++t.links.gpu_unmatched;
            continue;
        }
        ++t.links.gpu_linked;
        for (auto it = lo; it != hi; ++it)
            t.self_device_ns[it->second] += g.duration();
    }

    // Nesting: per thread, by start ascending then end descending; an event is the child of the
    // innermost open event that contains it entirely.
    std::vector<SortKey> order;
    order.reserve(n);
    for (size_t i = 0; i < n; ++i)
        if (t.counted[i])
            order.push_back(SortKey{t.thread[i], static_cast<uint32_t>(i), trace.cpu[i].start_ns, trace.cpu[i].end_ns});
    sortOnTwoCores(order, [](const SortKey& a, const SortKey& b) {
        if (a.thread != b.thread) return a.thread < b.thread;
        if (a.start != b.start) return a.start < b.start;
        if (a.end != b.end) return a.end > b.end;
        return a.index < b.index;
    });
    std::vector<int32_t> raw_parent(n, OpTree::kNone);
    std::vector<uint32_t> child_count(n, 0);
    std::vector<int32_t> only_child(n, OpTree::kNone);
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
            raw_parent[k.index] = static_cast<int32_t>(stack.back());
            ++child_count[stack.back()];
            only_child[stack.back()] = static_cast<int32_t>(k.index);
            break;
        }
        stack.push_back(k.index);
    }

    // Fold chains of same-name single children into their top (the top keeps its own interval
    // and takes the bottom's children and GPU time). Parents come before children in `order`.
    auto same_name = [&](uint32_t a, uint32_t b) {
        return trace.cpu[a].name == trace.cpu[b].name ||
               (trace.str(trace.cpu[a].name).starts_with("ProfilerStep#") &&
                trace.str(trace.cpu[b].name).starts_with("ProfilerStep#"));
    };
    for (const SortKey& k : order) {
        const uint32_t i = k.index;
        if (!t.counted[i])
            continue;
        while (child_count[i] == 1 && same_name(i, static_cast<uint32_t>(only_child[i]))) {
            const auto c = static_cast<uint32_t>(only_child[i]);
            t.counted[c] = 0;
            ++t.links.folded;
            child_count[i] = child_count[c];
            only_child[i] = only_child[c];
            t.self_device_ns[i] = t.self_device_ns[c];
        }
    }

    // Effective parents (skipping folded events), self CPU time and depth.
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
    // Device totals bottom-up: children come after their parents in `order`.
    for (size_t j = 0; j < order.size(); ++j)
        t.device_total_ns[order[j].index] = t.self_device_ns[order[j].index];
    for (size_t j = order.size(); j-- > 0;) {
        const uint32_t i = order[j].index;
        if (t.counted[i] && t.parent[i] != OpTree::kNone)
            t.device_total_ns[static_cast<size_t>(t.parent[i])] += t.device_total_ns[i];
    }
    // Folded or excluded events carry nothing.
    for (size_t i = 0; i < n; ++i) {
        if (!t.counted[i]) {
            t.self_cpu_ns[i] = 0;
            t.self_device_ns[i] = 0;
            t.device_total_ns[i] = 0;
        }
    }
    return t;
}

} // namespace sightline
