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
    // Finalise CUPTI after a window (detach()), so that the job returns to its cost without it.
    // Off while ops push external correlation ids: a push racing the finalisation would break CUPTI.
    bool detach = true;
    void (*log)(const char* line) = nullptr; // one line for the job's stderr
};

class CuptiSession {
public:
    CuptiSession();
    // Loads CUPTI and enables the activities; false (with `why` set) when it cannot.
    // Subscribes and sets up buffers; records at once when `record_now`, else from setRecording(true).
    bool start(Recorder& recorder, const CuptiOptions& options, bool record_now, std::string& why);
    // Forced flush of every buffer, dropped-record count, a clock reading. Safe to call twice.
    void stop();
    // Turns the recorded activity kinds on or off (a step window opening or closing), subscribing
    // again first if CUPTI was detached (a line on stderr if it cannot: CPU ops only then).
    void setRecording(bool on);
    // After recording stops: waits for the work launched before to finish on the GPU, then hands
    // every record over (a record still unfinished is counted as dropped). Not on the job's threads.
    void drain(std::chrono::milliseconds wait);
    // After a window's records are handed over: asks CUPTI to finalise on the job's next CUDA
    // runtime call and waits for it at most `wait`. The next setRecording(true) subscribes again.
    // Does nothing when the options say not to. Not on the job's threads.
    void detach(std::chrono::milliseconds wait);
    bool attached() const; // subscribed to CUPTI now (false once detached)
    void pushCorrelation(uint64_t id);
    void popCorrelation();
    uint64_t timestamp(); // CUPTI's clock (CLOCK_REALTIME ns by default), or the host's
    void writeClockRecord();
    // Called once, on CUPTI's callback, when the first CUDA context is created.
    static void onFirstContext(void (*fn)());
    // Called with the device of each CUDA context created from now on (the hardware sampler's).
    static void onContextDevice(void (*fn)(int device));
    // The loaded libcupti (a dlopen handle), null before start().
    static void* libraryHandle();
    // Never detach after a window from now on (a hardware sampling session would end with CUPTI).
    void keepAttached() { m_options.detach = false; }
    // The path of the libcupti that was loaded ("" if none).
    static std::string findLibrary();

    // CUPTI's entry points, the subscription, the buffer pool and the counters CUPTI's callbacks
    // share with the session (cupti_session.cpp).
    struct State;
    State& state() const { return *m_state; }

private:
    bool subscribe(std::string& why);

    std::atomic<bool> m_active{false};
    uint64_t m_dropped_before = 0; // CUPTI's drop counts of the sessions before a detach
    CuptiOptions m_options;
    State* m_state; // never freed, as the session
};

CuptiSession& cuptiSession();

} // namespace sightline::collector
