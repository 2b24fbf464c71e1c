#pragma once
// The report's tables: per-op CPU table and per-kernel-class / per-kernel GPU tables.
#include "sightline/op_tree.h"
#include "sightline/taxonomy.h"
#include "sightline/trace.h"

#include <span>
#include <string>
#include <vector>

namespace sightline {

struct OpRow {
    std::string name;
    CpuKind kind = CpuKind::Op;
    uint64_t calls = 0;
    int64_t self_cpu_ns = 0;
    int64_t cpu_total_ns = 0;
    int64_t self_device_ns = 0;
    int64_t device_total_ns = 0;
};

struct GpuRow {
    std::string name; // class name (class table) or full activity name (kernel table)
    std::string family;
    std::string klass; // the class of a kernel row
    GpuKind kind = GpuKind::Kernel;
    uint64_t calls = 0;
    int64_t total_ns = 0;
    int64_t min_ns = 0;
    int64_t max_ns = 0;
    double share = 0; // of all GPU activity time in the table
};

struct Tables {
    std::vector<OpRow> ops;
    std::vector<GpuRow> kernel_classes;
    std::vector<GpuRow> kernels;
    int64_t self_cpu_total_ns = 0; // sum of self CPU over all ops (PyTorch's footer)
    int64_t gpu_total_ns = 0;      // sum of GPU activity durations
    uint64_t gpu_activities = 0;
};

// Which events a table covers: a mask per CPU and per GPU event (empty = all events).
struct EventFilter {
    std::vector<uint8_t> cpu;
    std::vector<uint8_t> gpu;
};

// Keeps only the events that start within [begin_ns, end_ns) (an attach window of a capture
// that holds several).
void keepRange(Trace& trace, int64_t begin_ns, int64_t end_ns);

// The events that start within [begin_ns, end_ns): CPU events and GPU activities alike.
EventFilter rangeFilter(const Trace& trace, int64_t begin_ns, int64_t end_ns);

// What a time range holds: its length, the time any GPU activity ran in it (the union, clipped to
// the range), and the counts of the activities that start in it.
struct RangeSummary {
    int64_t duration_ns = 0;
    int64_t gpu_busy_ns = 0;
    uint64_t kernels = 0, memops = 0, cpu_ops = 0;
};
RangeSummary summarizeRange(const Trace& trace, int64_t begin_ns, int64_t end_ns);

// Kernel durations in power-of-two buckets: bucket k counts kernels with duration in
// [2^k, 2^(k+1)) microseconds (bucket 0 also takes everything under 1 us); 24 buckets.
std::vector<uint64_t> kernelDurationHistogram(const Trace& trace);

// Op rows are keyed by name and kind; "ProfilerStep#N" rows become one "ProfilerStep*" row as
// in PyTorch. GPU rows cover kernels, memcpy and memset (not GPU-side annotations).
Tables computeTables(const Trace& trace, const OpTree& tree, const Taxonomy& taxonomy,
                     const EventFilter& filter = {});

enum class OpSort { SelfCpu,
                    CpuTotal,
                    SelfDevice,
                    DeviceTotal,
                    Calls,
                    Name };
enum class GpuSort { Total,
                     Calls,
                     Avg,
                     Max,
                     Name };

// The orders a table can be sorted in, one entry each: the key, its command-line spelling
// (sightline report --sort / --kernel-sort), the words a table's title uses, and the figure the
// rows are sorted on, largest first (none for Name: by name alone). Ties go by name.
template <class Key, class Row, class Value>
struct TableOrder {
    Key key;
    const char* option;
    const char* title;
    Value (*value)(const Row& row);
};
using OpSortKey = TableOrder<OpSort, OpRow, int64_t>;
using GpuSortKey = TableOrder<GpuSort, GpuRow, double>;
std::span<const OpSortKey> opSortKeys();
std::span<const GpuSortKey> gpuSortKeys();
const OpSortKey& sortKey(OpSort key);
const GpuSortKey& sortKey(GpuSort key);

void sortOps(std::vector<OpRow>& rows, OpSort key);
void sortGpu(std::vector<GpuRow>& rows, GpuSort key);

// Refuses traces nothing can be said of (no events at all; API calls alone) with one actionable
// InputError. GPU activity without CPU ops is analysed on the GPU side.
void requireReportable(const Trace& trace);

} // namespace sightline
