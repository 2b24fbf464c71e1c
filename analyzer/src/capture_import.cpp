// Importer for the collector's raw captures (collector/include/sightline/capture_format.h):
// every whole chunk is read; a torn last chunk or a damaged one is counted as lost data.
#include "sightline/launch_alignment.h"
#include "sightline/capture_format.h"
#include "sightline/error.h"
#include "sightline/import.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <cxxabi.h>

#include <fmt/format.h>

namespace sightline {

namespace cap = capture;

namespace {

struct PendingRange {
    int64_t start_ns;
    int64_t cupti_tid;
    StringId name;
};

const char* memoryKind(uint32_t k) {
    // CUpti_ActivityMemoryKind
    switch (k) {
    case 1: return "Pageable";
    case 2: return "Pinned";
    case 3: return "Device";
    case 4: return "Array";
    case 5: return "Managed";
    case 6: return "Device Static";
    case 7: return "Managed Static";
    default: return "Unknown";
    }
}

std::string memcpyName(const cap::MemcpyRecord& m) {
    // CUpti_ActivityMemcpyKind, named as Kineto names them.
    static const char* kinds[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
    const char* k = m.copy_kind < 11 ? kinds[m.copy_kind] : "Unknown";
    return fmt::format("Memcpy {} ({} -> {})", k, memoryKind(m.src_kind), memoryKind(m.dst_kind));
}

const char* overheadName(uint32_t kind) {
    switch (kind) {
    case 0x00010000: return "Compiler";
    case 0x00020000: return "Buffer Flush";
    case 0x00030000: return "Instrumentation";
    case 0x00040000: return "Resource";
    case 0x00050000: return "Runtime Triggered Module Loading";
    case 0x00060000: return "Lazy Function Loading";
    case 0x00070000: return "Command Buffer Full";
    case 0x00080000: return "Activity Buffer Request";
    case 0x00090000: return "UVM Activity Init";
    default: return "CUPTI Overhead";
    }
}

class CaptureReader {
public:
    CaptureReader(Trace& t, int64_t pid, uint32_t version) : m_t(t), m_pid(pid), m_version(version) { m_ids.push_back(StringId{}); }

    void record(const cap::RecordHeader& h, const char* p);
    void finish();

private:
    StringId str(uint32_t id) const { return id < m_ids.size() ? m_ids[id] : StringId{}; }
    // CUPTI reports kernel names mangled; the collector does no demangling, the reader does
    // (the way Kineto names them, so tables and taxonomy agree across sources).
    StringId kernelName(uint32_t id);
    // A GPU activity without times (CUPTI flushed it before it finished; collectors before this one
    // wrote such records) has no place on the timeline: counted with the dropped records.
    template <typename R>
    bool untimed(const R& r) {
        if (cap::hasGpuTimes(r.start_ns, r.end_ns)) return false;
        ++m_untimed;
        return true;
    }
    // A GPU activity with the fields kernels, copies and memsets share.
    template <typename R>
    GpuEvent& addGpu(const R& r, GpuKind kind, StringId name) {
        GpuEvent g;
        g.start_ns = int64_t(r.start_ns);
        g.end_ns = int64_t(r.end_ns);
        g.name = name;
        g.kind = kind;
        g.device = int32_t(r.device);
        g.context = int32_t(r.context);
        g.stream = int32_t(r.stream);
        g.correlation = r.correlation;
        m_gpu_corr.emplace_back(m_t.gpu.size(), r.correlation);
        m_gpu_raw_name.push_back(StringId{});
        m_t.gpu.push_back(g);
        return m_t.gpu.back();
    }
    uint32_t thread(int64_t tid) { return m_t.threadIndex(m_pid, tid); }
    // Counted launch calls (capture::LaunchRecord) matched with the GPU activities they made.
    void alignCountedLaunches();
    // The record types with more than a few fields to copy. readString is false for a damaged record.
    bool readString(const cap::RecordHeader& h, const char* p);
    void readDevice(const cap::DeviceRecord& r);
    void readClock(const cap::ClockRecord& r);
    void readOp(const cap::OpRecord& r);
    void readApi(const cap::ApiRecord& r);
    void readKernel(const cap::KernelRecord& r);
    void readCollective(const cap::CollectiveRecord& r);
    void readLaunch(const cap::LaunchRecord& r);
    void readMarker(const cap::MarkerRecord& r);
    // Hardware sampling (capture::HwStatusRecord, HwSampleRecord; docs/hardware.md).
    void hwStatus(const cap::HwStatusRecord& r);
    bool hwSample(const cap::HwSampleRecord& r, const char* p);
    void alignHwClock();
    // An event of a CUPTI record, whose thread id is CUPTI's: its thread is set in finish(), once
    // every thread record (which gives CUPTI's id beside the OS one) has been read.
    void addCuptiEvent(CpuEvent e, int64_t cupti_tid) {
        m_cupti_threads.emplace_back(m_t.cpu.size(), cupti_tid);
        m_t.cpu.push_back(e);
    }

    Trace& m_t;
    int64_t m_pid;
    uint32_t m_version; // the capture format's
    std::vector<StringId> m_ids;
    uint64_t m_untimed = 0;
    std::unordered_map<uint32_t, uint64_t> m_external; // CUPTI correlation -> op id
    std::unordered_map<uint32_t, StringId> m_demangled;
    std::unordered_map<uint64_t, PendingRange> m_ranges;
    std::vector<std::pair<size_t, uint32_t>> m_cpu_corr, m_gpu_corr; // event index, correlation
    std::vector<std::pair<size_t, int64_t>> m_cupti_threads;         // event index, CUPTI's thread id
    std::unordered_map<int64_t, int64_t> m_os_tid;                   // CUPTI's thread id -> the OS one
    struct CountedLaunch {
        CpuEvent call;
        uint32_t segment;
        detail::CountedCall key;
    };
    std::vector<CountedLaunch> m_launches;
    bool m_launch_records = false;        // any Launch record, a host synchronisation's included
    std::vector<StringId> m_gpu_raw_name; // per GPU event: a kernel's name as recorded (mangled)
    struct HwSession {
        int64_t cupti_ns;                 // CUPTI's clock when sampling started
        size_t first = SIZE_MAX, end = 0; // its samples in m_t.counters
    };
    std::vector<HwSession> m_hw_sessions;
    std::unordered_map<uint32_t, size_t> m_hw_current; // device -> its session now
};

template <typename T>
const T& as(const char* p) {
    return *reinterpret_cast<const T*>(p);
}

// The smallest size each record type may have; shorter records are damage and are skipped.
size_t minimumSize(uint16_t type) {
    switch (cap::RecordType(type)) {
    case cap::RecordType::String: return sizeof(cap::StringRecord);
    case cap::RecordType::Thread: return sizeof(cap::ThreadRecord);
    case cap::RecordType::Device: return sizeof(cap::DeviceRecord);
    case cap::RecordType::Clock: return sizeof(cap::ClockRecord);
    case cap::RecordType::Op: return sizeof(cap::OpRecord);
    case cap::RecordType::Api: return sizeof(cap::ApiRecord);
    case cap::RecordType::Kernel: return sizeof(cap::KernelRecord);
    case cap::RecordType::Memcpy: return sizeof(cap::MemcpyRecord);
    case cap::RecordType::Memset: return sizeof(cap::MemsetRecord);
    case cap::RecordType::Sync: return sizeof(cap::SyncRecord);
    case cap::RecordType::ExternalCorrelation: return sizeof(cap::ExternalCorrelationRecord);
    case cap::RecordType::Marker: return sizeof(cap::MarkerRecord);
    case cap::RecordType::Overhead: return sizeof(cap::OverheadRecord);
    case cap::RecordType::Counters: return sizeof(cap::CountersRecord);
    case cap::RecordType::Meta: return sizeof(cap::MetaRecord);
    case cap::RecordType::Collective: return sizeof(cap::CollectiveRecord);
    case cap::RecordType::Launch: return sizeof(cap::LaunchRecord);
    case cap::RecordType::HwStatus: return sizeof(cap::HwStatusRecord);
    case cap::RecordType::HwSample: return sizeof(cap::HwSampleRecord);
    }
    return sizeof(cap::RecordHeader);
}

// One record into the trace. The switch over record types stays one list (one line a type); the
// types with more than a few fields to copy have a function of their own below.
void CaptureReader::record(const cap::RecordHeader& h, const char* p) {
    switch (cap::RecordType(h.type)) {
    case cap::RecordType::String:
        if (!readString(h, p)) {
            ++m_t.quality.damaged_records;
            return;
        }
        break;
    case cap::RecordType::Thread: {
        const auto& r = as<cap::ThreadRecord>(p);
        m_t.threads[thread(r.tid)].name = str(r.name_id);
        if (r.cupti_tid != 0) m_os_tid[int64_t(r.cupti_tid)] = r.tid;
        break;
    }
    case cap::RecordType::Device: readDevice(as<cap::DeviceRecord>(p)); break;
    case cap::RecordType::Clock: readClock(as<cap::ClockRecord>(p)); break;
    case cap::RecordType::Op: readOp(as<cap::OpRecord>(p)); break;
    case cap::RecordType::Api: readApi(as<cap::ApiRecord>(p)); break;
    case cap::RecordType::Kernel: readKernel(as<cap::KernelRecord>(p)); break;
    case cap::RecordType::Memcpy: {
        const auto& r = as<cap::MemcpyRecord>(p);
        if (untimed(r)) break;
        addGpu(r, GpuKind::Memcpy, m_t.strings.intern(memcpyName(r))).bytes = r.bytes;
        break;
    }
    case cap::RecordType::Memset: {
        const auto& r = as<cap::MemsetRecord>(p);
        if (untimed(r)) break;
        addGpu(r, GpuKind::Memset, m_t.strings.intern("Memset (Device)")).bytes = r.bytes;
        break;
    }
    case cap::RecordType::Collective: readCollective(as<cap::CollectiveRecord>(p)); break;
    case cap::RecordType::Launch: readLaunch(as<cap::LaunchRecord>(p)); break;
    case cap::RecordType::ExternalCorrelation: {
        const auto& r = as<cap::ExternalCorrelationRecord>(p);
        m_external[r.correlation] = r.external_id;
        break;
    }
    case cap::RecordType::Marker: readMarker(as<cap::MarkerRecord>(p)); break;
    case cap::RecordType::Overhead: {
        const auto& r = as<cap::OverheadRecord>(p);
        m_t.overhead.push_back(OverheadSpan{int64_t(r.start_ns), int64_t(r.end_ns), m_t.strings.intern(overheadName(r.kind))});
        break;
    }
    case cap::RecordType::HwStatus:
        hwStatus(as<cap::HwStatusRecord>(p));
        break;
    case cap::RecordType::HwSample:
        if (!hwSample(as<cap::HwSampleRecord>(p), p)) {
            ++m_t.quality.damaged_records; // its values run past the record
            return;
        }
        break;
    case cap::RecordType::Counters: {
        const auto& r = as<cap::CountersRecord>(p);
        m_t.quality.dropped_records = r.cupti_dropped + r.ring_dropped;
        break;
    }
    default:
        ++m_t.quality.unknown_categories;
        return;
    }
    ++m_t.quality.events_read;
}

bool CaptureReader::readString(const cap::RecordHeader& h, const char* p) {
    const auto& s = as<cap::StringRecord>(p);
    if (sizeof s + size_t(s.length) > h.size) return true;
    // Ids are dense from 1; a far-off id is damage, not a reason to allocate gigabytes.
    if (size_t(s.id) > m_ids.size() + (size_t(1) << 20)) return false;
    if (size_t(s.id) >= m_ids.size()) m_ids.resize(size_t(s.id) + 1);
    m_ids[s.id] = m_t.strings.intern(std::string_view(p + sizeof s, s.length));
    return true;
}

void CaptureReader::readDevice(const cap::DeviceRecord& r) {
    DeviceInfo d;
    d.id = int32_t(r.id);
    d.name = std::string(m_t.str(str(r.name_id)));
    d.total_memory = int64_t(r.total_memory);
    d.compute_major = int32_t(r.compute_major);
    d.compute_minor = int32_t(r.compute_minor);
    d.sm_count = int32_t(r.sm_count);
    d.max_threads_per_sm = int32_t(r.max_threads_per_sm);
    d.shared_memory_per_sm = r.shared_memory_per_sm;
    d.registers_per_sm = int32_t(r.registers_per_sm);
    m_t.devices.push_back(std::move(d));
}

void CaptureReader::readClock(const cap::ClockRecord& r) {
    const long double skew_ld = (long double)r.cupti_ns - (long double)r.realtime_ns;
    const int64_t skew = skew_ld > 9e18L ? INT64_MAX : skew_ld < -9e18L ? -INT64_MAX
                                                                        : int64_t(skew_ld);
    auto& worst = m_t.metadata["clock_skew_ns"];
    if (worst.empty() || std::llabs(skew) > std::llabs(std::stoll(worst))) worst = std::to_string(skew);
}

void CaptureReader::readOp(const cap::OpRecord& r) {
    CpuEvent e;
    e.start_ns = int64_t(r.start_ns);
    e.end_ns = int64_t(r.end_ns);
    e.name = str(r.name_id);
    e.thread = thread(r.tid);
    e.kind = r.kind == uint32_t(cap::OpKind::UserAnnotation) ? CpuKind::UserAnnotation : CpuKind::Op;
    e.external_id = int64_t(r.external_id);
    e.sequence = r.sequence;
    e.input_dims = str(r.shapes_id);
    e.input_types = str(r.dtypes_id);
    m_t.cpu.push_back(e);
}

void CaptureReader::readApi(const cap::ApiRecord& r) {
    CpuEvent e;
    e.start_ns = int64_t(r.start_ns);
    e.end_ns = int64_t(r.end_ns);
    e.name = r.name_id ? str(r.name_id) : m_t.strings.intern(fmt::format("cbid {}", r.cbid));
    e.kind = r.domain == uint32_t(cap::ApiDomain::Driver) ? CpuKind::Driver : CpuKind::Runtime;
    e.correlation = r.correlation;
    e.cbid = int32_t(r.cbid);
    m_cpu_corr.emplace_back(m_t.cpu.size(), r.correlation);
    addCuptiEvent(e, r.tid);
}

void CaptureReader::readKernel(const cap::KernelRecord& r) {
    if (untimed(r)) return;
    GpuEvent& g = addGpu(r, GpuKind::Kernel, kernelName(r.name_id));
    m_gpu_raw_name.back() = str(r.name_id);
    g.grid = {r.grid[0], r.grid[1], r.grid[2]};
    g.block = {r.block[0], r.block[1], r.block[2]};
    g.registers = int32_t(r.registers);
    g.shared_memory = int32_t(r.shared_memory);
}

void CaptureReader::readCollective(const cap::CollectiveRecord& r) {
    Collective c;
    c.op_id = int64_t(r.op_id);
    c.name = str(r.name_id);
    c.dtype = str(r.dtype_id);
    c.element_size = int32_t(r.element_size);
    c.in_elements = r.in_elements;
    c.out_elements = r.out_elements;
    c.group_name = str(r.group_name_id);
    c.group_desc = str(r.group_desc_id);
    c.rank = r.rank;
    c.group_size = r.group_size;
    m_t.collectives.push_back(c);
}

void CaptureReader::readLaunch(const cap::LaunchRecord& r) {
    m_launch_records = true;
    CountedLaunch l;
    l.call.start_ns = int64_t(r.start_ns);
    l.call.end_ns = int64_t(r.end_ns);
    l.call.name = str(r.name_id);
    l.call.kind = CpuKind::Driver;
    l.call.thread = thread(r.tid);
    l.segment = r.segment;
    if (r.activity == uint32_t(cap::LaunchActivity::Sync)) { // a host synchronisation: not numbered, nothing to match
        m_t.cpu.push_back(l.call);
        return;
    }
    const auto kind = r.activity >= uint32_t(cap::LaunchActivity::Kernel) && r.activity <= uint32_t(cap::LaunchActivity::Graph)
        ? cap::LaunchActivity(r.activity)
        : cap::LaunchActivity::Graph; // an unknown kind: checked by nothing, as a graph's
    l.key = {r.count, kind, str(r.kernel_name_id)};
    m_launches.push_back(l);
}

void CaptureReader::readMarker(const cap::MarkerRecord& r) {
    if (r.flags == uint32_t(cap::MarkerFlags::Start)) {
        m_ranges[r.id] = PendingRange{int64_t(r.ts_ns), r.tid, str(r.name_id)};
    } else if (r.flags == uint32_t(cap::MarkerFlags::End)) {
        auto it = m_ranges.find(r.id);
        if (it == m_ranges.end()) return;
        CpuEvent e;
        e.start_ns = it->second.start_ns;
        e.end_ns = int64_t(r.ts_ns);
        e.name = it->second.name;
        e.kind = CpuKind::UserAnnotation;
        addCuptiEvent(e, it->second.cupti_tid);
        m_ranges.erase(it);
    } else {
        CpuEvent e;
        e.start_ns = e.end_ns = int64_t(r.ts_ns);
        e.name = str(r.name_id);
        e.kind = CpuKind::UserAnnotation;
        addCuptiEvent(e, r.tid);
    }
}

StringId CaptureReader::kernelName(uint32_t id) {
    if (auto it = m_demangled.find(id); it != m_demangled.end()) return it->second;
    StringId out = str(id);
    const std::string mangled(m_t.str(out));
    if (mangled.rfind("_Z", 0) == 0) {
        int status = 0;
        char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
        if (status == 0 && d) out = m_t.strings.intern(d);
        std::free(d);
    }
    m_demangled.emplace(id, out);
    return out;
}

void CaptureReader::hwStatus(const cap::HwStatusRecord& r) {
    auto& said = m_t.metadata["hw_sampling"];
    if (r.result == 0) {
        m_hw_current[r.device] = m_hw_sessions.size();
        m_hw_sessions.push_back(HwSession{int64_t(r.cupti_ns)});
        said = fmt::format("GPU {} sampled every {:g} us", r.device, double(r.interval_ns) / 1e3);
        return;
    }
    const std::string why(m_t.str(str(r.message_id)));
    said = fmt::format("{} on GPU {}: {}", m_hw_current.count(r.device) ? "stopped" : "not recorded", r.device,
                       why.empty() ? fmt::format("CUPTI error {}", r.result) : why);
    m_hw_current.erase(r.device);
}

// A sample's values become counter samples of the trace, named by their metrics; a sample of a
// session whose start the capture lost keeps its times as they are.
bool CaptureReader::hwSample(const cap::HwSampleRecord& r, const char* p) {
    if (sizeof r + size_t(r.count) * sizeof(cap::HwValue) > r.h.size) return false;
    const size_t first = m_t.counters.size();
    for (uint32_t i = 0; i < r.count; ++i) {
        cap::HwValue v;
        std::memcpy(&v, p + sizeof r + i * sizeof v, sizeof v);
        CounterSample c;
        c.start_ns = int64_t(r.start_ns);
        c.end_ns = int64_t(r.end_ns);
        c.value = v.value;
        c.name = str(v.metric_id);
        c.device = int32_t(r.device);
        c.kind = CounterKind::Hardware;
        m_t.counters.push_back(c);
    }
    if (auto it = m_hw_current.find(r.device); it != m_hw_current.end()) {
        HwSession& s = m_hw_sessions[it->second];
        s.first = std::min(s.first, first);
        s.end = m_t.counters.size();
    }
    return true;
}

// PM sampling gives the GPU's times. Where they lie within 10 s of CUPTI's clock read as the
// session started, they are on it (the kernels' clock); otherwise the session is moved so that
// its first sample starts at that reading, and the trace says so.
void CaptureReader::alignHwClock() {
    constexpr int64_t kSameClock = 10'000'000'000;
    int64_t worst = 0;
    for (const HwSession& s : m_hw_sessions) {
        if (s.first >= s.end || s.cupti_ns == 0) continue;
        const int64_t offset = s.cupti_ns - m_t.counters[s.first].start_ns;
        if (std::llabs(offset) <= kSameClock) continue;
        for (size_t i = s.first; i < s.end; ++i) {
            m_t.counters[i].start_ns += offset;
            m_t.counters[i].end_ns += offset;
        }
        worst = std::llabs(offset) > std::llabs(worst) ? offset : worst;
    }
    if (!m_hw_sessions.empty())
        m_t.metadata["hw_clock"] = worst ? fmt::format("samples moved by {} ns to CUPTI's clock at sampling start", worst)
                                         : "samples on CUPTI's clock";
}

// Links each launch call that no external correlation record names to the innermost op (or
// bridge-recorded user range) around it on its thread: the op whose code made the call. Op and
// call times come from one clock (CUPTI's, which the collector reads for ops too), and an op's
// times are taken inside its callbacks, so a call made by its code lies within them. Ops that do
// not nest (a range ended on another thread) are skipped over, never taken for an outer op.
void linkCallsByNesting(std::vector<CpuEvent>& cpu, const std::vector<size_t>& calls) {
    struct Item {
        uint32_t thread;
        int64_t start, end;
        bool call;
        size_t index;
    };
    if (calls.empty()) return;
    std::vector<Item> items;
    for (size_t i = 0; i < cpu.size(); ++i) {
        const CpuEvent& e = cpu[i];
        if ((e.kind == CpuKind::Op || e.kind == CpuKind::UserAnnotation) && e.external_id != 0)
            items.push_back({e.thread, e.start_ns, e.end_ns, false, i});
    }
    if (items.empty()) return;
    for (size_t i : calls) items.push_back({cpu[i].thread, cpu[i].start_ns, cpu[i].end_ns, true, i});
    // By thread and start; at one start, ops before calls and the longer op first (outermost).
    std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
        return std::tie(a.thread, a.start, a.call, b.end) < std::tie(b.thread, b.start, b.call, a.end);
    });
    std::vector<const Item*> open;
    uint32_t thread = UINT32_MAX;
    for (const Item& it : items) {
        if (it.thread != thread) {
            open.clear();
            thread = it.thread;
        }
        while (!open.empty() && open.back()->end < it.start) open.pop_back();
        if (!it.call) {
            open.push_back(&it);
            continue;
        }
        for (size_t k = open.size(); k-- > 0;)
            if (open[k]->end >= it.end) {
                cpu[it.index].external_id = cpu[open[k]->index].external_id;
                break;
            }
    }
}

// Each segment (a window of counting) is matched on its own, with the activities that began in
// it: the collector counts from 1 again in each window, and CUPTI, detached between windows, does
// too (the decoding shifts its later ids past the earlier ones). A matched call and its activities
// get a correlation id of their own, unique in the trace, so that the links below pair them; an
// unmatched call is kept, unlinked, and counted.
void CaptureReader::alignCountedLaunches() {
    std::sort(m_launches.begin(), m_launches.end(),
              [](const CountedLaunch& a, const CountedLaunch& b) { return std::tie(a.segment, a.key.count) < std::tie(b.segment, b.key.count); });
    std::vector<std::pair<int64_t, uint32_t>> starts; // the first call of each segment: (time, segment)
    for (const CountedLaunch& l : m_launches)
        if (starts.empty() || starts.back().second != l.segment) starts.emplace_back(l.call.start_ns, l.segment);
    std::sort(starts.begin(), starts.end());
    std::unordered_map<uint32_t, std::vector<size_t>> gpu_of; // segment -> its GPU activities
    for (size_t i = 0; i < m_t.gpu.size(); ++i) {
        const GpuEvent& g = m_t.gpu[i];
        if (g.kind != GpuKind::Kernel && g.kind != GpuKind::Memcpy && g.kind != GpuKind::Memset) continue;
        auto it = std::upper_bound(starts.begin(), starts.end(), std::make_pair(g.start_ns, UINT32_MAX));
        gpu_of[it == starts.begin() ? starts.front().second : std::prev(it)->second].push_back(i);
    }
    uint32_t next_id = 0x8000'0000u; // above CUPTI's, which count from 1 in each window
    for (size_t from = 0; from < m_launches.size();) {
        size_t to = from;
        while (to < m_launches.size() && m_launches[to].segment == m_launches[from].segment) ++to;
        std::vector<detail::CountedCall> calls;
        for (size_t i = from; i < to; ++i) calls.push_back(m_launches[i].key);
        std::vector<detail::RecordedActivity> acts;
        const std::vector<size_t>& gpu = gpu_of[m_launches[from].segment];
        for (size_t i : gpu) {
            const GpuEvent& g = m_t.gpu[i];
            const auto kind = g.kind == GpuKind::Kernel ? detail::LaunchKind::Kernel
                : g.kind == GpuKind::Memcpy             ? detail::LaunchKind::Memcpy
                                                        : detail::LaunchKind::Memset;
            acts.push_back({uint32_t(g.correlation), kind, m_gpu_raw_name[i]});
        }
        const detail::LaunchAlignment a = detail::alignLaunches(calls, acts);
        std::unordered_map<uint32_t, uint32_t> renumber; // CUPTI's id in this segment -> the trace's
        for (size_t i = from; i < to; ++i) {
            CpuEvent e = m_launches[i].call;
            if (const uint32_t id = a.correlation[i - from]) {
                e.correlation = renumber.emplace(id, next_id).first->second;
                next_id += e.correlation == next_id;
                m_cpu_corr.emplace_back(m_t.cpu.size(), uint32_t(e.correlation));
            }
            m_t.cpu.push_back(e);
        }
        for (size_t i : gpu)
            if (auto it = renumber.find(uint32_t(m_t.gpu[i].correlation)); it != renumber.end()) m_t.gpu[i].correlation = it->second;
        m_t.quality.counted_launches += to - from;
        m_t.quality.unmatched_launches += a.unmatched;
        from = to;
    }
    for (auto& [i, corr] : m_gpu_corr) corr = uint32_t(m_t.gpu[i].correlation);
}

void CaptureReader::finish() {
    if (!m_launches.empty()) alignCountedLaunches();
    alignHwClock();
    // From format 4 on, the collector that counted a window's launches recorded its host
    // synchronisations too (capture::LaunchActivity::Sync): none recorded means none made.
    if (m_launch_records && m_version >= 4) m_t.metadata[std::string(kHostSyncsKey)] = "counted launch hooks";
    // CUPTI names threads by pthread_self(), ops by the OS id: one thread, one row. A thread that
    // recorded no op (so no thread record) keeps CUPTI's id.
    for (const auto& [i, cupti_tid] : m_cupti_threads) {
        const auto it = m_os_tid.find(cupti_tid);
        m_t.cpu[i].thread = thread(it != m_os_tid.end() ? it->second : cupti_tid);
    }
    std::vector<size_t> unlinked;
    for (const auto& [i, corr] : m_cpu_corr) {
        if (auto it = m_external.find(corr); it != m_external.end())
            m_t.cpu[i].external_id = int64_t(it->second);
        else
            unlinked.push_back(i);
    }
    linkCallsByNesting(m_t.cpu, unlinked);
    for (size_t i : unlinked)
        if (m_t.cpu[i].external_id != 0) m_external.emplace(uint32_t(m_t.cpu[i].correlation), uint64_t(m_t.cpu[i].external_id));
    for (const auto& [i, corr] : m_gpu_corr)
        if (auto it = m_external.find(corr); it != m_external.end()) m_t.gpu[i].external_id = int64_t(it->second);
    m_t.quality.unclosed_ranges += m_ranges.size();
    m_t.quality.dropped_records += m_untimed;
    // A collective is written when its op begins; the op itself when it ends, so a capture cut
    // (or a window closed) in between holds the metadata of an op it does not have.
    if (m_t.collectives.empty()) return;
    std::unordered_set<int64_t> ops;
    for (const CpuEvent& e : m_t.cpu)
        if (e.kind == CpuKind::Op) ops.insert(e.external_id);
    for (const Collective& c : m_t.collectives)
        if (!ops.count(c.op_id)) ++m_t.quality.unlinked_collectives;
}

} // namespace

