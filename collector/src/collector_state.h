#pragma once
// The collector's state, one object shared by its parts: start and stop (collector_main.cpp),
// step windows (step_window.cpp), attach windows (attach_window.cpp) and the op bridge
// (torch_bridge_loader.cpp). It is constant-initialised: the collector may start from a
// shared-library constructor, before globals with dynamic initialisation are set up.
#include "collector_config.h"
#include "quiet_thread.h"
#include "recorder.h"
#include "sightline/collector_api.h"

#include <atomic>
#include <csignal>
#include <mutex>
#include <string>
#include <thread>

#include <pthread.h>

namespace sightline::collector {

struct CollectorState {
    const CollectorConfig* config = nullptr; // set once at start, never deleted
    Recorder* recorder = nullptr;            // never deleted: it is used until the very end of the process
    const std::string* capture_path = nullptr;
    int64_t start_ns = 0;
    std::atomic<bool> recording{false};
    std::atomic<bool> stopped{false};
    std::atomic<bool> count_launches{false}; // launch calls counted where CUPTI records no API calls
    std::atomic<bool> bridge_loaded{false};
    SightlineTorchRecordOpsFn record_ops = nullptr; // the bridge's switch for its op callback
    SightlineCollectorApi table{};                  // offered to the bridge (filled at start)
    std::once_flag hw_started;                      // the hardware sampler is started once
};

extern CollectorState g_collector;

// One line on the job's stderr, prefixed "sightline: ".
void logLine(const char* line);
// Registers or removes the bridge's op callback: ops cost nothing while nothing is recorded.
void setOps(bool on);
// CUPTI's recording, the hardware sampler's and the launch counting that stands in for CUPTI's
// API calls, on or off together.
void setGpuRecording(bool on);
// Starts the hardware sampler (--hw; hw_sampler.h) once: later windows reuse it, with the first
// interval asked for. `attached`: a window of a running job, whose CUDA context exists already.
void startHwSampler(uint64_t interval_ns, bool attached);

} // namespace sightline::collector
