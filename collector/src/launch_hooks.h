#pragma once
// Counting the job's own GPU-work calls (kernel launches, copies, sets, graph launches), and
// recording its host synchronisations beside them, so that kernels can be linked to ops (and
// synchronisations seen) without CUPTI's API-call hooks, which cost a launch-bound job
// about +35% of its step time where kernels, copies and sets alone cost a few percent
// (docs/collector.md, "Linking without API calls").
//
// The collector exports `dlsym` and wraps what the CUDA driver hands out through dlsym on
// libcuda and through cuGetProcAddress: that is how the CUDA runtime (dynamic or static, as in
// cuBLAS and NCCL) and Triton reach the driver. Each wrapper forwards at once unless counting is
// on; then the outermost counted call of a thread gets the next number and a LaunchRecord (a
// synchronisation gets a record without a number). Calls
// made by code that links libcuda directly are not seen (the reader finds the gap and says so).
#include "sightline/capture_format.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace sightline::collector {

struct LaunchSink {
    void (*emit)(const capture::LaunchRecord& record); // any thread; drops when not recording
    uint32_t (*intern)(std::string_view text);
};

// Whether the wrappers are in the call path: the collector was preloaded (LD_PRELOAD, as
// `sightline run` does), so its dlsym is the process's, on an architecture it has one for.
bool launchCountingAvailable();
// Turns counting on or off (a capture window's start and end). Off, every wrapper only forwards.
// Each time it is turned on, a new segment begins and the count starts again at 1.
void setLaunchCounting(bool on, const LaunchSink& sink);
// Calls counted in the current segment (the last number given).
uint64_t launchesCounted();
// One line for SIGHTLINE_DEBUG: calls counted in the current segment, kernels named and not.
std::string launchCountSummary();

} // namespace sightline::collector
