#include "sightline/tables.h"

#include "sightline/error.h"
#include "intervals.h"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

namespace sightline {

namespace {

void addSample(GpuRow& row, int64_t d) {
    if (row.calls == 0 || d < row.min_ns) row.min_ns = d;
    if (row.calls == 0 || d > row.max_ns) row.max_ns = d;
    ++row.calls;
    row.total_ns += d;
}

} // namespace

Tables computeTables(const Trace& trace, const OpTree& tree, const Taxonomy& taxonomy, const EventFilter& filter) {
    Tables out;
    // Ops: one row per (name, kind); rows found through a dense per-name index.
    constexpr size_t kKinds = 5;
    std::vector<int32_t> row_of(trace.strings.size() * kKinds, -1);
    int32_t profiler_step_row[kKinds] = {-1, -1, -1, -1, -1};
    for (size_t i = 0; i < trace.cpu.size(); ++i) {
        if (!tree.counted[i] || (!filter.cpu.empty() && !filter.cpu[i]))
            continue;
        const CpuEvent& e = trace.cpu[i];
        const auto k = static_cast<size_t>(e.kind);
        int32_t* slot = &row_of[size_t(e.name.value) * kKinds + k];
        if (*slot < 0 && trace.str(e.name).starts_with("ProfilerStep#"))
            slot = &profiler_step_row[k];
        if (*slot < 0) {
            *slot = static_cast<int32_t>(out.ops.size());
            OpRow r;
            r.name = slot == &profiler_step_row[k] ? "ProfilerStep*" : std::string(trace.str(e.name));
            r.kind = e.kind;
            out.ops.push_back(std::move(r));
        }
        OpRow& r = out.ops[static_cast<size_t>(*slot)];
        ++r.calls;
        r.self_cpu_ns += tree.self_cpu_ns[i];
        r.cpu_total_ns += e.duration();
        r.self_device_ns += tree.self_device_ns[i];
        r.device_total_ns += tree.device_total_ns[i];
        out.self_cpu_total_ns += tree.self_cpu_ns[i];
    }

    // GPU activities: one row per name, classified once per name.
    std::vector<int32_t> kernel_row(trace.strings.size(), -1);
    for (size_t gi = 0; gi < trace.gpu.size(); ++gi) {
        const GpuEvent& g = trace.gpu[gi];
        if (g.kind == GpuKind::Annotation || (!filter.gpu.empty() && !filter.gpu[gi]))
            continue;
        int32_t& slot = kernel_row[g.name.value];
        if (slot < 0) {
            slot = static_cast<int32_t>(out.kernels.size());
            GpuRow r;
            r.name = std::string(trace.str(g.name));
            KernelClass c = taxonomy.classify(r.name);
            r.family = std::move(c.family);
            r.klass = std::move(c.name);
            r.kind = g.kind;
            out.kernels.push_back(std::move(r));
        }
        addSample(out.kernels[static_cast<size_t>(slot)], g.duration());
        out.gpu_total_ns += g.duration();
        ++out.gpu_activities;
    }
    // Classes: sums of their kernels' rows (min/max over the kernels' min/max).
    std::unordered_map<std::string, size_t> class_row;
    for (const GpuRow& k : out.kernels) {
        auto [it, inserted] = class_row.try_emplace(k.klass, out.kernel_classes.size());
        if (inserted) {
            GpuRow c;
            c.name = k.klass;
            c.family = k.family;
            c.klass = k.klass;
            c.kind = k.kind;
            c.min_ns = k.min_ns;
            c.max_ns = k.max_ns;
            out.kernel_classes.push_back(std::move(c));
        }
        GpuRow& c = out.kernel_classes[it->second];
        c.min_ns = std::min(c.min_ns, k.min_ns);
        c.max_ns = std::max(c.max_ns, k.max_ns);
        c.calls += k.calls;
        c.total_ns += k.total_ns;
    }
    const double total = out.gpu_total_ns > 0 ? double(out.gpu_total_ns) : 1.0;
    for (GpuRow& r : out.kernels) r.share = double(r.total_ns) / total;
    for (GpuRow& r : out.kernel_classes) r.share = double(r.total_ns) / total;
    sortOps(out.ops, OpSort::SelfCpu);
    sortGpu(out.kernels, GpuSort::Total);
    sortGpu(out.kernel_classes, GpuSort::Total);
    return out;
}

namespace {

constexpr OpSortKey kOpSortKeys[] = {
    {OpSort::SelfCpu, "self_cpu", "self CPU", [](const OpRow& r) { return r.self_cpu_ns; }},
    {OpSort::CpuTotal, "cpu_total", "CPU total", [](const OpRow& r) { return r.cpu_total_ns; }},
    {OpSort::SelfDevice, "self_device", "self GPU", [](const OpRow& r) { return r.self_device_ns; }},
    {OpSort::DeviceTotal, "device_total", "GPU total", [](const OpRow& r) { return r.device_total_ns; }},
    {OpSort::Calls, "calls", "calls", [](const OpRow& r) { return static_cast<int64_t>(r.calls); }},
    {OpSort::Name, "name", "name", nullptr},
};

constexpr GpuSortKey kGpuSortKeys[] = {
    {GpuSort::Total, "total", "total", [](const GpuRow& r) { return double(r.total_ns); }},
    {GpuSort::Calls, "calls", "calls", [](const GpuRow& r) { return double(r.calls); }},
    {GpuSort::Avg, "avg", "average", [](const GpuRow& r) { return r.calls ? double(r.total_ns) / double(r.calls) : 0.0; }},
    {GpuSort::Max, "max", "max", [](const GpuRow& r) { return double(r.max_ns); }},
    {GpuSort::Name, "name", "name", nullptr},
};

template <class Entry, size_t N, class Key>
const Entry& entryOf(const Entry (&table)[N], Key key) {
    for (const Entry& e : table)
        if (e.key == key) return e;
    return table[N - 1];
}

} // namespace

std::span<const OpSortKey> opSortKeys() { return kOpSortKeys; }
std::span<const GpuSortKey> gpuSortKeys() { return kGpuSortKeys; }
const OpSortKey& sortKey(OpSort key) { return entryOf(kOpSortKeys, key); }
const GpuSortKey& sortKey(GpuSort key) { return entryOf(kGpuSortKeys, key); }

void sortOps(std::vector<OpRow>& rows, OpSort key) {
    auto value = sortKey(key).value;
    std::stable_sort(rows.begin(), rows.end(), [&](const OpRow& a, const OpRow& b) {
        if (value && value(a) != value(b)) return value(a) > value(b);
        if (a.name != b.name) return a.name < b.name;
        return a.kind < b.kind;
    });
}

void sortGpu(std::vector<GpuRow>& rows, GpuSort key) {
    auto value = sortKey(key).value;
    std::stable_sort(rows.begin(), rows.end(), [&](const GpuRow& a, const GpuRow& b) {
        if (value && value(a) != value(b)) return value(a) > value(b);
        return a.name < b.name;
    });
}

void keepRange(Trace& trace, int64_t begin_ns, int64_t end_ns) {
    auto outside = [&](int64_t ts) { return ts < begin_ns || ts >= end_ns; };
    std::erase_if(trace.cpu, [&](const CpuEvent& e) { return outside(e.start_ns); });
    std::erase_if(trace.gpu, [&](const GpuEvent& g) { return outside(g.start_ns); });
    std::erase_if(trace.overhead, [&](const OverheadSpan& o) { return outside(o.start_ns); });
    std::erase_if(trace.flows, [&](const FlowPoint& f) { return outside(f.ts_ns); });
}

EventFilter rangeFilter(const Trace& trace, int64_t begin_ns, int64_t end_ns) {
    EventFilter f;
    f.cpu.resize(trace.cpu.size());
    f.gpu.resize(trace.gpu.size());
    for (size_t i = 0; i < trace.cpu.size(); ++i)
        f.cpu[i] = trace.cpu[i].start_ns >= begin_ns && trace.cpu[i].start_ns < end_ns;
    for (size_t i = 0; i < trace.gpu.size(); ++i)
        f.gpu[i] = trace.gpu[i].start_ns >= begin_ns && trace.gpu[i].start_ns < end_ns;
    return f;
}

RangeSummary summarizeRange(const Trace& trace, int64_t begin_ns, int64_t end_ns) {
    RangeSummary r;
    r.duration_ns = std::max<int64_t>(0, end_ns - begin_ns);
    std::vector<Interval> iv;
    for (const GpuEvent& g : trace.gpu) {
        if (g.kind == GpuKind::Annotation || g.end_ns <= begin_ns || g.start_ns >= end_ns) continue;
        iv.emplace_back(std::max(g.start_ns, begin_ns), std::min(g.end_ns, end_ns));
        if (g.start_ns >= begin_ns) ++(g.kind == GpuKind::Kernel ? r.kernels : r.memops);
    }
    r.gpu_busy_ns = unionLength(std::move(iv));
    for (const CpuEvent& c : trace.cpu)
        r.cpu_ops += c.kind == CpuKind::Op && c.start_ns >= begin_ns && c.start_ns < end_ns;
    return r;
}

std::vector<uint64_t> kernelDurationHistogram(const Trace& trace) {
    std::vector<uint64_t> h(24, 0);
    for (const GpuEvent& g : trace.gpu) {
        if (g.kind != GpuKind::Kernel) continue;
        const double us = double(g.duration()) / 1000.0;
        size_t k = 0;
        while (k + 1 < h.size() && us >= double(uint64_t(1) << (k + 1))) ++k;
        ++h[k];
    }
    return h;
}

void requireReportable(const Trace& trace) {
    const bool any_op = std::any_of(trace.cpu.begin(), trace.cpu.end(), [](const CpuEvent& e) {
        return e.kind == CpuKind::Op || e.kind == CpuKind::UserAnnotation;
    });
    if (trace.cpu.empty() && trace.gpu.empty())
        throw InputError(fmt::format("{}: the trace holds no events (was the profiler stopped before "
                                     "any work ran?)",
                                     trace.source));
    // GPU activity without CPU ops is analysed on the GPU side (the report says what is missing).
    if (!any_op && trace.gpu.empty())
        throw InputError(fmt::format("{}: the trace has no CPU ops and no GPU activity (only {} API calls); record with "
                                     "activities=[CPU, CUDA]",
                                     trace.source, trace.cpu.size()));
}

} // namespace sightline
