#pragma once
// The communication table: torch.distributed collectives by (collective, process group, dtype,
// message size), with their time and bandwidth (docs/multi-rank.md, "Collectives and their sizes").
#include "sightline/op_tree.h"
#include "sightline/tables.h"
#include "sightline/taxonomy.h"
#include "sightline/trace.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sightline {

// What a collective's time was measured on.
enum class CommTiming : uint8_t {
    GpuKernels,   // the communication (NCCL) kernels its op launched
    BackendRange, // no kernel: the backend's own range ("gloo:all_reduce"), from the call to completion
    CpuOp,        // neither: the op's own CPU duration
};
const char* toString(CommTiming timing);

struct CommRow {
    std::string collective; // c10d's name: "allreduce", "broadcast", "_allgather_base", ...
    std::string group;      // process group name
    std::string group_desc; // its description ("default_pg", ...)
    std::string dtype;      // "Float", "BFloat16", ...
    int32_t element_size = 0;
    int32_t group_size = 0;  // ranks in the group, 0 when unknown
    int64_t in_elements = 0; // per call
    int64_t out_elements = 0;
    int64_t bytes = 0; // message size per call: messageBytes()
    CommTiming timing = CommTiming::GpuKernels;
    uint64_t calls = 0;
    int64_t total_ns = 0; // summed over the calls, measured as `timing` says
    // GB/s (1e9 bytes a second); NaN when unknown (no time, or no bytes to move).
    double algbw_gbps() const;
    double busbw_gbps() const;
};

// A collective's message size in bytes, as NCCL's tests count it: the larger of its input and
// output (all-gather: the gathered output; reduce-scatter: the whole input) times the element size.
int64_t messageBytes(const Collective& c);

// Bytes an element of a c10 scalar type takes, by the name PyTorch writes ("Float" 4, "BFloat16"
// 2, "Long" 8, "Float8_e4m3fn" 1, ...); 0 for a name it does not know.
int32_t dtypeElementSize(std::string_view dtype);

// NCCL's bus-bandwidth factor for a collective over `group_size` ranks: all-reduce 2(n-1)/n;
// all-gather, reduce-scatter, all-to-all, gather, scatter (n-1)/n; broadcast, reduce, send, recv 1.
// NaN for a barrier, a name it does not know, or an unknown group size where n matters.
double busBandwidthFactor(std::string_view collective, int32_t group_size);

// Algorithm bandwidth in GB/s: bytes / time; NaN without time or bytes.
double algorithmBandwidth(int64_t bytes, int64_t ns);

// One row per (collective, group, dtype, sizes, group size, timing), by total time, largest
// first. A collective whose op encloses another collective's op (c10d's dispatcher op around the
// backend's record_param_comms) is counted once, by the inner one. Collectives whose op is not
// in the trace, or is outside `filter`, are left out.
std::vector<CommRow> commTable(const Trace& trace, const OpTree& tree, const Taxonomy& taxonomy,
                               const EventFilter& filter = {});

} // namespace sightline
