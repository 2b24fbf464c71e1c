#include "sightline/hardware.h"

#include "sightline/metrics.h"
#include "sightline/taxonomy.h"

#include <algorithm>
#include <climits>
#include <unordered_map>

namespace sightline {

namespace {

bool has(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

} // namespace

// Percentages only from ratios of the peak ("pct_of_peak"); a raw count (sm__cycles_active.avg)
// says nothing without the elapsed cycles. DRAM bytes as a sum over the sample or a rate.
bool hwMetricOf(std::string_view n, HwMetric& out, bool& bytes) {
    bytes = false;
    const bool pct = has(n, ".pct_of_peak_sustained");
    if (pct && n.starts_with("sm__cycles_active")) out = HwMetric::SmActive;
    else if (pct && n.starts_with("sm__warps_active")) out = HwMetric::WarpsActive;
    else if (pct && n.starts_with("sm__pipe_tensor") && has(n, "cycles_active")) out = HwMetric::TensorActive;
    else if (pct && n.starts_with("dram__throughput")) out = HwMetric::DramPct;
    else if (n.starts_with("dram__bytes_read.sum") || n.starts_with("dram__bytes_write.sum")) {
        out = HwMetric::DramBytesPerS;
        bytes = !has(n, "per_second");
    } else
        return false;
    return true;
}

void HwAverage::add(const HwFigures& f) {
    if (!f.known()) return;
    for (size_t i = 0; i < kHwMetrics; ++i) {
        if (std::isnan(f.value[i])) continue;
        m_sum[i] += f.value[i] * double(f.covered_ns);
        m_weight[i] += double(f.covered_ns);
    }
    m_covered += f.covered_ns;
}

HwFigures HwAverage::result() const {
    HwFigures r;
    r.covered_ns = m_covered;
    for (size_t i = 0; i < kHwMetrics; ++i)
        if (m_weight[i] > 0) r.value[i] = m_sum[i] / m_weight[i];
    return r;
}

// Samples over time only (a value measured over one kernel, with a label, has no time of its own).
// A reading at an instant (end = start: a counter read back from Chrome JSON) holds until the
// device's next reading. DRAM reads and writes of one sample add up to one rate.
namespace {

// On the H200 the PM sampler's first sample spans its whole start-up (0.6 to 0.9 s, seen with
// 100 us samples) and holds near-zero counts for work that ran then: a sample more than four times
// the median length is no sample at the interval and is left out (its time counts as not covered).
template <class List>
int64_t longestRegularSample(const List& list) {
    std::vector<int64_t> lengths;
    for (const auto& p : list)
        if (p.s.end > p.s.start) lengths.push_back(p.s.end - p.s.start);
    if (lengths.size() < 3) return INT64_MAX;
    std::nth_element(lengths.begin(), lengths.begin() + lengths.size() / 2, lengths.end());
    return 4 * lengths[lengths.size() / 2];
}

} // namespace

HwSeries::HwSeries(const Trace& trace) {
    struct Pending {
        Sample s;
        double bytes = NAN; // DRAM bytes read and written over the sample
    };
    std::map<std::pair<int32_t, int64_t>, Pending> by_start;
    for (const CounterSample& c : trace.counters) {
        HwMetric m;
        bool bytes;
        if (c.kind != CounterKind::Hardware || !c.label.empty() || !hwMetricOf(trace.str(c.name), m, bytes)) continue;
        Pending& p = by_start[{c.device, c.start_ns}];
        p.s.start = c.start_ns;
        p.s.end = std::max(p.s.end, c.end_ns);
        double& v = bytes ? p.bytes : p.s.v[size_t(m)];
        v = std::isnan(v) || m != HwMetric::DramBytesPerS ? c.value : v + c.value;
    }
    std::map<int32_t, std::vector<Pending>> pending;
    for (auto& [key, p] : by_start) pending[key.first].push_back(p);
    for (auto& [device, list] : pending) {
        std::vector<Sample>& out = m_devices[device];
        const int64_t longest = longestRegularSample(list);
        for (size_t i = 0; i < list.size(); ++i) {
            Sample s = list[i].s;
            if (s.end <= s.start && i + 1 < list.size()) s.end = list[i + 1].s.start;
            if (s.end <= s.start || s.end - s.start > longest) continue;
            if (!std::isnan(list[i].bytes)) s.v[size_t(HwMetric::DramBytesPerS)] = list[i].bytes / (double(s.end - s.start) / 1e9);
            out.push_back(s);
        }
        if (out.empty()) m_devices.erase(device);
    }
}

HwFigures HwSeries::over(int32_t device, int64_t start_ns, int64_t end_ns) const {
    HwAverage avg;
    auto it = m_devices.find(device);
    if (it == m_devices.end() || end_ns <= start_ns) return avg.result();
    const std::vector<Sample>& v = it->second;
    auto s = std::upper_bound(v.begin(), v.end(), start_ns, [](int64_t t, const Sample& x) { return t < x.start; });
    if (s != v.begin()) --s;
    for (; s != v.end() && s->start < end_ns; ++s) {
        const int64_t overlap = std::min(s->end, end_ns) - std::max(s->start, start_ns);
        if (overlap <= 0) continue;
        HwFigures f;
        f.value = s->v;
        f.covered_ns = overlap;
        avg.add(f);
    }
    return avg.result();
}

namespace {

// The device most kernels ran on: the one whose samples the steps are measured by.
int32_t mainDevice(const Trace& trace) {
    std::map<int32_t, size_t> kernels;
    for (const GpuEvent& g : trace.gpu)
        if (g.kind == GpuKind::Kernel) ++kernels[g.device];
    int32_t best = 0;
    size_t most = 0;
    for (const auto& [d, n] : kernels)
        if (n > most) best = d, most = n;
    return best;
}

// The name of the op each external id belongs to (ops and user ranges own their ids).
std::unordered_map<int64_t, StringId> opNames(const Trace& trace) {
    std::unordered_map<int64_t, StringId> out;
    for (const CpuEvent& e : trace.cpu)
        if (e.kind == CpuKind::Op && e.external_id != 0) out.emplace(e.external_id, e.name);
    return out;
}

HwBreakdown breakdown(const Trace& trace, const Taxonomy& taxonomy, const HwSeries& series, const EventFilter& steady) {
    std::map<std::string, HwAverage> classes, families, ops;
    std::unordered_map<uint32_t, KernelClass> class_of;
    const auto op_of = opNames(trace);
    for (size_t i = 0; i < trace.gpu.size(); ++i) {
        const GpuEvent& g = trace.gpu[i];
        if (g.kind == GpuKind::Annotation || (i < steady.gpu.size() && !steady.gpu[i])) continue;
        const HwFigures f = series.over(g.device, g.start_ns, g.end_ns);
        if (!f.known()) continue;
        auto it = class_of.find(g.name.value);
        if (it == class_of.end()) it = class_of.emplace(g.name.value, taxonomy.classify(trace.str(g.name))).first;
        classes[it->second.name].add(f);
        families[it->second.family].add(f);
        if (auto op = op_of.find(g.external_id); g.external_id && op != op_of.end()) ops[std::string(trace.str(op->second))].add(f);
    }
    HwBreakdown out;
    for (auto& [k, a] : classes) out.classes[k] = a.result();
    for (auto& [k, a] : families) out.families[k] = a.result();
    for (auto& [k, a] : ops) out.ops[k] = a.result();
    return out;
}

} // namespace

void computeHardwareMetrics(const Trace& trace, const Taxonomy& taxonomy, Metrics& out) {
    const HwSeries series(trace);
    if (series.empty()) return;
    const int32_t device = mainDevice(trace);
    HwAverage steady;
    for (size_t i = 0; i < out.steps.size(); ++i) {
        StepMetrics& m = out.steps[i];
        m.hw = series.over(device, m.step.start_ns, m.step.start_ns + m.time_ns);
    }
    for (size_t i : out.steady) steady.add(out.steps[i].hw);
    // Without steps, the breakdown covers the whole trace.
    out.hw = breakdown(trace, taxonomy, series, out.steady.empty() ? EventFilter{} : out.filterFor(out.steady));
    out.hw.sampled = true;
    out.hw.steady = steady.result();
}

double dramCeiling(std::string_view device_name) {
    // Measured ceilings by device name (read + write traffic of a large device-to-device copy).
    if (has(device_name, "H200")) return 4.3e12;
    return NAN;
}

} // namespace sightline
