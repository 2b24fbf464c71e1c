#pragma once
// CUPTI, loaded at run time (dlopen of libcupti.so.13) so that a machine without it or without a
// GPU runs the job on with CPU ops only. Activity buffers come from a pre-allocated, pre-zeroed
// pool; completed buffers are decoded into capture records on CUPTI's thread.
#include "recorder.h"

#include <atomic>
#include <chrono>
#include <string>

namespace sightline::collector {

struct CuptiOptions {
    bool kernels = true, memcpy = true, memset = true, runtime = true, driver = true;
    bool sync = true, nvtx = true, overhead = true;
};

class CuptiSession {
public:
    // Loads CUPTI and enables the activities; false (with `why` set) when it cannot.
    // Subscribes and sets up buffers; records at once when `record_now`, else from setRecording(true).
    bool start(Recorder& recorder, const CuptiOptions& options, bool record_now, std::string& why);
    // Forced flush of every buffer, dropped-record count, a clock reading. Safe to call twice.
    void stop();
    // Turns the recorded activity kinds on or off (a step window opening or closing).
    void setRecording(bool on);
    // After recording stops: waits for the work launched before to finish on the GPU, then hands
    // every record over (a record still unfinished is counted as dropped). Not on the job's threads.
    void drain(std::chrono::milliseconds wait);
    void pushCorrelation(uint64_t id);
    void popCorrelation();
    uint64_t timestamp(); // CUPTI's clock (CLOCK_REALTIME ns by default), or the host's
    void writeClockRecord();
    // Called once, on CUPTI's callback, when the first CUDA context is created.
    static void onFirstContext(void (*fn)());
    // The path of the libcupti that was loaded ("" if none).
    static std::string findLibrary();

private:
    std::atomic<bool> m_active{false};
    CuptiOptions m_options;
    Recorder* m_recorder = nullptr;
};

CuptiSession& cuptiSession();

} // namespace sightline::collector
