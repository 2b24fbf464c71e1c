#pragma once
// The in-memory trace model every importer produces and every analysis reads. Times are integer
// nanoseconds on one timeline (the importer converts), durations are end - start.
#include "sightline/strings.h"

#include <array>
#include <cstdint>
#include <map>
#include <string_view>
#include <string>
#include <vector>

namespace sightline {

// What a CPU-side event is. Op and UserAnnotation are "frontend" events: they own an external
// id that GPU work and API calls link back to.
enum class CpuKind : uint8_t { Op,
                               UserAnnotation,
                               Runtime,
                               Driver,
                               PythonFunction };
const char* toString(CpuKind kind);

struct CpuEvent {
    int64_t start_ns = 0;
    int64_t end_ns = 0;
    StringId name;
    uint32_t thread = 0; // index into Trace::threads
    CpuKind kind = CpuKind::Op;
    int64_t external_id = 0; // own id (Op, UserAnnotation) or the linked op's id (Runtime, Driver)
    int64_t correlation = 0; // CUPTI correlation id of an API call
    int64_t sequence = -1;   // autograd sequence number, -1 when absent
    int32_t cbid = -1;       // CUPTI callback id of an API call
    StringId input_dims;     // raw JSON of "Input Dims" when shapes were recorded
    StringId input_types;    // raw JSON of "Input type"
    int64_t duration() const { return end_ns - start_ns; }
};

enum class GpuKind : uint8_t { Kernel,
                               Memcpy,
                               Memset,
                               Annotation };
const char* toString(GpuKind kind);

struct GpuEvent {
    int64_t start_ns = 0;
    int64_t end_ns = 0;
    StringId name;
    GpuKind kind = GpuKind::Kernel;
    int32_t device = 0;
    int32_t stream = 0;
    int32_t context = 0;
    int64_t correlation = 0;
    int64_t external_id = 0; // the frontend op that launched it, 0 when unknown
    uint64_t bytes = 0;      // memcpy / memset size
    std::array<int32_t, 3> grid{0, 0, 0};
    std::array<int32_t, 3> block{0, 0, 0};
    int32_t registers = 0;     // per thread
    int32_t shared_memory = 0; // bytes per block
    int64_t duration() const { return end_ns - start_ns; }
};

// A torch.distributed collective's metadata (from c10d's record_param_comms op), linked to that
// op by its external id; the op's kernels (NCCL's) link to the same id.
struct Collective {
    int64_t op_id = 0;        // external_id of the record_param_comms op
    StringId name;            // c10d's name: "allreduce", "broadcast", "_allgather_base", ...
    StringId dtype;           // "Float", "BFloat16", ...
    int32_t element_size = 0; // bytes
    int64_t in_elements = 0;
    int64_t out_elements = 0;
    StringId group_name; // process group name (uid)
    StringId group_desc; // process group description ("default_pg", ...)
    int32_t rank = -1;   // within the group
    int32_t group_size = 0;
};

struct Thread {
    int64_t pid = 0;
    int64_t tid = 0;
    StringId name;
};

// Profiler self-overhead ranges (for example CUPTI buffer requests): kept, never counted as ops.
struct OverheadSpan {
    int64_t start_ns = 0;
    int64_t end_ns = 0;
    StringId name;
};

enum class FlowKind : uint8_t { LaunchToGpu,
                                ForwardBackward,
                                Other };
struct FlowPoint {
    int64_t id = 0;
    int64_t ts_ns = 0;
    uint32_t thread = 0; // CPU thread index, or UINT32_MAX for a GPU end point
    FlowKind kind = FlowKind::Other;
    bool is_start = true;
};

// A sampled value over [start_ns, end_ns] (equal for a reading at one instant): a hardware counter
// of a GPU (CUPTI PM sampling, PyTorch's CUPTI range profiler) or the memory in use. The name is
// the metric as its source names it (sm__cycles_active.avg..., "Total Allocated"); docs/hardware.md.
// A value measured over one kernel or range rather than over time (PyTorch's cuda_profiler_range
// events) carries that kernel's or range's name as its label; its times are not the kernel's.
enum class CounterKind : uint8_t { Hardware,
                                   Memory };
const char* toString(CounterKind kind);

struct CounterSample {
    int64_t start_ns = 0;
    int64_t end_ns = 0;
    double value = 0;
    StringId name;
    StringId label;      // the kernel or range measured; empty for a sample over time
    int32_t device = -1; // GPU; -1 for the host
    CounterKind kind = CounterKind::Hardware;
};

struct DeviceInfo {
    int32_t id = 0;
    std::string name;
    int64_t total_memory = 0;
    int32_t compute_major = 0;
    int32_t compute_minor = 0;
    int32_t sm_count = 0;
    int32_t max_threads_per_sm = 0;
    int64_t shared_memory_per_sm = 0;
    int32_t registers_per_sm = 0;
};

// Counters of what the input held that the model could not use, kept and shown, never hidden.
// What each one counts is said once, in kQualityCounters below.
struct DataQuality {
    uint64_t events_read = 0;
    uint64_t events_ignored = 0;
    uint64_t unknown_categories = 0;
    uint64_t damaged_records = 0;
    uint64_t negative_durations = 0;
    uint64_t dropped_records = 0;
    uint64_t lost_chunks = 0;
    uint64_t lost_bytes = 0;
    uint64_t unclosed_ranges = 0;
    uint64_t unlinked_collectives = 0;
    uint64_t counted_launches = 0;
    uint64_t unmatched_launches = 0;

