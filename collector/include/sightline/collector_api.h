#pragma once
// The C interface the collector offers to its libtorch bridge (collector/torch/). The collector
// loads the bridge once the process has loaded libtorch and calls its init function with this
// table, then turns op recording on and off through the bridge's second export; nothing else
// crosses between the two libraries.
#include <cstddef>
#include <cstdint>

#include "sightline/capture_format.h"

extern "C" {

struct SightlineCollectorApi {
    uint32_t version;     // kSightlineCollectorApiVersion
    int record_shapes;    // 1 when input shapes and dtypes are wanted (read when
                          // op recording is turned on)
    int (*enabled)(void); // cheap: is a capture window open?
    uint32_t (*intern)(const char* text, size_t length);
    void (*record_op)(const sightline::capture::OpRecord* op);
    void (*push_correlation)(uint64_t external_id);
    void (*pop_correlation)(void);
    uint64_t (*now_ns)(void);      // the clock op times use (CUPTI's, CLOCK_REALTIME)
    void (*log)(const char* line); // one line on stderr, prefixed "sightline: "
    // A user range (record_function, ProfilerStep#N, Optimizer.step#...) ended: the collector
    // counts steps with it to open and close a step window (SIGHTLINE_STEPS).
    void (*user_range_end)(const char* name, size_t length);
    // A collective's metadata (c10d's record_param_comms op), recorded like an op.
    void (*record_collective)(const sightline::capture::CollectiveRecord* collective);
    // A user range begins (before it is recorded): the first step range a job opens tells the
    // collector to count steps by step ranges from then on.
    void (*user_range_begin)(const char* name, size_t length);
    // 1: push each op's id as a CUPTI external correlation id around it (push_correlation /
    // pop_correlation). 0 (the default when runtime and driver API calls are recorded): no push;
    // the importer links each kernel to the innermost op around its launch call on the same
    // thread, which needs only the times already recorded. Read when op recording is turned on.
    int correlate_ops;
};

inline constexpr uint32_t kSightlineCollectorApiVersion = 6;

// Exported by libsightline_torch.so as sightline_torch_init; returns 0 on success. It follows user
// ranges only (to count steps), which costs nothing on ordinary ops.
typedef int (*SightlineTorchInitFn)(const SightlineCollectorApi* api);
// Exported as sightline_torch_record_ops: 1 registers the op callback (with input shapes if
// record_shapes is set), 0 removes it, so that outside a capture window ops pay nothing. Returns 0
// on success.
typedef int (*SightlineTorchRecordOpsFn)(int on);
}
