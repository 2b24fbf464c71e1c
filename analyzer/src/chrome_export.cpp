#include "sightline/chrome_export.h"

#include "json_writer.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <set>
#include <unordered_map>

namespace sightline {

namespace {

using detail::JsonWriter;

// Times are written as microseconds with three decimals, which readers parse as doubles: exact to
// the nanosecond while |t| < 2^52 ns (about 52 days). Times further from zero (a capture's
// CLOCK_REALTIME nanoseconds) are written relative to a whole second before the first event.
constexpr int64_t kExactLimitNs = int64_t(1) << 52;
// The track of a GPU's profiler ranges (values measured per kernel), past any stream id.
constexpr int64_t kRangeTid = 1'000'000'000;
// The row of the profiler's overhead spans in the first CPU process.
constexpr int64_t kOverheadTid = 1'000'000'001;

const char* categoryOf(CpuKind k) {
    switch (k) {
    case CpuKind::Op: return "cpu_op";
    case CpuKind::UserAnnotation: return "user_annotation";
    case CpuKind::Runtime: return "cuda_runtime";
    case CpuKind::Driver: return "cuda_driver";
    case CpuKind::PythonFunction: return "python_function";
    }
    return "cpu_op";
}

const char* categoryOf(GpuKind k) {
    switch (k) {
    case GpuKind::Kernel: return "kernel";
    case GpuKind::Memcpy: return "gpu_memcpy";
    case GpuKind::Memset: return "gpu_memset";
    case GpuKind::Annotation: return "gpu_user_annotation";
    }
    return "kernel";
}

bool isFrontend(CpuKind k) { return k == CpuKind::Op || k == CpuKind::UserAnnotation; }

// Text that is a JSON integer as it stands and fits an int64 ("12", "-3"; not "007", "+1", "1.0").
bool isInteger(std::string_view s) {
    const std::string_view digits = s.substr(!s.empty() && s[0] == '-');
    if (digits.empty() || (digits[0] == '0' && digits.size() > 1)) return false;
    int64_t v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && end == s.data() + s.size();
}

// Sorted (key, index) pairs for looking events up by correlation or external id.
using Index = std::vector<std::pair<int64_t, uint32_t>>;
const uint32_t* lookup(const Index& index, int64_t key) {
    auto it = std::lower_bound(index.begin(), index.end(), std::make_pair(key, uint32_t(0)));
    return it != index.end() && it->first == key ? &it->second : nullptr;
}

class ChromeExport {
public:
    ChromeExport(const Trace& t, JsonWriter& out, const ProgressFn& progress) : m_t(t), m_out(out), m_progress(progress) {}
    ExportStats run(const std::vector<ExportMarker>& markers);

private:
    void chooseShift();
    void chooseGpuPids();
    void header();
    void trackNames();
    void cpuEvents();
    void cpuArgs(const CpuEvent& e);
    void collectiveArgs(const Collective& c);
    void gpuEvents();
    void overheadEvents();
    void launchFlows();
    void fwdBwdFlows();
    void flow(int64_t id, bool start, int64_t pid, int64_t tid, int64_t ts);
    void counters();
    size_t profilerRange(size_t first);
    void marker(const ExportMarker& m);
    // Opens the next event ("{" after the separator); the caller closes it with "}".
    JsonWriter& begin(char ph, std::string_view cat);
    void process(int64_t pid, std::string_view name, int64_t sort_index);
    void threadName(int64_t pid, int64_t tid, std::string_view name, int64_t sort_index);
    int64_t gpuPid(int32_t device) const { return m_gpu_pid_base + device; }
    // The process of the trace's first thread: where process-wide markers and host counters go.
    int64_t hostPid() const { return m_t.threads.empty() ? 0 : m_t.threads.front().pid; }
    void tick();
    // Event arguments: arg() opens "args" before the first one, endArgs() closes it if opened.
    JsonWriter& arg(std::string_view quoted_key) {
        m_out.raw(m_arg_sep).raw(quoted_key).raw(':');
        m_arg_sep = ",";
        return m_out;
    }
    void endArgs() {
        if (m_arg_sep.size() == 1) m_out.raw('}');
        m_arg_sep = kArgsOpen;
    }
    static constexpr std::string_view kArgsOpen = ",\"args\":{";

