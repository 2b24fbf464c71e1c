#include "sightline/comms.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

namespace sightline {

const char* toString(CommTiming timing) {
    switch (timing) {
    case CommTiming::GpuKernels: return "gpu_kernels";
    case CommTiming::BackendRange: return "backend_range";
    case CommTiming::CpuOp: return "cpu_op";
    }
    return "?";
}

int32_t dtypeElementSize(std::string_view dtype) {
    struct Size {
        std::string_view name;
        int32_t bytes;
    };
    static constexpr Size kSizes[] = {
        {"Float", 4},
        {"BFloat16", 2},
        {"Half", 2},
        {"Double", 8},
        {"Long", 8},
        {"Int", 4},
        {"Short", 2},
        {"Char", 1},
        {"Byte", 1},
        {"Bool", 1},
        {"ComplexHalf", 4},
        {"ComplexFloat", 8},
        {"ComplexDouble", 16},
        {"UInt16", 2},
        {"UInt32", 4},
        {"UInt64", 8},
        {"QInt8", 1},
        {"QUInt8", 1},
        {"QInt32", 4},
        {"Float8_e5m2", 1},
        {"Float8_e4m3fn", 1},
        {"Float8_e5m2fnuz", 1},
        {"Float8_e4m3fnuz", 1},
        {"Float8_e8m0fnu", 1},
    };
    for (const Size& s : kSizes)
        if (s.name == dtype) return s.bytes;
    return 0;
}

int64_t messageBytes(const Collective& c) {
    return std::max(c.in_elements, c.out_elements) * int64_t(c.element_size);
}

double algorithmBandwidth(int64_t bytes, int64_t ns) {
    if (bytes <= 0 || ns <= 0) return NAN;
    return double(bytes) / double(ns); // bytes per ns = GB/s
}

namespace {

// How bytes on the bus relate to the message, by a part of c10d's name (underscores removed, so
// "_allgather_base", "all_gather_into_tensor" and "allgather" read alike). First match wins.
enum class BusRule { AllReduce,
                     ShareOfRanks,
                     Once,
                     None };
struct BusPattern {
    std::string_view part;
    BusRule rule;
};
constexpr BusPattern kBusPatterns[] = {
    {"allreduce", BusRule::AllReduce},
    {"reducescatter", BusRule::ShareOfRanks},
    {"allgather", BusRule::ShareOfRanks},
    {"alltoall", BusRule::ShareOfRanks},
    {"barrier", BusRule::None},
    {"broadcast", BusRule::Once},
    {"reduce", BusRule::Once},
    {"send", BusRule::Once},
    {"recv", BusRule::Once},
    {"gather", BusRule::ShareOfRanks},
    {"scatter", BusRule::ShareOfRanks},
};

std::string squeezed(std::string_view name) {
    std::string out;
    for (char c : name)
        if (c != '_') out += char(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

const BusPattern* busPattern(std::string_view collective) {
    const std::string name = squeezed(collective);
    for (const BusPattern& p : kBusPatterns)
        if (name.find(p.part) != std::string::npos) return &p;
    return nullptr;
}

} // namespace

double CommRow::algbw_gbps() const {
    const BusPattern* p = busPattern(collective);
    return p && p->rule == BusRule::None ? NAN : algorithmBandwidth(bytes * int64_t(calls), total_ns);
}

double CommRow::busbw_gbps() const { return algbw_gbps() * busBandwidthFactor(collective, group_size); }

double busBandwidthFactor(std::string_view collective, int32_t group_size) {
    const double n = double(group_size);
    if (const BusPattern* p = busPattern(collective)) {
        switch (p->rule) {
        case BusRule::AllReduce: return group_size > 0 ? 2.0 * (n - 1.0) / n : NAN;
        case BusRule::ShareOfRanks: return group_size > 0 ? (n - 1.0) / n : NAN;
        case BusRule::Once: return 1.0;
        case BusRule::None: return NAN;
        }
    }
    return NAN;
}

namespace {

// Where the collectives sit among the CPU events: each one's op, and which count (those with
// their op, not enclosing another collective's op).
class CollectivePlaces {
public:
    CollectivePlaces(const Trace& trace, const OpTree& tree) : m_trace(trace), m_tree(tree) {
        // External id -> index in trace.cpu of its op, else of its user annotation (a kernel may be
        // linked to either; a collective's metadata to an op).
        for (CpuKind kind : {CpuKind::Op, CpuKind::UserAnnotation})
            for (size_t i = 0; i < trace.cpu.size(); ++i)
                if (const CpuEvent& e = trace.cpu[i]; e.kind == kind && e.external_id != 0) m_range_of.emplace(e.external_id, i);
        m_collective_at.assign(trace.cpu.size(), -1);
        for (size_t k = 0; k < trace.collectives.size(); ++k)
            if (const auto op = opOf(trace.collectives[k].op_id)) m_collective_at[*op] = int32_t(k);
        m_enclosing.assign(trace.collectives.size(), 0);
        for (size_t i = 0; i < trace.cpu.size(); ++i) {
            if (m_collective_at[i] < 0) continue;
            for (int32_t p = parentOf(int32_t(i)); p != OpTree::kNone; p = parentOf(p))
                if (m_collective_at[size_t(p)] >= 0) m_enclosing[size_t(m_collective_at[size_t(p)])] = 1;
        }
    }

    std::optional<size_t> opOf(int64_t id) const {
        const auto it = m_range_of.find(id);
        return it != m_range_of.end() && m_trace.cpu[it->second].kind == CpuKind::Op ? std::optional<size_t>(it->second) : std::nullopt;
    }
    // The op or user annotation of an external id.
    std::optional<size_t> rangeOf(int64_t id) const {
        const auto it = m_range_of.find(id);
        return it == m_range_of.end() ? std::nullopt : std::optional<size_t>(it->second);
    }
    // An event's parent in the tree, kNone past a root or for an index the tree does not hold.
    int32_t parentOf(int32_t i) const {
        const int32_t p = size_t(i) < m_tree.parent.size() ? m_tree.parent[size_t(i)] : OpTree::kNone;
        return p >= 0 && size_t(p) < m_trace.cpu.size() ? p : OpTree::kNone;
    }
    // The collective whose op is CPU event i, -1 when none.
    int32_t collectiveAt(size_t i) const { return m_collective_at[i]; }
    bool encloses(size_t collective) const { return m_enclosing[collective] != 0; }

private:
    const Trace& m_trace;
    const OpTree& m_tree;
    std::unordered_map<int64_t, size_t> m_range_of;
    std::vector<int32_t> m_collective_at;
    std::vector<uint8_t> m_enclosing;
};

// Kernel time of each collective's communication kernels, by the collective op's external id. A
// kernel is linked to the innermost range open at its launch, which for NCCL is the backend's own
// ("nccl:all_reduce") inside the collective's op: it counts for the nearest collective op at or
// above its own.
std::unordered_map<int64_t, int64_t> collectiveKernelTime(const Trace& trace, const Taxonomy& taxonomy,
                                                          const CollectivePlaces& places) {
    std::unordered_map<int64_t, int64_t> kernel_ns;
    std::map<StringId, bool> communication;
    for (const GpuEvent& g : trace.gpu) {
        if (g.kind != GpuKind::Kernel || g.external_id == 0) continue;
        auto it = communication.find(g.name);
        if (it == communication.end()) it = communication.emplace(g.name, taxonomy.classify(trace.str(g.name)).isCommunication()).first;
        if (!it->second) continue;
        const auto at = places.rangeOf(g.external_id);
        if (!at) continue;
        for (int32_t p = int32_t(*at); p != OpTree::kNone; p = places.parentOf(p))
            if (places.collectiveAt(size_t(p)) >= 0) {
                kernel_ns[trace.collectives[size_t(places.collectiveAt(size_t(p)))].op_id] += g.duration();
                break;
            }
    }
    return kernel_ns;
}

// The backends' own ranges ("gloo:all_reduce", "nccl:all_gather") by process and type, in start
// order. A backend starts its work on a thread of its own, after the call that issued it, in the
// order issued: a collective's range is the next one of its type in its process that starts after
// its op.
class BackendRanges {
public:
    explicit BackendRanges(const Trace& trace) : m_trace(trace) {
        for (const CpuEvent& e : trace.cpu) {
            const std::string_view name = trace.str(e.name);
            if (name.starts_with("gloo:") || name.starts_with("nccl:")) m_ranges[{m_trace.pidOf(e), squeezed(name.substr(5))}].push_back(&e);
        }
        for (auto& [type, list] : m_ranges)
            std::stable_sort(list.begin(), list.end(), [](const CpuEvent* a, const CpuEvent* b) { return a->start_ns < b->start_ns; });
    }

    const CpuEvent* next(std::string_view collective, const CpuEvent& op) {
        // c10d's "_allgather_base" runs as gloo's "all_gather": one name begins the other.
        const std::string name = squeezed(collective);
        const int64_t process = m_trace.pidOf(op);
        for (auto it = m_ranges.lower_bound({process, ""}); it != m_ranges.end() && it->first.first == process; ++it) {
            const std::string& type = it->first.second;
            if (!name.starts_with(type) && !type.starts_with(name)) continue;
            const auto& list = it->second;
            size_t& k = m_next[it->first];
            while (k < list.size() && list[k]->start_ns < op.start_ns) ++k;
            return k < list.size() ? list[k++] : nullptr;
        }
        return nullptr;
    }

private:
    const Trace& m_trace;
    std::map<std::pair<int64_t, std::string>, std::vector<const CpuEvent*>> m_ranges;
    std::map<std::pair<int64_t, std::string>, size_t> m_next;
};

using CommKey = std::tuple<std::string_view, std::string_view, std::string_view, std::string_view, int32_t, int64_t, int64_t,
                           int32_t, CommTiming>;

// The row of a collective's kind, timing and size, made on first use.
CommRow& rowOf(std::map<CommKey, CommRow>& rows, const Trace& trace, const Collective& c, CommTiming timing) {
    const CommKey key{trace.str(c.name), trace.str(c.group_name), trace.str(c.group_desc), trace.str(c.dtype), c.element_size,
                      c.in_elements, c.out_elements, c.group_size, timing};
    auto [it, added] = rows.try_emplace(key);
    CommRow& row = it->second;
    if (added) {
        row.collective = std::string(trace.str(c.name));
        row.group = std::string(trace.str(c.group_name));
        row.group_desc = std::string(trace.str(c.group_desc));
        row.dtype = std::string(trace.str(c.dtype));
        row.element_size = c.element_size;
        row.group_size = c.group_size;
        row.in_elements = c.in_elements;
        row.out_elements = c.out_elements;
        row.bytes = messageBytes(c);
        row.timing = timing;
    }
    return row;
}

} // namespace

std::vector<CommRow> commTable(const Trace& trace, const OpTree& tree, const Taxonomy& taxonomy, const EventFilter& filter) {
    if (trace.collectives.empty()) return {};
    const CollectivePlaces places(trace, tree);
    const std::unordered_map<int64_t, int64_t> kernel_ns = collectiveKernelTime(trace, taxonomy, places);
    BackendRanges backend(trace);
    // The counted collectives in the order their ops began.
    std::vector<std::pair<size_t, size_t>> order; // (op index, collective index)
    for (size_t k = 0; k < trace.collectives.size(); ++k)
        if (const auto op = places.opOf(trace.collectives[k].op_id); op && !places.encloses(k)) order.emplace_back(*op, k);
    std::stable_sort(order.begin(), order.end(),
                     [&](const auto& a, const auto& b) { return trace.cpu[a.first].start_ns < trace.cpu[b.first].start_ns; });
    std::map<CommKey, CommRow> rows;
    for (const auto& [i, k] : order) {
        const Collective& c = trace.collectives[k];
        const CpuEvent& op = trace.cpu[i];
        CommTiming timing = CommTiming::CpuOp;
        int64_t ns = op.duration();
        if (auto kt = kernel_ns.find(c.op_id); kt != kernel_ns.end()) {
            timing = CommTiming::GpuKernels;
            ns = kt->second;
        } else if (const CpuEvent* range = backend.next(trace.str(c.name), op)) {
            timing = CommTiming::BackendRange;
            ns = range->duration();
        }
        if (!filter.cpu.empty() && !filter.cpu[i]) continue; // after its range is taken, so later ones stay in step
        CommRow& row = rowOf(rows, trace, c, timing);
        ++row.calls;
        row.total_ns += ns;
    }
    std::vector<CommRow> out;
    for (auto& [key, row] : rows) out.push_back(std::move(row));
    std::stable_sort(out.begin(), out.end(), [](const CommRow& a, const CommRow& b) { return a.total_ns > b.total_ns; });
    return out;
}

} // namespace sightline
