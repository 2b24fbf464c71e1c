#pragma once
// Hardware counters sampled with CUPTI's PM sampling API (`sightline run --hw`; docs/hardware.md):
// SM activity, warps active, tensor-pipe activity, DRAM throughput and bytes, on the GPU of the
// job's first CUDA context, every `interval_ns`, into the capture as HwSample records. Everything
// runs on a thread of the collector's own; where counters cannot be read (no permission, another
// profiler holding them, an unsupported GPU) it says so in one line, writes an HwStatus record
// saying why, and everything else is recorded as before. It never throws.
#include "recorder.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace sightline::collector {

struct HwOptions {
    uint64_t interval_ns = 1'000'000;
    void (*log)(const char* line) = nullptr;
};

// The counters asked for, in order of preference; all of them take one pass on Hopper (checked
// with CUPTI's host API for GH100). A GPU that rejects the set is sampled with the smaller one.
const std::vector<const char*>& hwMetrics();
const std::vector<const char*>& hwFallbackMetrics();

// How many passes CUPTI needs to sample `metrics` on `chip` (for example "GH100"), from its host
// API alone (no GPU needed); 0 with `why` set when CUPTI cannot say. For the tests.
size_t hwPassCount(void* cupti_lib, const char* chip, const std::vector<const char*>& metrics, std::string& why);

class HwSampler {
public:
    HwSampler();
    // Starts the sampler's thread. Sampling follows setRecording() once the first CUDA context
    // exists (setDevice()). `cupti_lib` is the loaded libcupti (dlopen handle).
    void start(Recorder& recorder, const HwOptions& options, void* cupti_lib);
    void setDevice(int device); // the device of the job's first CUDA context
    void setRecording(bool on); // a window opening or closing: sampling starts or stops
    // Stops sampling, hands over what was sampled and disables it; waits at most `wait` for the
    // thread (a CUPTI call that hangs is left behind, never waited for).
    void stop(std::chrono::milliseconds wait);

    // CUPTI's PM sampling entry points and what the sampler's thread shares with the collector
    // (hw_sampler.cpp).
    struct State;

private:
    State* m_state; // never freed: the sampler's thread may outlive a stop() that stopped waiting for it
};

HwSampler& hwSampler();

} // namespace sightline::collector
