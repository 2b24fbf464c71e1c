#include "trace_document.h"

#include <cmath>
#include <set>

#include "sightline/error.h"
#include "sightline/trace_db.h"

#include <algorithm>
#include <climits>
#include <future>
#include <map>
#include <optional>

namespace sightline::gui {

namespace {
// CPU tracks: one per (thread, depth), depth capped so deep stacks stay readable.
constexpr uint16_t kMaxDepth = 16;
constexpr size_t kDepths = kMaxDepth + 1;
} // namespace

std::unique_ptr<TraceDocument> TraceDocument::load(const std::string& path, const std::atomic<bool>& cancelled,
                                                   const std::function<void(double)>& progress) {
    auto doc = std::make_unique<TraceDocument>();
    // A trace database holds its op tree: its parts are read beside the events, not rebuilt after.
    std::future<std::optional<StoredOpTree>> stored_tree;
    if (detectFormat(path) == InputFormat::TraceDb)
        stored_tree = std::async(std::launch::async, [&path] { return readStoredOpTreeParts(path); });
    struct Settle { // nothing left running on an early return
        std::future<std::optional<StoredOpTree>>& f;
        ~Settle() {
            if (f.valid()) f.wait();
        }
    } settle{stored_tree};
    doc->m_trace = importTrace(path, [&](double f) {
        if (cancelled) throw Cancelled();
        if (progress) progress(0.8 * f);
    });
    if (cancelled) throw Cancelled();
    if (progress) progress(0.8);
    requireReportable(doc->m_trace);
    std::optional<StoredOpTree> parts = stored_tree.valid() ? stored_tree.get() : std::nullopt;
    std::optional<OpTree> tree = parts ? completeStoredOpTree(std::move(*parts), doc->m_trace) : std::nullopt;
    doc->m_tree = tree ? std::move(*tree) : buildOpTree(doc->m_trace); // none stored, or it does not fit
    if (progress) progress(0.85);
    // The report and the timeline's tracks only read the trace and the tree: built side by side.
    auto tracks = std::async(std::launch::async, [&doc] { doc->buildTracks(); });
    ReportOptions options;
    options.op_rows = options.class_rows = options.kernel_rows = 0;
    try {
        doc->m_report = buildReport(doc->m_trace, doc->m_tree, Taxonomy::builtin(), RuleSet::builtin(), options);
    } catch (...) {
        tracks.wait();
        throw;
    }
    if (progress) progress(0.95);
    tracks.get();
    if (cancelled) throw Cancelled();
    if (progress) progress(1.0);
    return doc;
}

void TraceDocument::buildTracks() {
    const Trace& t = m_trace;
    m_begin = INT64_MAX;
    m_end = INT64_MIN;
    for (const CpuEvent& e : t.cpu) {
        m_begin = std::min(m_begin, e.start_ns);
        m_end = std::max(m_end, e.end_ns);
    }
    for (const GpuEvent& g : t.gpu) {
        m_begin = std::min(m_begin, g.start_ns);
        m_end = std::max(m_end, g.end_ns);
    }
    if (m_begin >= m_end) m_end = m_begin + 1;

    // CPU: one track per (thread, capped depth), found through a dense (thread, depth) index and
    // kept in that order.
    std::vector<std::vector<uint32_t>> by_slot(t.threads.size() * kDepths);
    m_slot_track.assign(by_slot.size(), -1);
    for (uint32_t i = 0; i < t.cpu.size(); ++i)
        if (m_tree.counted[i])
            by_slot[size_t(m_tree.thread[i]) * kDepths + std::min(m_tree.depth[i], kMaxDepth)].push_back(i);
    for (size_t slot = 0; slot < by_slot.size(); ++slot) {
        if (by_slot[slot].empty()) continue;
        Track tr;
        const uint32_t thread = uint32_t(slot / kDepths);
        const Thread& th = t.threads[thread];
        const std::string name = th.name.empty() ? "thread " + std::to_string(th.tid) : std::string(t.str(th.name));
        tr.label = slot % kDepths == 0 ? name + " (" + std::to_string(th.tid) + ")" : "";
        tr.group = thread;
        tr.events = std::move(by_slot[slot]);
        m_slot_track[slot] = int(m_tracks.size());
        m_tracks.push_back(std::move(tr));
    }

    // GPU: one track per stream.
    const Taxonomy& taxonomy = Taxonomy::builtin();
    m_gpu_family.resize(t.gpu.size());
    std::vector<std::string> family_of(t.strings.size());
    for (uint32_t i = 0; i < t.gpu.size(); ++i) {
        const GpuEvent& g = t.gpu[i];
        if (g.kind == GpuKind::Annotation) continue;
        std::string& fam = family_of[g.name.value];
        if (fam.empty()) fam = taxonomy.classify(t.str(g.name)).family;
        m_gpu_family[i] = fam;
        auto [it, inserted] = m_stream_track.try_emplace({g.device, g.stream}, 0);
        if (inserted) {
            Track tr;
            tr.gpu = true;
            tr.group = uint32_t(g.stream);
            tr.device = g.device;
            // A merged multi-rank trace names each GPU by its rank (sightline ranks --merged).
            auto named = t.metadata.find("device_label." + std::to_string(g.device));
            tr.label = (named != t.metadata.end() ? named->second : "GPU " + std::to_string(g.device)) + " stream " +
                std::to_string(g.stream);
            m_tracks.push_back(std::move(tr));
            it->second = int(m_tracks.size()) - 1;
        }
        m_tracks[it->second].events.push_back(i);
        if (g.external_id) m_gpu_by_external.emplace_back(g.external_id, i);
    }
    std::sort(m_gpu_by_external.begin(), m_gpu_by_external.end());
    addCounterTracks();

    const double span = double(m_end - m_begin);
    for (Track& tr : m_tracks) {
        auto startOf = [&](uint32_t e) { return tr.gpu ? t.gpu[e].start_ns : t.cpu[e].start_ns; };
        auto endOf = [&](uint32_t e) { return tr.gpu ? t.gpu[e].end_ns : t.cpu[e].end_ns; };
        std::sort(tr.events.begin(), tr.events.end(), [&](uint32_t a, uint32_t b) { return startOf(a) < startOf(b); });
        tr.max_end.resize(tr.events.size());
        int64_t mx = INT64_MIN;
        tr.coverage.assign(kBuckets, 0.0f);
        const double bucket_ns = span / double(kBuckets);
        for (size_t k = 0; k < tr.events.size(); ++k) {
            const int64_t s = startOf(tr.events[k]), e = endOf(tr.events[k]);
            tr.max_end[k] = mx = std::max(mx, e);
            // Spread the event's duration over the buckets it covers.
            double a = double(s - m_begin) / bucket_ns, b = double(e - m_begin) / bucket_ns;
            for (size_t bi = size_t(std::max(0.0, a)); bi < kBuckets && double(bi) < b; ++bi) {
                const double lo = std::max(a, double(bi)), hi = std::min(b, double(bi + 1));
                tr.coverage[bi] += float(std::max(0.0, hi - lo));
            }
        }
        for (float& c : tr.coverage) c = std::min(c, 1.0f);
    }
}

// Under the GPU streams, each sampled GPU's counters: SMs active, tensor pipes, DRAM bandwidth
// against the ceiling (or DRAM % of peak where the ceiling is unknown).
void TraceDocument::addCounterTracks() {
    m_hw = std::make_unique<HwSeries>(m_trace);
    std::set<int32_t> devices;
    for (const CounterSample& c : m_trace.counters)
        if (c.kind == CounterKind::Hardware && c.label.empty() && c.device >= 0) devices.insert(c.device);
    const bool ceiling = !std::isnan(dramCeiling(m_report.metrics.device_name));
    for (int32_t d : devices) {
        if (!m_hw->over(d, INT64_MIN / 2, INT64_MAX / 2).known()) continue;
        const std::string gpu = "GPU " + std::to_string(d) + " ";
        for (auto [metric, name] : {std::pair{HwMetric::SmActive, "SMs active %"}, {HwMetric::TensorActive, "tensor pipes %"}, {ceiling ? HwMetric::DramBytesPerS : HwMetric::DramPct, ceiling ? "DRAM % of ceiling" : "DRAM % of peak"}}) {
            Track tr;
            tr.counter = true;
            tr.gpu = true;
            tr.device = d;
            tr.metric = metric;
            tr.label = gpu + name;
            m_tracks.push_back(std::move(tr));
        }
    }
}

double TraceDocument::counterValue(const Track& track, int64_t a, int64_t b) const {
    const HwFigures f = m_hw->over(track.device, a, b);
    const double v = f[track.metric];
    return track.metric == HwMetric::DramBytesPerS ? 100.0 * v / dramCeiling(m_report.metrics.device_name) : v;
}

int TraceDocument::trackOfCpu(uint32_t i) const {
    if (!m_tree.counted[i]) return -1;
    return m_slot_track[size_t(m_tree.thread[i]) * kDepths + std::min(m_tree.depth[i], kMaxDepth)];
}

int TraceDocument::trackOfStream(int32_t device, int32_t stream) const {
    auto it = m_stream_track.find({device, stream});
    return it == m_stream_track.end() ? -1 : it->second;
}

std::vector<uint32_t> TraceDocument::kernelsOf(uint32_t cpu_index) const {
    std::vector<uint32_t> out;
    const int64_t id = m_trace.cpu[cpu_index].external_id;
    if (id == 0) return out;
    auto lo = std::lower_bound(m_gpu_by_external.begin(), m_gpu_by_external.end(), std::make_pair(id, uint32_t(0)));
    for (auto it = lo; it != m_gpu_by_external.end() && it->first == id; ++it) out.push_back(it->second);
    return out;
}

} // namespace sightline::gui