Trace importCapture(const std::filesystem::path& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f)
        throw InputError(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
    std::fseek(f, 0, SEEK_END);
    const long size = std::ftell(f);
    std::fseek(f, 0, SEEK_SET);
    std::string data(size_t(std::max(0L, size)), '\0');
    const size_t got = data.empty() ? 0 : std::fread(data.data(), 1, data.size(), f);
    std::fclose(f);
    if (got != data.size())
        throw InputError(fmt::format("{}: read error", path.string()));
    if (data.size() < sizeof(cap::FileHeader) || std::memcmp(data.data(), cap::kFileMagic, 7) != 0)
        throw InputError(fmt::format("{}: not a Sightline capture, or its header is cut short", path.string()));
    cap::FileHeader h;
    std::memcpy(&h, data.data(), sizeof h);
    if (h.version > cap::kFormatVersion || std::memcmp(h.magic, cap::kFileMagic, 8) != 0)
        throw InputError(fmt::format("{}: capture format {} is newer than this sightline reads (format {}); update sightline",
                                     path.string(), h.version, cap::kFormatVersion));
    Trace t;
    t.source = path.string();
    t.format = "sightline-capture";
    t.recorder = "sightline";
    t.metadata["pid"] = std::to_string(h.pid);
    t.metadata["host"] = std::string(h.host, strnlen(h.host, sizeof h.host));
    if (h.rank >= 0) t.metadata["rank"] = std::to_string(h.rank);
    if (h.world_size >= 0) t.metadata["world_size"] = std::to_string(h.world_size);
    CaptureReader reader(t, h.pid, h.version);
    size_t pos = std::max<size_t>(h.header_size, sizeof h);
    while (pos < data.size()) {
        if (data.size() - pos < sizeof(cap::ChunkHeader)) {
            t.quality.lost_bytes += data.size() - pos;
            ++t.quality.lost_chunks;
            break;
        }
        cap::ChunkHeader ch;
        std::memcpy(&ch, data.data() + pos, sizeof ch);
        if (ch.magic != cap::kChunkMagic || ch.payload_size > cap::kMaxChunkPayload) {
            t.quality.lost_bytes += data.size() - pos; // cannot resynchronise safely
            ++t.quality.lost_chunks;
            break;
        }
        const size_t body = pos + sizeof ch;
        if (data.size() - body < ch.payload_size) {
            t.quality.lost_bytes += data.size() - pos; // the last chunk was cut
            ++t.quality.lost_chunks;
            break;
        }
        if (cap::crc32(data.data() + body, ch.payload_size) != ch.crc32) {
            t.quality.lost_bytes += sizeof ch + ch.payload_size;
            ++t.quality.lost_chunks;
            pos = body + ch.payload_size;
            continue;
        }
        size_t at = body;
        const size_t end = body + ch.payload_size;
        while (at + sizeof(cap::RecordHeader) <= end) {
            cap::RecordHeader rh;
            std::memcpy(&rh, data.data() + at, sizeof rh);
            if (rh.size < sizeof rh || rh.size % 8 != 0 || rh.size > end - at)
                break;
            if (rh.size < minimumSize(rh.type)) {
                ++t.quality.damaged_records;
                at += rh.size;
                continue;
            }
            alignas(8) char buf[512];
            const char* p = data.data() + at;
            if (reinterpret_cast<uintptr_t>(p) % 8 != 0 && rh.size <= sizeof buf) {
                std::memcpy(buf, p, rh.size);
                p = buf;
            }
            reader.record(rh, p);
            at += rh.size;
        }
        pos = end;
    }
    reader.finish();
    return t;
}

} // namespace sightline
