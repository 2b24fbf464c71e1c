#pragma once
// Op calls that take far longer on the host than their op usually does (docs/metrics.md, "Host
// outliers"): per-shape setup such as cuDNN building, and on a fresh machine compiling, an
// execution plan for an input shape it has not met before, or an autotuner timing its candidates.
// An op's usual time is the median of its calls in the trace. Time a call spends waiting for the
// device is not setup and counts toward neither test: until the device has finished the work
// launched before the call (in a GPU-bound step the host runs ahead, then blocks on a full launch
// queue or in the allocator, whether or not the call that blocked was recorded; setup done then
// costs the step nothing), and after that, inside launch, enqueue or synchronisation calls.
#include "sightline/trace.h"

#include <cstdint>
#include <vector>

namespace sightline {

struct HostOutlier {
    size_t event = 0;       // index into Trace::cpu (a CPU op)
    int64_t median_ns = 0;  // the median duration of the calls of the same op
    int64_t excess_ns = 0;  // its duration less that median and less waiting_ns
    int64_t waiting_ns = 0; // the time it waited for the device (above)
};

// A call is an outlier when, less its waiting, it takes at least kOutlierFactor times its op's
// median and at least kOutlierMinNs more than it; ops with fewer than kOutlierMinCalls calls in
// the trace have no usual time and no outliers.
inline constexpr double kOutlierFactor = 20;
inline constexpr int64_t kOutlierMinNs = 5'000'000;
inline constexpr size_t kOutlierMinCalls = 4;

// Every outlier call of a CPU op (CpuKind::Op), in the trace's event order, given each GPU
// activity's launch call (launchCalls in metric_passes.h, which the second form calls).
std::vector<HostOutlier> hostOutliers(const Trace& trace, const std::vector<int32_t>& launch);
std::vector<HostOutlier> hostOutliers(const Trace& trace);

} // namespace sightline
