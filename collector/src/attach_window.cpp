#include "attach_window.h"

#include "collector_state.h"
#include "control_server.h"
#include "step_window.h"

#include <chrono>
#include <cstring>
#include <mutex>

#include <unistd.h>

namespace sightline::collector {

namespace {

struct AttachState {
    std::mutex mutex;
    bool window_open = false;
    bool cupti_started = false;
    bool cuda_ok = true;
    uint32_t windows_done = 0;
    uint64_t begin_ns = 0;
    uint64_t ops_at_open = 0, events_at_open = 0;
    bool steps = false; // the open window counts steps
    CuptiOptions options;
};
AttachState g_attach;

// CUPTI is started by the first window only; where it cannot be, windows record CPU ops only.
void startCuptiOnce() {
    if (g_attach.cupti_started || !g_attach.cuda_ok) return;
    std::string why;
    g_attach.cupti_started = cuptiSession().start(*g_collector.recorder, g_attach.options, false, why);
    if (!g_attach.cupti_started) {
        g_attach.cuda_ok = false;
        g_collector.count_launches = false;
        why += "; recording CPU ops only";
        logLine(why.c_str());
    }
}

bool attachOpen(const control::WindowRequest& w, std::string& error) {
    CollectorState& c = g_collector;
    std::lock_guard<std::mutex> lock(g_attach.mutex);
    if (g_attach.window_open) {
        error = "busy";
        return false;
    }
    if (c.stopped || !c.recorder) {
        error = "the collector has stopped";
        return false;
    }
    startCuptiOnce();
    c.table.record_shapes = w.shapes ? 1 : 0;
    if (w.hw_interval_us && g_attach.cupti_started) startHwSampler(uint64_t(w.hw_interval_us) * 1000, true);
    g_attach.window_open = true;
    g_attach.begin_ns = realtimeNs();
    g_attach.ops_at_open = c.recorder->opsRecorded();
    g_attach.events_at_open = c.recorder->eventsRecorded();
    g_attach.steps = w.steps != 0;
    if (w.steps) {
        startAttachStepWindow(uint64_t(w.steps));
    } else {
        c.recording = true;
        setOps(true);
        setGpuRecording(true);
    }
    return true;
}

control::WindowReplyBody attachClose() {
    CollectorState& c = g_collector;
    std::lock_guard<std::mutex> lock(g_attach.mutex);
    const StepWindowExtent steps = endStepWindow();
    const uint64_t now = realtimeNs();
    if (c.recording.exchange(false)) {
        setOps(false);
        setGpuRecording(false);
    }
    cuptiSession().drain(std::chrono::milliseconds(200)); // the window's last GPU work, with its times
    cuptiSession().detach(std::chrono::seconds(1));       // and the job back to its cost without CUPTI
    control::WindowReplyBody r{};
    // A step window's extent is that of its steps; a timed one's, from the request to now.
    const uint64_t began = g_attach.steps ? steps.began_ns : 0, ended = g_attach.steps ? steps.ended_ns : 0;
    r.begin_ns = int64_t(began ? began : g_attach.begin_ns);
    r.end_ns = int64_t(ended ? ended : now);
    if (c.recorder) {
        c.recorder->flush();
        r.ops = c.recorder->opsRecorded() - g_attach.ops_at_open;
        r.gpu_records = c.recorder->eventsRecorded() - g_attach.events_at_open - r.ops;
    }
    if (c.capture_path) std::strncpy(r.capture, c.capture_path->c_str(), sizeof r.capture - 1);
    g_attach.window_open = false;
    ++g_attach.windows_done;
    return r;
}

control::StatusReplyBody attachStatus() {
    std::lock_guard<std::mutex> lock(g_attach.mutex);
    control::StatusReplyBody s{};
    s.pid = getpid();
    s.start_realtime_ns = g_collector.start_ns;
    s.window_open = g_attach.window_open;
    s.windows_done = g_attach.windows_done;
    s.cuda_available = g_attach.cuda_ok;
    return s;
}

} // namespace

bool startDormant(const CuptiOptions& options, bool cuda, std::string& why) {
    g_attach.options = options;
    g_attach.cuda_ok = cuda;
    ControlHooks hooks{attachOpen, stepWindowFinished, attachClose, attachStatus};
    return startControlServer(std::move(hooks), why);
}

} // namespace sightline::collector
