#pragma once
// The raw capture format written by the collector and read by the analyzer (docs/capture-format.md).
// Header-only and dependency-free: the collector links nothing but CUPTI, threads and dl.
//
// A file is a FileHeader followed by chunks. A chunk is a ChunkHeader and a payload of records;
// the header carries the payload's size, record count and CRC-32, so a reader keeps every whole
// chunk of a file that was cut short (a killed job) and counts what it lost. All integers are
// little-endian; records are 8-byte aligned.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string_view>

namespace sightline::capture {

inline constexpr char kFileMagic[8] = {'S', 'L', 'C', 'A', 'P', 'T', 'R', '1'};
// Version 2 added the Collective record (version 1 captures read as before, with no collectives);
// version 3 the Launch record; version 4 Launch records of host synchronisations (LaunchActivity::Sync);
// version 5 hardware counter samples (HwStatus, HwSample).
inline constexpr uint32_t kFormatVersion = 5;
inline constexpr uint32_t kChunkMagic = 0x4b43'4c53; // "SLCK"
inline constexpr uint32_t kMaxChunkPayload = 64u << 20;

struct FileHeader {
    char magic[8];
    uint32_t version;
    uint32_t header_size; // sizeof(FileHeader) of the writer
    int64_t pid;
    int64_t start_realtime_ns; // CLOCK_REALTIME at collector start
    int32_t rank;              // RANK from the environment, -1 when absent
    int32_t world_size;
    int32_t local_rank;
    uint32_t flags; // reserved
    char host[64];
};
static_assert(sizeof(FileHeader) == 112);

struct ChunkHeader {
    uint32_t magic;
    uint32_t payload_size;
    uint32_t record_count;
    uint32_t crc32;
};
static_assert(sizeof(ChunkHeader) == 16);

enum class RecordType : uint16_t {
    String = 1, // StringRecord + bytes
    Thread = 2,
    Device = 3,
    Clock = 4,
    Op = 5,
    Api = 6,
    Kernel = 7,
    Memcpy = 8,
    Memset = 9,
    Sync = 10,
    ExternalCorrelation = 11,
    Marker = 12,
    Overhead = 13,
    Counters = 14,
    Meta = 15,
    Collective = 16, // since version 2
    Launch = 17,     // since version 3
    HwStatus = 18,   // since version 5
    HwSample = 19,   // since version 5
};

struct RecordHeader {
    uint16_t type;
    uint16_t reserved;
    uint32_t size; // whole record, header included, a multiple of 8
};

struct StringRecord { // followed by `length` bytes (not terminated), padded to 8
    RecordHeader h;
    uint32_t id;
    uint32_t length;
};

struct ThreadRecord {
    RecordHeader h;
    int64_t tid; // the OS thread id (gettid), as op records give it
    uint32_t name_id;
    uint32_t cupti_tid; // the id CUPTI gives the same thread in API and marker records (the low 32
                        // bits of pthread_self()); 0 in captures before it was written
};

struct DeviceRecord {
    RecordHeader h;
    uint32_t id;
    uint32_t name_id;
    uint64_t total_memory;
    uint32_t compute_major, compute_minor;
    uint32_t sm_count, max_threads_per_sm;
    uint32_t shared_memory_per_sm, registers_per_sm;
    uint32_t core_clock_khz, memory_clock_khz;
};

// One reading of the clocks at the same instant: CUPTI's timestamp and the host's.
struct ClockRecord {
    RecordHeader h;
    uint64_t cupti_ns;
    uint64_t realtime_ns;
    uint64_t monotonic_ns;
};

enum class OpKind : uint32_t { Op = 0,
                               UserAnnotation = 1 };

struct OpRecord {
    RecordHeader h;
    uint64_t start_ns, end_ns; // CLOCK_REALTIME, CUPTI's default clock
    int64_t tid;
    uint64_t external_id; // the id pushed as CUPTI external correlation (CUSTOM0)
    int64_t sequence;     // autograd sequence number, -1 when none
    uint64_t forward_tid; // for backward ops: the forward thread, 0 when none
    uint32_t name_id;
    uint32_t kind;      // OpKind
    uint32_t shapes_id; // JSON text of the input shapes, 0 when not recorded
    uint32_t dtypes_id;
};

enum class ApiDomain : uint32_t { Runtime = 0,
                                  Driver = 1 };

struct ApiRecord {
    RecordHeader h;
    uint64_t start_ns, end_ns;
    int64_t tid;
    uint32_t correlation;
    uint32_t cbid;
    uint32_t domain; // ApiDomain
    uint32_t name_id;
    int32_t return_value;
    uint32_t pad;
};

struct KernelRecord {
    RecordHeader h;
    uint64_t start_ns, end_ns;
    uint64_t graph_id_and_node; // graphId << 32 | (graphNodeId & 0xffffffff)
    uint32_t name_id;
    uint32_t device, context, stream;
    uint32_t correlation;
    int32_t grid[3];
    int32_t block[3];
    uint32_t registers;
    uint32_t shared_memory; // static + dynamic, bytes per block
    uint32_t pad;
};

struct MemcpyRecord {
    RecordHeader h;
    uint64_t start_ns, end_ns;
    uint64_t bytes;
    uint32_t copy_kind, src_kind, dst_kind;
    uint32_t device, context, stream;
    uint32_t correlation;
    uint32_t pad;
};

struct MemsetRecord {
    RecordHeader h;
    uint64_t start_ns, end_ns;
    uint64_t bytes;
    uint32_t value;
    uint32_t device, context, stream;
    uint32_t correlation;
    uint32_t pad;
};

struct SyncRecord {
    RecordHeader h;
    uint64_t start_ns, end_ns;
    uint32_t type; // CUpti_ActivitySynchronizationType
    uint32_t context, stream;
    uint32_t correlation;
    uint32_t event;
    uint32_t pad;
};

struct ExternalCorrelationRecord {
    RecordHeader h;
    uint64_t external_id;
    uint32_t external_kind;
    uint32_t correlation;
};

enum class MarkerFlags : uint32_t { Instant = 1,
                                    Start = 2,
                                    End = 4 };

struct MarkerRecord {
    RecordHeader h;
    uint64_t ts_ns;
    int64_t tid;
    uint64_t id;      // pairs start and end of a range
    uint32_t flags;   // MarkerFlags
    uint32_t name_id; // 0 on End
    uint32_t domain_id;
    uint32_t pad;
};

struct OverheadRecord {
    RecordHeader h;
    uint64_t start_ns, end_ns;
    uint32_t kind;
    uint32_t pad;
};

// What the collector dropped or could not do, written at the end and whenever it changes.
struct CountersRecord {
    RecordHeader h;
    uint64_t cupti_dropped; // records CUPTI reported dropped
    uint64_t ring_dropped;  // records lost because a thread's buffer was full
    uint64_t buffers_requested;
    uint64_t ops_recorded;
};

// A collective of torch.distributed (c10d's NCCL and gloo backends alike), from the metadata c10d
// gives its "record_param_comms" op: written when that op begins, linked to it by the op's id.
struct CollectiveRecord {
    RecordHeader h;
    uint64_t op_id;            // external_id of the record_param_comms Op record
    int64_t in_elements;       // input elements (all of a rank's inputs)
    int64_t out_elements;      // output elements
    uint32_t name_id;          // c10d's collective name: "allreduce", "broadcast", "_allgather_base", ...
    uint32_t dtype_id;         // the element type as PyTorch names it: "Float", "BFloat16", ...
    uint32_t element_size;     // bytes per element
    uint32_t group_name_id;    // process group name (its uid, "0", "1", ...)
    uint32_t group_desc_id;    // process group description ("default_pg", "undefined", ...)
    int32_t rank;              // this rank within the group
    int32_t group_size;        // ranks in the group
    int32_t global_rank_start; // the group's first global rank
    int32_t global_rank_stride;
    uint32_t pad;
};
static_assert(sizeof(CollectiveRecord) == 72);

// What a counted call made on the GPU (LaunchRecord::activity).
// Sync (since version 4): a call that waits on the host for GPU work (cuStreamSynchronize,
// cuEventSynchronize, cuCtxSynchronize), recorded beside the counted calls but not numbered (count
// 0): CUPTI, recording no API calls, numbers only the calls that make GPU work. A capture of version 4 or later with
// Launch records in a window holds every such call of that window.
enum class LaunchActivity : uint32_t { Kernel = 1,
                                       Memcpy = 2,
                                       Memset = 3,
                                       Graph = 4,
                                       Sync = 5 };

// A call that makes GPU work (a kernel launch, a copy, a set, a graph launch), counted by the
// collector itself where CUPTI records no API calls (docs/collector.md, "Linking without API
// calls"). Recording kernels, copies and sets only, CUPTI numbers its correlation ids one per such
// call in call order, so `count` is meant to be the correlation id of the call's GPU activities,
// up to an offset per segment and the odd swap of two threads' calls, which the reader finds and
// checks by the activities' kinds and kernel names before it links anything.
struct LaunchRecord {
    RecordHeader h;
    uint64_t start_ns, end_ns; // CLOCK_REALTIME, as op records
    int64_t tid;               // the OS thread id, as op records give it
    uint64_t count;            // 1, 2, 3... over the counted calls of a segment, in call order; 0 for a Sync
    uint32_t segment;          // 1, 2, 3...: counting restarts at 1 each time it is turned on (a window)
    uint32_t pad;
    uint32_t name_id;        // the driver function called ("cuLaunchKernel", "cuMemcpyHtoDAsync_v2", ...)
    uint32_t kernel_name_id; // the kernel's name as CUPTI gives it (mangled); 0 when not a kernel or unknown
    uint32_t activity;       // LaunchActivity
    int32_t return_value;    // CUresult
};
static_assert(sizeof(LaunchRecord) == 64);

// Hardware counter sampling (`sightline run --hw`; docs/hardware.md). A sampling session's state
// on one GPU: written when sampling starts (result 0, with CUPTI's clock then) and when it cannot
// start or has to end (result non-zero, message_id saying why in words).
struct HwStatusRecord {
    RecordHeader h;
    uint64_t interval_ns; // the sampling interval asked for
    uint64_t cupti_ns;    // CUPTI's clock (the kernels') when sampling started; 0 when it did not
    uint32_t device;
    int32_t result;      // 0: sampling; else why not (a CUptiResult, or -1)
    uint32_t message_id; // what went wrong, for the report; 0 when sampling
    uint32_t overflows;  // times the GPU's sample buffer overflowed (samples lost)
};
static_assert(sizeof(HwStatusRecord) == 40);

// One metric's value in a sample.
struct HwValue {
    uint32_t metric_id; // the metric as CUPTI names it ("sm__cycles_active.avg.pct_of_peak_sustained_elapsed")
    uint32_t pad;
    double value;
};
static_assert(sizeof(HwValue) == 16);

// One sample: the counters over [start_ns, end_ns] on one GPU, as CUPTI's PM sampling gives its
// times; followed by `count` HwValue. The reader puts the times on the kernels' clock (HwStatus).
struct HwSampleRecord {
    RecordHeader h;
    uint64_t start_ns, end_ns;
    uint32_t device;
    uint32_t count;
};
static_assert(sizeof(HwSampleRecord) == 32);

struct MetaRecord {
    RecordHeader h;
    uint32_t key_id;
    uint32_t value_id;
};

constexpr uint32_t alignedSize(size_t n) { return uint32_t((n + 7) & ~size_t(7)); }

// Whether a GPU activity's times place it on the timeline. CUPTI writes zeros for work flushed
// before it finished: the collector counts such records instead of writing them, and the reader
// does the same with captures written before it did.
constexpr bool hasGpuTimes(uint64_t start_ns, uint64_t end_ns) { return start_ns != 0 && end_ns >= start_ns; }

template <typename T>
inline void initHeader(T& rec, RecordType type) {
    static_assert(sizeof(T) % 8 == 0, "records are 8-byte multiples");
    std::memset(&rec, 0, sizeof(T));
    rec.h.type = uint16_t(type);
    rec.h.size = uint32_t(sizeof(T));
}

// For the string tables of the writers (the collector, its libtorch bridge): std::string keys
// looked up by std::string_view, with no string built to look.
struct StringViewHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

// CRC-32 (IEEE 802.3, reflected), slicing by 8 bytes at a time (about 8x the speed of a byte at a
// time; the writer thread checksums every chunk it writes).
inline uint32_t crc32(const void* data, size_t n, uint32_t crc = 0) {
    struct Tables {
        uint32_t v[8][256];
    };
    static const Tables t = [] {
        Tables x{};
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            x.v[0][i] = c;
        }
        for (uint32_t i = 0; i < 256; ++i)
            for (int s = 1; s < 8; ++s) x.v[s][i] = (x.v[s - 1][i] >> 8) ^ x.v[0][x.v[s - 1][i] & 0xff];
        return x;
    }();
    const auto* p = static_cast<const unsigned char*>(data);
    crc = ~crc;
    for (; n >= 8; n -= 8, p += 8) {
        uint32_t lo, hi;
        std::memcpy(&lo, p, 4); // little-endian, as every record is
        std::memcpy(&hi, p + 4, 4);
        lo ^= crc;
        crc = t.v[7][lo & 0xff] ^ t.v[6][(lo >> 8) & 0xff] ^ t.v[5][(lo >> 16) & 0xff] ^ t.v[4][lo >> 24] ^
            t.v[3][hi & 0xff] ^ t.v[2][(hi >> 8) & 0xff] ^ t.v[1][(hi >> 16) & 0xff] ^ t.v[0][hi >> 24];
    }
    for (; n > 0; --n, ++p) crc = t.v[0][(crc ^ *p) & 0xff] ^ (crc >> 8);
    return ~crc;
}

} // namespace sightline::capture