    DataQuality& operator+=(const DataQuality& o);
};

// How much a counter says about the figures (Perfetto's stats table has the same three): info is
// bookkeeping, data loss means figures may be short, error means the input was damaged.
enum class QualitySeverity { Info,
                             DataLoss,
                             Error };

// One entry per DataQuality counter, from which the trace database's quality table, the JSON
// report's data_quality object and the text report's data-quality section are written.
struct QualityCounter {
    uint64_t DataQuality::*field;
    const char* name;     // key in the trace database
    const char* json_key; // key in the JSON report
    QualitySeverity severity;
    const char* description;
    // Counters the text report's sentences name; the others get a line of their own when not zero.
    bool in_sentences;
    // Counters the JSON report lists even at zero; the others appear only when not zero, so
    // that reports of clean traces keep the keys they had before the counter was added.
    bool listed_at_zero;
};

inline constexpr QualityCounter kQualityCounters[] = {
    {&DataQuality::events_read, "events_read", "events_read", QualitySeverity::Info, "trace events seen", true, true},
    {&DataQuality::events_ignored, "events_ignored", "events_not_modelled", QualitySeverity::Info,
     "events of categories the model does not use (metadata, instants)", true, true},
    {&DataQuality::unknown_categories, "unknown_categories", "unknown_categories", QualitySeverity::Info,
     "complete events or capture records of a kind Sightline does not know", true, true},
    {&DataQuality::damaged_records, "damaged_records", "damaged_records", QualitySeverity::Error,
     "capture records damaged (cut short, or an absurd string id) and skipped", false, false},
    {&DataQuality::negative_durations, "negative_durations", "negative_durations", QualitySeverity::Error,
     "events with a negative duration, clamped to zero", true, true},
    {&DataQuality::dropped_records, "dropped_records", "dropped_records", QualitySeverity::DataLoss,
     "records the collector reported dropped (raw captures)", true, true},
    {&DataQuality::lost_chunks, "lost_chunks", "lost_chunks", QualitySeverity::DataLoss,
     "capture chunks cut short or damaged", true, true},
    {&DataQuality::lost_bytes, "lost_bytes", "lost_bytes", QualitySeverity::DataLoss, "bytes of those chunks", true, true},
    {&DataQuality::unclosed_ranges, "unclosed_ranges", "unclosed_ranges", QualitySeverity::Info,
     "NVTX ranges started but never ended", true, true},
    {&DataQuality::unlinked_collectives, "unlinked_collectives", "unlinked_collectives", QualitySeverity::DataLoss,
     "collective metadata whose op is not in the trace", true, true},
    {&DataQuality::counted_launches, "counted_launches", "counted_launches", QualitySeverity::Info,
     "launch calls the collector counted (no CUPTI API records)", true, true},
    {&DataQuality::unmatched_launches, "unmatched_launches", "unmatched_launches", QualitySeverity::DataLoss,
     "of those, calls whose GPU activities could not be told", true, true},
};

inline DataQuality& DataQuality::operator+=(const DataQuality& o) {
    for (const QualityCounter& c : kQualityCounters)
        this->*c.field += o.*c.field;
    return *this;
}

// Trace::metadata's key saying that host synchronisations were recorded without CUDA runtime calls
// (by the collector's launch hooks, in the light mode): a trace without runtime calls and without
// this key says nothing of them.
inline constexpr std::string_view kHostSyncsKey = "host_syncs";

struct Trace {
    std::string source; // file it came from
    std::string format; // "kineto-json", "sqlite"
    // What recorded the host events: "torch.profiler", "sightline" (kept through the trace database),
    // empty when unknown. Each adds its own cost to every op and API call it records (docs/rules.md).
    std::string recorder;
    StringTable strings;
    std::vector<CpuEvent> cpu;
    std::vector<GpuEvent> gpu;
    std::vector<Thread> threads;
    std::vector<OverheadSpan> overhead;
    std::vector<FlowPoint> flows;
    std::vector<DeviceInfo> devices;
    std::vector<Collective> collectives;
    std::vector<CounterSample> counters;         // hardware samples and memory readings
    std::map<std::string, std::string> metadata; // top-level facts (versions, trace name, ...)
    DataQuality quality;

    uint32_t threadIndex(int64_t pid, int64_t tid);
    std::string_view str(StringId id) const { return strings.view(id); }
    // The process of a CPU event's thread (0 when its thread is unknown).
    int64_t pidOf(const CpuEvent& e) const { return e.thread < threads.size() ? threads[e.thread].pid : 0; }
    size_t eventCount() const { return cpu.size() + gpu.size() + overhead.size(); }

private:
    std::map<std::pair<int64_t, int64_t>, uint32_t> m_threadIndex;
};

} // namespace sightline
