#pragma once
// CPU event nesting and op -> GPU attribution, by the rules PyTorch's key_averages() uses
// (docs/op-table.md): per-thread interval nesting, API calls moved to the thread of the op they
// belong to, GPU work attributed to the op whose external id it carries, and a chain of
// same-name single-child ops folded into its top.
#include "sightline/trace.h"

#include <cstdint>
#include <vector>

namespace sightline {

// How well CPU and GPU events link up; shown as data quality.
struct LinkStats {
    uint64_t gpu_linked = 0;       // GPU activities attributed to an op
    uint64_t gpu_without_id = 0;   // GPU activities that carry no external id
    uint64_t gpu_unmatched = 0;    // carry an id that no op in the trace has
    uint64_t api_linked = 0;       // runtime / driver calls linked to an op
    uint64_t folded = 0;           // same-name single children folded into their parent
    uint64_t excluded = 0;         // profiler bookkeeping events left out
    uint64_t partial_overlaps = 0; // events that overlap the end of an enclosing event
};

struct OpTree {
    static constexpr int32_t kNone = -1;
    // Indexed like Trace::cpu.
    std::vector<int32_t> parent;          // effective parent after folding, kNone for a root
    std::vector<uint8_t> counted;         // 0: excluded (profiler bookkeeping) or folded into its parent
    std::vector<uint32_t> thread;         // thread used for nesting
    std::vector<int64_t> self_cpu_ns;     // duration minus the direct children's durations
    std::vector<int64_t> self_device_ns;  // GPU time of the work the event launched itself
    std::vector<int64_t> device_total_ns; // self_device_ns plus the children's device totals
    std::vector<uint16_t> depth;

    LinkStats links;
};

OpTree buildOpTree(const Trace& trace);

// Names PyTorch leaves out of its tables (profiler bookkeeping, trivial autograd queries).
bool isBookkeepingName(std::string_view name);

} // namespace sightline
