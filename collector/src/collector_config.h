#pragma once
// The collector's settings, read from the environment once when it starts (docs/collector.md
// lists the variables). Built from any lookup function, so that tests can make one without
// touching the process's environment. (The launch hooks read SIGHTLINE_LAUNCH_HOOKS themselves:
// they may be asked before the collector starts.)
#include "cupti_session.h"

#include <cstdint>
#include <string>

namespace sightline::collector {

struct CollectorConfig {
    bool enabled = true;          // SIGHTLINE_ENABLE
    std::string output_dir = "."; // SIGHTLINE_OUTPUT (a directory)
    std::string rank_name;        // RANK as given, for the capture's file name
    int rank = -1, world_size = -1, local_rank = -1;
    bool shapes = false;             // SIGHTLINE_SHAPES: record op input shapes
    bool ops = true;                 // SIGHTLINE_OPS=0: no op in any window (steps still counted)
    bool torch = true;               // SIGHTLINE_TORCH=0: never load the op bridge
    std::string torch_bridge;        // SIGHTLINE_TORCH_BRIDGE: the bridge's path ("" = beside the collector)
    bool cuda = true;                // SIGHTLINE_CUDA=0: CPU ops only
    bool correlate_ops = false;      // SIGHTLINE_LINK=correlation: ops push CUPTI external ids
    std::string activities;          // SIGHTLINE_ACTIVITIES ("" or "default", "all", or a list of words)
    bool nvtx_injection_set = false; // NVTX_INJECTION64_PATH is set already
    bool cupti_detach = true;        // SIGHTLINE_CUPTI_DETACH
    bool dormant = false;            // SIGHTLINE_DORMANT: record only windows opened by sightline attach
    bool debug = false;              // SIGHTLINE_DEBUG is set
    bool hw = false;                 // SIGHTLINE_HW: sample the GPU's hardware counters (docs/hardware.md)
    uint64_t hw_interval_us = 1000;  // SIGHTLINE_HW_INTERVAL_US (at least 1)
    // The device sampled when no CUDA context was created while CUPTI listened (a window attached
    // to a running job): SIGHTLINE_HW_DEVICE, else LOCAL_RANK (one process per GPU), else 0.
    int hw_fallback_device = 0;
    // SIGHTLINE_STEPS=A:B: record steps A to B. steps_error when it is given but not A:B with 1 <= A <= B.
    bool steps_given = false, steps_error = false;
    uint64_t steps_first = 1, steps_last = UINT64_MAX;

    using Lookup = const char* (*)(const char* name, void* context);
    static CollectorConfig parse(Lookup lookup, void* context);
    static CollectorConfig fromEnvironment();
};

// The activity kinds CUPTI records: every kind, the light mode by default (no API calls, sync or
// overhead records) where launches can be counted and ops do not push correlation ids, or the
// kinds SIGHTLINE_ACTIVITIES names. log and detach are left to the caller.
CuptiOptions activityOptions(const CollectorConfig& config, bool launches_countable);

} // namespace sightline::collector
