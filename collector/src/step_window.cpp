#include "step_window.h"

#include "collector_state.h"
#include "cupti_session.h"
#include "sightline/step_names.h"

#include <chrono>
#include <mutex>
#include <string>

namespace sightline::collector {

namespace {

struct StepWindow {
    std::atomic<bool> active{false}; // read on every user range's end, set by the control thread
    uint64_t first = 1, last = UINT64_MAX;
    std::atomic<uint64_t> primary{0}, optimizer{0};
    std::atomic<bool> primary_seen{false}; // a step range has begun in this process
    std::atomic<bool> finished{false};
    std::atomic<uint64_t> began_ns{0}, ended_ns{0}; // when recording turned on and off
};
StepWindow g_window;
std::mutex g_window_mutex;

// A step window's last GPU work may still run when it closes; its records are handed over once
// it is done, and CUPTI detached, by a short-lived thread of the collector's own, not the job's.
// With no thread to be had, the records come with the capture's end instead.
void drainSoon() {
    startQuietThread([] {
        cuptiSession().drain(std::chrono::milliseconds(200));
        cuptiSession().detach(std::chrono::seconds(1));
    });
}

void applyWindow() {
    CollectorState& c = g_collector;
    if (!g_window.active || c.stopped) return; // checked before locking: a forked child stops here
    std::lock_guard<std::mutex> lock(g_window_mutex);
    if (c.stopped || !g_window.active) return; // again under the lock: endStepWindow may have ended it
    const uint64_t done = g_window.primary_seen ? g_window.primary.load() : g_window.optimizer.load();
    const bool on = done + 1 >= g_window.first && done + 1 <= g_window.last;
    if (on == c.recording.load()) return;
    (on ? g_window.began_ns : g_window.ended_ns) = realtimeNs();
    c.recording = on;
    setOps(on);
    setGpuRecording(on);
    if (!on && done + 1 > g_window.last && !g_window.finished.exchange(true)) {
        std::string line = "step window " + std::to_string(g_window.first) + ":" + std::to_string(g_window.last) + " recorded";
        logLine(line.c_str());
        if (c.recorder) c.recorder->flush();
        drainSoon();
    }
}

} // namespace

void startStepWindow(uint64_t first, uint64_t last) {
    g_window.active = true;
    g_window.first = first;
    g_window.last = last;
    applyWindow();
}

void startAttachStepWindow(uint64_t steps) {
    {
        std::lock_guard<std::mutex> lock(g_window_mutex);
        // The window starts at the next step boundary, so that it holds whole steps only: a step in
        // progress when the request came is counted (step 1) but not recorded.
        g_window.primary = 0;
        g_window.optimizer = 0;
        g_window.first = 2;
        g_window.last = steps + 1;
        g_window.finished = false;
        g_window.began_ns = 0;
        g_window.ended_ns = 0;
        g_window.active = true;
    }
    applyWindow();
}

StepWindowExtent endStepWindow() {
    std::lock_guard<std::mutex> lock(g_window_mutex);
    g_window.active = false;
    return StepWindowExtent{g_window.began_ns.load(), g_window.ended_ns.load()};
}

bool stepWindowFinished() { return g_window.finished.load(); }

void onUserRangeBegin(const char* name, size_t n) noexcept {
    if (g_window.primary_seen.load(std::memory_order_relaxed) || g_collector.stopped) return;
    const std::string_view s(name, n);
    if (!step_names::isProfilerStep(s) && !step_names::isStepRange(s)) return;
    g_window.primary_seen = true;
    try {
        applyWindow(); // a window opened by optimizer steps so far is judged by step ranges now
    } catch (...) {
    }
}

void onUserRangeEnd(const char* name, size_t n) noexcept {
    if (!g_window.active || g_collector.stopped) return;
    const std::string_view s(name, n);
    if (step_names::isProfilerStep(s) || step_names::isStepRange(s)) {
        ++g_window.primary;
        g_window.primary_seen = true; // one begun before the bridge was there
    } else if (step_names::isOptimizerStep(s)) {
        ++g_window.optimizer;
    } else {
        return;
    }
    try {
        applyWindow();
    } catch (...) {
    }
}

} // namespace sightline::collector