    const Trace& m_t;
    JsonWriter& m_out;
    const ProgressFn& m_progress;
    ExportStats m_stats;
    int64_t m_shift = 0, m_gpu_pid_base = 0, m_next_flow = 1;
    uint64_t m_done = 0, m_total = 1;
    bool m_first = true;
    std::string_view m_arg_sep = kArgsOpen;
    std::unordered_map<int64_t, size_t> m_collective_of; // op external id -> collective
};

ExportStats ChromeExport::run(const std::vector<ExportMarker>& markers) {
    m_total = m_t.cpu.size() + m_t.gpu.size() * 2 + m_t.counters.size() + 1;
    chooseShift();
    chooseGpuPids();
    for (size_t i = 0; i < m_t.collectives.size(); ++i)
        m_collective_of.emplace(m_t.collectives[i].op_id, i);
    header();
    trackNames();
    cpuEvents();
    overheadEvents();
    gpuEvents();
    launchFlows();
    fwdBwdFlows();
    counters();
    for (const ExportMarker& m : markers)
        marker(m);
    m_out.raw("\n]}\n");
    m_stats.time_shift_ns = m_shift;
    if (m_progress) m_progress(1.0);
    return m_stats;
}

void ChromeExport::tick() {
    if (m_progress && (++m_done & 0xFFFF) == 0)
        m_progress(double(m_done) / double(m_total));
}

void ChromeExport::chooseShift() {
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
    auto see = [&](int64_t a, int64_t b) { lo = std::min(lo, a); hi = std::max(hi, b); };
    for (const CpuEvent& e : m_t.cpu) see(e.start_ns, e.end_ns);
    for (const GpuEvent& g : m_t.gpu) see(g.start_ns, g.end_ns);
    for (const CounterSample& c : m_t.counters) see(c.start_ns, c.end_ns);
    for (const OverheadSpan& o : m_t.overhead) see(o.start_ns, o.end_ns);
    if (lo > hi || (lo > -kExactLimitNs && hi < kExactLimitNs))
        return;
    m_shift = lo / 1'000'000'000 * 1'000'000'000;
    if (lo < 0 && lo % 1'000'000'000) m_shift -= 1'000'000'000; // whole seconds before the first event
}

// GPU tracks are processes numbered by device, as PyTorch's profiler writes them, unless a CPU
// process has such a number; then they are numbered past the largest CPU process id.
void ChromeExport::chooseGpuPids() {
    std::set<int32_t> devices;
    for (const GpuEvent& g : m_t.gpu) devices.insert(g.device);
    if (devices.empty()) return;
    int64_t max_pid = 0;
    bool clash = false;
    for (const Thread& th : m_t.threads) {
        max_pid = std::max(max_pid, th.pid);
        clash |= th.pid >= *devices.begin() && th.pid <= *devices.rbegin();
    }
    if (clash) m_gpu_pid_base = max_pid + 1 - std::min(0, *devices.begin());
}

JsonWriter& ChromeExport::begin(char ph, std::string_view cat) {
    m_out.raw(m_first ? "\n{\"ph\":\"" : ",\n{\"ph\":\"").raw(ph).raw('"');
    m_first = false;
    ++m_stats.events;
    if (!cat.empty()) m_out.raw(",\"cat\":").str(cat);
    return m_out;
}

void ChromeExport::header() {
    m_out.raw("{\"schemaVersion\":1");
    const bool ranked = m_t.metadata.count("rank") && isInteger(m_t.metadata.at("rank"));
    for (const auto& [key, value] : m_t.metadata) {
        if (key == "traceEvents" || key == "deviceProperties" || key == kExportShiftKey || key == "distributedInfo" || key == "schemaVersion" ||
            (ranked && (key == "rank" || key == "world_size" || key == "dist_backend")))
            continue;
        m_out.raw(",\n").str(key).raw(':');
        if (isInteger(value)) {
            m_out.raw(value);
        } else {
            m_out.str(value);
        }
    }
    if (m_shift) m_out.raw(",\n").str(kExportShiftKey).raw(':').num(m_shift);
    if (ranked) {
        m_out.raw(",\n\"distributedInfo\":{\"rank\":").raw(m_t.metadata.at("rank"));
        auto ws = m_t.metadata.find("world_size");
        if (ws != m_t.metadata.end() && isInteger(ws->second)) m_out.raw(",\"world_size\":").raw(ws->second);
        auto be = m_t.metadata.find("dist_backend");
        if (be != m_t.metadata.end()) m_out.raw(",\"backend\":").str(be->second);
        m_out.raw('}');
    }
    m_out.raw(",\n\"deviceProperties\":[");
    for (size_t i = 0; i < m_t.devices.size(); ++i) {
        const DeviceInfo& d = m_t.devices[i];
        m_out.raw(i ? ",\n{\"id\":" : "\n{\"id\":").num(int64_t(d.id)).raw(",\"name\":").str(d.name);
        m_out.raw(",\"totalGlobalMem\":").num(d.total_memory).raw(",\"computeMajor\":").num(int64_t(d.compute_major));
        m_out.raw(",\"computeMinor\":").num(int64_t(d.compute_minor)).raw(",\"numSms\":").num(int64_t(d.sm_count));
        m_out.raw(",\"maxThreadsPerMultiprocessor\":").num(int64_t(d.max_threads_per_sm));
        m_out.raw(",\"sharedMemPerMultiprocessor\":").num(d.shared_memory_per_sm);
        m_out.raw(",\"regsPerMultiprocessor\":").num(int64_t(d.registers_per_sm)).raw('}');
    }
    m_out.raw("],\n\"traceEvents\":[");
}

void ChromeExport::process(int64_t pid, std::string_view name, int64_t sort_index) {
    begin('M', "").raw(",\"name\":\"process_name\",\"pid\":").num(pid).raw(",\"tid\":0,\"args\":{\"name\":").str(name).raw("}}");
    begin('M', "").raw(",\"name\":\"process_sort_index\",\"pid\":").num(pid).raw(",\"tid\":0,\"args\":{\"sort_index\":").num(sort_index).raw("}}");
}

void ChromeExport::threadName(int64_t pid, int64_t tid, std::string_view name, int64_t sort_index) {
    begin('M', "").raw(",\"name\":\"thread_name\",\"pid\":").num(pid).raw(",\"tid\":").num(tid).raw(",\"args\":{\"name\":").str(name).raw("}}");
    begin('M', "").raw(",\"name\":\"thread_sort_index\",\"pid\":").num(pid).raw(",\"tid\":").num(tid).raw(",\"args\":{\"sort_index\":").num(sort_index).raw("}}");
}

// Process and thread names and their order: CPU processes first, then each GPU followed by its
// counters. Threads keep the names the trace gave them (none is made up for a nameless one).
void ChromeExport::trackNames() {
    std::set<int64_t> cpu_pids;
    std::vector<uint8_t> has_events(m_t.threads.size(), 0);
    for (const CpuEvent& e : m_t.cpu) has_events[e.thread] = 1;
    auto rank = m_t.metadata.find("rank");
    const std::string host = rank == m_t.metadata.end() ? "CPU" : "CPU (rank " + rank->second + ")";
    for (size_t i = 0; i < m_t.threads.size(); ++i) {
        if (!has_events[i]) continue;
        const Thread& th = m_t.threads[i];
        if (cpu_pids.insert(th.pid).second) process(th.pid, host, int64_t(cpu_pids.size()) - 1);
        if (!th.name.empty()) threadName(th.pid, th.tid, m_t.str(th.name), th.tid);
    }
    std::set<std::pair<int32_t, int32_t>> streams;
    for (const GpuEvent& g : m_t.gpu) streams.emplace(g.device, g.stream);
    std::set<int32_t> devices;
    for (const auto& [device, stream] : streams) {
        if (devices.insert(device).second) {
            std::string name = "GPU " + std::to_string(device);
            for (const DeviceInfo& d : m_t.devices)
                if (d.id == device && !d.name.empty()) name += " (" + d.name + ")";
            process(gpuPid(device), name, 1000 + 2 * int64_t(device));
        }
        threadName(gpuPid(device), stream, "stream " + std::to_string(stream), stream);
    }
    std::set<int32_t> ranged;
    for (const CounterSample& c : m_t.counters)
        if (!c.label.empty() && c.device >= 0 && ranged.insert(c.device).second)
            threadName(gpuPid(c.device), kRangeTid, "profiler ranges", kRangeTid);
}

void ChromeExport::cpuEvents() {
    std::vector<uint8_t> collective_written(m_t.collectives.size(), 0);
    for (const CpuEvent& e : m_t.cpu) {
        const Thread& th = m_t.threads[e.thread];
        int64_t dur = e.end_ns - e.start_ns;
        if (dur < 0) {
            dur = 0;
            ++m_stats.clamped_durations;
        }
        begin('X', categoryOf(e.kind)).raw(",\"name\":").str(m_t.str(e.name)).raw(",\"pid\":").num(th.pid).raw(",\"tid\":").num(th.tid).raw(",\"ts\":").us(e.start_ns - m_shift).raw(",\"dur\":").us(dur);
        cpuArgs(e);
        if (isFrontend(e.kind) && e.external_id != 0 && !m_collective_of.empty()) {
            auto it = m_collective_of.find(e.external_id);
            if (it != m_collective_of.end() && !collective_written[it->second]) {
                collective_written[it->second] = 1;
                collectiveArgs(m_t.collectives[it->second]);
            }
        }
        endArgs();
        m_out.raw('}');
        tick();
    }
}

void ChromeExport::cpuArgs(const CpuEvent& e) {
    if (e.external_id) arg("\"External id\"").num(e.external_id);
    if (e.correlation) arg("\"correlation\"").num(e.correlation);
    if (e.sequence >= 0) arg("\"Sequence number\"").num(e.sequence);
    if (e.cbid >= 0) arg("\"cbid\"").num(int64_t(e.cbid));
    // Shapes and dtypes are JSON text already; text that is not (a damaged capture) goes as a string.
    for (auto [key, id] : {std::pair{"\"Input Dims\"", e.input_dims}, std::pair{"\"Input type\"", e.input_types}}) {
        if (id.empty()) continue;
        const std::string_view text = m_t.str(id);
        arg(key);
        if (!text.empty() && text.front() == '[' && detail::isJsonValue(text)) m_out.raw(text);
        else m_out.str(text);
    }
}

void ChromeExport::collectiveArgs(const Collective& c) {
    arg("\"Collective name\"").str(m_t.str(c.name)).raw(",\"dtype\":").str(m_t.str(c.dtype));
    m_out.raw(",\"In msg nelems\":").num(c.in_elements).raw(",\"Out msg nelems\":").num(c.out_elements);
    m_out.raw(",\"Group size\":").num(int64_t(c.group_size)).raw(",\"Rank\":").num(int64_t(c.rank));
    m_out.raw(",\"Process Group Name\":").str(m_t.str(c.group_name));
    m_out.raw(",\"Process Group Description\":").str(m_t.str(c.group_desc));
}

// The profiler's own overhead (CUPTI buffer requests, ...) on a row of the first CPU process, as
// PyTorch writes it ("overhead"); Sightline keeps it apart from the ops.
void ChromeExport::overheadEvents() {
    if (m_t.overhead.empty()) return;
    const int64_t pid = hostPid();
    threadName(pid, kOverheadTid, "profiler overhead", kOverheadTid);
    for (const OverheadSpan& o : m_t.overhead) {
        int64_t dur = o.end_ns - o.start_ns;
        if (dur < 0) {
            dur = 0;
            ++m_stats.clamped_durations;
        }
        begin('X', "overhead").raw(",\"name\":").str(m_t.str(o.name)).raw(",\"pid\":").num(pid).raw(",\"tid\":").num(kOverheadTid).raw(",\"ts\":").us(o.start_ns - m_shift).raw(",\"dur\":").us(dur).raw('}');
    }
}

void ChromeExport::gpuEvents() {
    for (const GpuEvent& g : m_t.gpu) {
        int64_t dur = g.end_ns - g.start_ns;
        if (dur < 0) {
            dur = 0;
            ++m_stats.clamped_durations;
        }
        begin('X', categoryOf(g.kind)).raw(",\"name\":").str(m_t.str(g.name)).raw(",\"pid\":").num(gpuPid(g.device)).raw(",\"tid\":").num(int64_t(g.stream)).raw(",\"ts\":").us(g.start_ns - m_shift).raw(",\"dur\":").us(dur);
        m_out.raw(",\"args\":{\"device\":").num(int64_t(g.device)).raw(",\"stream\":").num(int64_t(g.stream));
        if (g.context) m_out.raw(",\"context\":").num(int64_t(g.context));
        if (g.correlation) m_out.raw(",\"correlation\":").num(g.correlation);
        if (g.external_id) m_out.raw(",\"External id\":").num(g.external_id);
        if (g.kind == GpuKind::Kernel) {
            m_out.raw(",\"registers per thread\":").num(int64_t(g.registers));
            m_out.raw(",\"shared memory\":").num(int64_t(g.shared_memory));
            m_out.raw(",\"grid\":[").num(int64_t(g.grid[0])).raw(',').num(int64_t(g.grid[1])).raw(',').num(int64_t(g.grid[2]));
            m_out.raw("],\"block\":[").num(int64_t(g.block[0])).raw(',').num(int64_t(g.block[1])).raw(',').num(int64_t(g.block[2])).raw(']');
        } else if (g.kind != GpuKind::Annotation) {
            m_out.raw(",\"bytes\":").num(int64_t(g.bytes));
        }
        m_out.raw("}}");
        tick();
    }
}

void ChromeExport::flow(int64_t id, bool start, int64_t pid, int64_t tid, int64_t ts) {
    begin(start ? 's' : 'f', "ac2g").raw(",\"name\":\"ac2g\",\"id\":").num(id).raw(",\"pid\":").num(pid).raw(",\"tid\":").num(tid).raw(",\"ts\":").us(ts - m_shift);
    m_out.raw(start ? "}" : ",\"bp\":\"e\"}");
}

// One arrow per GPU activity: from the CUDA call that launched it when the trace has that call
// (same correlation id), else from the op it is linked to (same external id), to its start.
void ChromeExport::launchFlows() {
    Index api, ops;
    for (uint32_t i = 0; i < m_t.cpu.size(); ++i) {
        const CpuEvent& e = m_t.cpu[i];
        if ((e.kind == CpuKind::Runtime || e.kind == CpuKind::Driver) && e.correlation) api.emplace_back(e.correlation, i);
        else if (isFrontend(e.kind) && e.external_id) ops.emplace_back(e.external_id, i);
    }
    std::sort(api.begin(), api.end());
    std::sort(ops.begin(), ops.end());
    for (const GpuEvent& g : m_t.gpu) {
        tick();
        if (g.kind == GpuKind::Annotation) continue;
        const uint32_t* from = g.correlation ? lookup(api, g.correlation) : nullptr;
        if (!from && g.external_id) from = lookup(ops, g.external_id);
        if (!from) continue;
        const CpuEvent& e = m_t.cpu[*from];
        const Thread& th = m_t.threads[e.thread];
        const int64_t id = m_next_flow++;
        flow(id, true, th.pid, th.tid, e.start_ns);
        flow(id, false, gpuPid(g.device), g.stream, g.start_ns);
        ++m_stats.flows;
    }
}

// Forward-to-backward arrows the trace carried (PyTorch's "fwdbwd"), those with both ends.
void ChromeExport::fwdBwdFlows() {
    Index starts, ends;
    for (uint32_t i = 0; i < m_t.flows.size(); ++i) {
        const FlowPoint& f = m_t.flows[i];
        if (f.kind == FlowKind::ForwardBackward && f.thread < m_t.threads.size())
            (f.is_start ? starts : ends).emplace_back(f.id, i);
    }
    std::sort(starts.begin(), starts.end());
    std::sort(ends.begin(), ends.end());
    for (size_t k = 0; k < starts.size(); ++k) {
        if (k && starts[k].first == starts[k - 1].first) continue;
        const uint32_t* end = lookup(ends, starts[k].first);
        if (!end) continue;
        const int64_t id = m_next_flow++;
        for (uint32_t i : {starts[k].second, *end}) {
            const FlowPoint& f = m_t.flows[i];
            const Thread& th = m_t.threads[f.thread];
            begin(f.is_start ? 's' : 'f', "fwdbwd").raw(",\"name\":\"fwdbwd\",\"id\":").num(id).raw(",\"pid\":").num(th.pid).raw(",\"tid\":").num(th.tid).raw(",\"ts\":").us(f.ts_ns - m_shift);
            m_out.raw(f.is_start ? "}" : ",\"bp\":\"e\"}");
        }
        ++m_stats.flows;
    }
}

// Counter tracks in the process of their GPU, under its streams (Perfetto and chrome://tracing
// draw counters per process), host ones in the first CPU process. Viewers ignore a counter's
// tid; it carries the device (-1: the host), which Sightline's importer reads back. Values
// measured over a kernel (a label) go out as PyTorch writes them: one "cuda_profiler_range" slice
// per range with its metrics as arguments, on a track of their own.
void ChromeExport::counters() {
    const int64_t host_pid = hostPid();
    const auto& c = m_t.counters;
    for (size_t i = 0; i < c.size();) {
        if (!c[i].label.empty()) {
            i = profilerRange(i);
            continue;
        }
        begin('C', c[i].kind == CounterKind::Memory ? "memory" : "hardware_counters").raw(",\"name\":").str(m_t.str(c[i].name)).raw(",\"pid\":").num(c[i].device < 0 ? host_pid : gpuPid(c[i].device)).raw(",\"tid\":").num(c[i].device).raw(",\"ts\":").us(c[i].start_ns - m_shift).raw(",\"args\":{\"\":").num(c[i].value).raw("}}");
        ++m_stats.counters;
        tick();
        ++i;
    }
}

// The values from `first` on that share its label, times and device: one range. Returns the next.
size_t ChromeExport::profilerRange(size_t first) {
    const auto& c = m_t.counters;
    const CounterSample& r = c[first];
    const int64_t pid = r.device < 0 ? hostPid() : gpuPid(r.device);
    begin('X', "cuda_profiler_range").raw(",\"name\":").str(m_t.str(r.label)).raw(",\"pid\":").num(pid).raw(",\"tid\":").num(kRangeTid).raw(",\"ts\":").us(r.start_ns - m_shift).raw(",\"dur\":").us(std::max<int64_t>(0, r.end_ns - r.start_ns)).raw(",\"args\":{\"device\":").num(r.device);
    size_t i = first;
    for (; i < c.size() && c[i].label == r.label && c[i].start_ns == r.start_ns && c[i].end_ns == r.end_ns && c[i].device == r.device; ++i) {
        m_out.raw(',').str(m_t.str(c[i].name)).raw(':').num(c[i].value);
        ++m_stats.counters;
        tick();
    }
    m_out.raw("}}");
    return i;
}

void ChromeExport::marker(const ExportMarker& m) {
    const int64_t pid = hostPid();
    begin('i', m.category).raw(",\"s\":\"g\",\"name\":").str(m.name).raw(",\"pid\":").num(pid).raw(",\"tid\":0,\"ts\":").us(m.ts_ns - m_shift).raw(",\"args\":{");
    for (size_t i = 0; i < m.args.size(); ++i)
        m_out.raw(i ? "," : "").str(m.args[i].first).raw(':').str(m.args[i].second);
    m_out.raw("}}");
}

} // namespace

ExportStats exportChromeTrace(const Trace& trace, const std::filesystem::path& path,
                              const std::vector<ExportMarker>& markers, const ProgressFn& progress) {
    JsonWriter out(path);
    ChromeExport exporter(trace, out, progress);
    ExportStats stats = exporter.run(markers);
    out.finish();
    stats.bytes = out.bytesWritten();
    return stats;
}

} // namespace sightline
