// libsightline_collector.so: loaded with LD_PRELOAD (what `sightline run` sets) or as a CUDA
// injection library (CUDA_INJECTION64_PATH); both paths share one start. Configuration comes
// from the environment (docs/collector.md). It never throws or aborts: every failure is one
// "sightline: ..." line on stderr and the job runs on with less recorded.
#include "control_server.h"
#include "cupti_session.h"
#include "hw_sampler.h"
#include "launch_hooks.h"
#include "recorder.h"
#include "sightline/activities.h"
#include "sightline/collector_api.h"
#include "sightline/step_names.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sightline::collector {
namespace {

class FileSink final : public ChunkSink {
public:
    explicit FileSink(int fd) : m_fd(fd) {}
    ~FileSink() override { ::close(m_fd); }
    bool write(const void* data, size_t size) override {
        const char* p = static_cast<const char*>(data);
        while (size > 0) {
            const ssize_t n = ::write(m_fd, p, size);
            if (n < 0) {
                if (errno == EINTR) continue;
                return false;
            }
            p += n;
            size -= size_t(n);
        }
        return true;
    }

private:
    int m_fd;
};

std::once_flag g_start_once;
Recorder* g_recorder = nullptr; // never deleted: it is used until the very end of the process
std::atomic<bool> g_recording{false};
std::atomic<bool> g_stopped{false};
std::atomic<bool> g_bridge_loaded{false};
SightlineTorchRecordOpsFn g_record_ops = nullptr; // the bridge's switch for its op callback
// The capture's path. A function-local static: the collector starts from a shared-library
// constructor, possibly before this file's globals with dynamic initialisation are set up
// (which would then reset them).
std::string& capturePathRef() {
    static auto* p = new std::string();
    return *p;
}
int64_t g_start_ns = 0;

void logLine(const char* line) { std::fprintf(stderr, "sightline: %s\n", line); }

bool envFlag(const char* name, bool fallback);

// Registers or removes the bridge's op callback: ops cost nothing while nothing is recorded.
// SIGHTLINE_OPS=0 keeps ops out of every window (steps are still counted): to measure the parts.
void setOps(bool on) {
    static const bool ops = envFlag("SIGHTLINE_OPS", true);
    if (g_record_ops && (ops || !on) && g_record_ops(on ? 1 : 0) != 0) logLine("PyTorch ops are not recorded in this window");
}


int envInt(const char* name, int fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::atoi(v) : fallback;
}

bool envFlag(const char* name, bool fallback) {
    const char* v = std::getenv(name);
    if (!v || !*v) return fallback;
    return std::strcmp(v, "0") != 0 && std::strcmp(v, "false") != 0 && std::strcmp(v, "off") != 0;
}

// The capture's path: SIGHTLINE_OUTPUT is a directory; the file is named by host, pid and rank.
std::string capturePath() {
    std::string dir = std::getenv("SIGHTLINE_OUTPUT") ? std::getenv("SIGHTLINE_OUTPUT") : ".";
    if (dir.empty()) dir = ".";
    mkdir(dir.c_str(), 0755);
    char host[64] = {};
    gethostname(host, sizeof host - 1);
    std::string name = std::string("sightline-") + host + "-" + std::to_string(getpid());
    if (const char* rank = std::getenv("RANK"); rank && *rank) name += std::string("-rank") + rank;
    return dir + "/" + name + ".slcap";
}

// ---- the table offered to the libtorch bridge ----
int apiEnabled() { return g_recording.load(std::memory_order_relaxed) ? 1 : 0; }
uint32_t apiIntern(const char* text, size_t n) noexcept {
    try {
        return g_recorder ? g_recorder->intern(std::string_view(text, n)) : 0;
    } catch (...) {
        return 0;
    }
}
void apiRecordOp(const capture::OpRecord* op) noexcept {
    if (!g_recorder || !g_recording.load(std::memory_order_relaxed)) return;
    g_recorder->recordOp(*op);
}
void apiRecordCollective(const capture::CollectiveRecord* c) noexcept {
    if (!g_recorder || !g_recording.load(std::memory_order_relaxed)) return;
    g_recorder->emit(*c);
}
void apiPush(uint64_t id) { cuptiSession().pushCorrelation(id); }
void apiPop() { cuptiSession().popCorrelation(); }
uint64_t apiNow() { return realtimeNs(); }

// ---- counting the job's launch calls where CUPTI records no API calls (launch_hooks.h) ----
std::atomic<bool> g_count_launches{false};
void emitLaunch(const capture::LaunchRecord& r) {
    if (g_recorder && g_recording.load(std::memory_order_relaxed)) g_recorder->emit(r);
}
uint32_t internLaunchName(std::string_view text) {
    try {
        return g_recorder ? g_recorder->intern(text) : 0;
    } catch (...) {
        return 0;
    }
}
const LaunchSink kLaunchSink{emitLaunch, internLaunchName};

// CUPTI's recording and the launch counting that stands in for its API calls, on or off together.
void setGpuRecording(bool on) {
    cuptiSession().setRecording(on);
    hwSampler().setRecording(on);
    if (!g_count_launches) return;
    setLaunchCounting(on, kLaunchSink);
    if (!on && std::getenv("SIGHTLINE_DEBUG")) logLine(launchCountSummary().c_str());
}

// ---- step windows (SIGHTLINE_STEPS=A:B records steps A to B, counting from 1) ----
// Steps are counted by the same convention the analyzer uses: ProfilerStep#N or ranges named
// step / train_step / training_step / sightline.step*; if a job has none of those, by
// Optimizer.step#... ranges. Counting as the job runs, the collector cannot know that step ranges
// will come: it counts optimizer steps until the first step range begins, and from then on step
// ranges alone (a job whose warm-up carries only optimizer ranges).
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
// it is done, and CUPTI detached, by a short-lived thread of the collector's own (signals
// blocked), not the job's.
void drainSoon() {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    try {
        std::thread([] {
            cuptiSession().drain(std::chrono::milliseconds(200));
            cuptiSession().detach(std::chrono::seconds(1));
        }).detach();
    } catch (...) { // no thread to be had: the records come with the capture's end instead
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void applyWindow() {
    if (!g_window.active || g_stopped) return; // checked before locking: a forked child stops here
    std::lock_guard<std::mutex> lock(g_window_mutex);
    if (g_stopped || !g_window.active) return; // again under the lock: attachClose may have ended it
    const uint64_t done = g_window.primary_seen ? g_window.primary.load() : g_window.optimizer.load();
    const bool on = done + 1 >= g_window.first && done + 1 <= g_window.last;
    if (on == g_recording.load()) return;
    (on ? g_window.began_ns : g_window.ended_ns) = realtimeNs();
    g_recording = on;
    setOps(on);
    setGpuRecording(on);
    if (!on && done + 1 > g_window.last && !g_window.finished.exchange(true)) {
        std::string line = "step window " + std::to_string(g_window.first) + ":" + std::to_string(g_window.last) + " recorded";
        logLine(line.c_str());
        if (g_recorder) g_recorder->flush();
        drainSoon();
    }
}

void apiUserRangeBegin(const char* name, size_t n) noexcept {
    if (g_window.primary_seen.load(std::memory_order_relaxed) || g_stopped) return;
    const std::string_view s(name, n);
    if (!step_names::isProfilerStep(s) && !step_names::isStepRange(s)) return;
    g_window.primary_seen = true;
    try {
        applyWindow(); // a window opened by optimizer steps so far is judged by step ranges now
    } catch (...) {
    }
}

void apiUserRangeEnd(const char* name, size_t n) noexcept {
    if (!g_window.active || g_stopped) return;
    const std::string_view s(name, n);
    if (step_names::isProfilerStep(s) || step_names::isStepRange(s)) {
        ++g_window.primary;
        g_window.primary_seen = true; // one begun before the bridge was there
    }
    else if (step_names::isOptimizerStep(s))
        ++g_window.optimizer;
    else
        return;
    try {
        applyWindow();
    } catch (...) {
    }
}

SightlineCollectorApi g_table{kSightlineCollectorApiVersion, 0, apiEnabled, apiIntern, apiRecordOp, apiPush, apiPop, apiNow, logLine,
                              apiUserRangeEnd, apiRecordCollective, apiUserRangeBegin, 0};

// Ops carry CUPTI external correlation ids only when asked (SIGHTLINE_LINK=correlation). CUPTI
// writes those ids with its records of API calls only (on the H200, kernels alone with a push
// around every op gave 0 linked of 18,444 GPU activities), so they cannot stand in for launch
// calls that are not recorded: such kernels stay unlinked, and the job's stderr says so.
int correlateOps() {
    const char* link = std::getenv("SIGHTLINE_LINK");
    return link && std::strcmp(link, "correlation") == 0 ? 1 : 0;
}

void sayWhatStaysUnlinked(const CuptiOptions& o, bool countable) {
    if (!o.kernels && !o.memcpy && !o.memset) return;
    if (!o.runtime && !o.driver && g_count_launches)
        logLine("no CUDA API calls recorded (--activities all records them): GPU activities are linked to ops by counting the job's "
                "launch, copy and set calls");
    else if (!o.runtime && !o.driver)
        logLine(countable
                    ? "GPU activities will not be linked to ops: neither runtime nor driver API calls are recorded"
                    : "GPU activities will not be linked to ops: neither runtime nor driver API calls are recorded, and "
                      "the job's launch calls cannot be counted (the collector was not preloaded, or SIGHTLINE_LAUNCH_HOOKS=0)");
    else if (!o.driver)
        logLine("kernels launched through the CUDA driver API (cuBLAS, Triton) will not be linked to ops: driver calls are not recorded");
    else if (!o.runtime)
        logLine("GPU work launched through the CUDA runtime API will not be linked to ops: runtime calls are not recorded");
}

std::string bridgePath() {
    if (const char* p = std::getenv("SIGHTLINE_TORCH_BRIDGE"); p && *p) return p;
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&bridgePath), &info) && info.dli_fname) {
        std::string self = info.dli_fname;
        const size_t slash = self.rfind('/');
        const std::string dir = slash == std::string::npos ? "." : self.substr(0, slash);
        for (const char* rel : {"/libsightline_torch.so", "/torch/libsightline_torch.so"}) {
            const std::string candidate = dir + rel;
            if (access(candidate.c_str(), R_OK) == 0) return candidate;
        }
    }
    return {};
}

// Once libtorch is in the process, load the bridge that records its ops.
void maybeLoadTorchBridge() {
    if (g_bridge_loaded.load() || !g_recorder || !envFlag("SIGHTLINE_TORCH", true)) return;
    void* torch = dlopen("libtorch_cpu.so", RTLD_LAZY | RTLD_NOLOAD);
    if (!torch) return;
    dlclose(torch);
    if (g_bridge_loaded.exchange(true)) return;
    const std::string path = bridgePath();
    if (path.empty()) {
        logLine("libtorch is loaded but libsightline_torch.so was not found (set SIGHTLINE_TORCH_BRIDGE); recording without PyTorch ops");
        return;
    }
    void* bridge = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!bridge) {
        std::string why = std::string("cannot load the PyTorch op bridge: ") + dlerror() + "; recording without PyTorch ops";
        logLine(why.c_str());
        return;
    }
    auto init = reinterpret_cast<SightlineTorchInitFn>(dlsym(bridge, "sightline_torch_init"));
    auto recordOps = reinterpret_cast<SightlineTorchRecordOpsFn>(dlsym(bridge, "sightline_torch_record_ops"));
    if (!init || !recordOps || init(&g_table) != 0) {
        logLine("the PyTorch op bridge did not start; recording without PyTorch ops");
        return;
    }
    g_record_ops = recordOps;
    if (g_recording) setOps(true);
}

void stopCollector() {
    stopControlServer();
    if (g_stopped.exchange(true) || !g_recorder) return;
    g_recording = false;
    if (g_count_launches && launchesCounted() && std::getenv("SIGHTLINE_DEBUG")) logLine(launchCountSummary().c_str());
    try {
        hwSampler().stop(std::chrono::seconds(2)); // its last samples, before the capture closes
        cuptiSession().stop();
        g_recorder->close();
        // A process that recorded nothing (a shell, `dirname`, a tool the job ran with the
        // preload inherited) leaves no capture behind.
        if (g_recorder->eventsRecorded() == 0) ::unlink(capturePathRef().c_str());
    } catch (...) {
        logLine("the capture could not be finished (out of memory?)");
    }
}

// SIGTERM: the handler only posts a semaphore (async-signal-safe); a thread with every signal
// blocked flushes the capture, then lets the job die of the signal as it would have. SIGINT is left
// alone: Python turns it into KeyboardInterrupt only while it is at its default, and the exit
// handler covers a job that ends that way.
sem_t g_signal_sem;
volatile sig_atomic_t g_signal_number = 0;

void onSignal(int sig) {
    if (g_signal_number == 0) {
        g_signal_number = sig;
        sem_post(&g_signal_sem);
    }
}

// Runs `fn` on a new thread with every signal blocked (so no signal handler runs on it).
template <typename F>
void startQuietThread(F fn) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    try {
        std::thread(fn).detach();
    } catch (...) {
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void installSignalFlush(int sig) {
    struct sigaction old{};
    if (sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL)
        return; // the job handles it itself
    if (sem_init(&g_signal_sem, 0, 0) != 0)
        return;
    startQuietThread([] {
        while (sem_wait(&g_signal_sem) != 0) {}
        const int received = g_signal_number;
        stopCollector();
        std::signal(received, SIG_DFL);
        kill(getpid(), received);
    });
    struct sigaction sa{};
    sa.sa_handler = onSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
}

// ---- hardware sampling (--hw; hw_sampler.h) ----
// The device to sample when no CUDA context was created while CUPTI listened (a window attached
// to a running job): SIGHTLINE_HW_DEVICE, else LOCAL_RANK (one process per GPU), else 0.
int fallbackHwDevice() {
    for (const char* name : {"SIGHTLINE_HW_DEVICE", "LOCAL_RANK"})
        if (const char* v = std::getenv(name); v && *v) return std::atoi(v);
    return 0;
}

// Starts the sampler once (later windows reuse it: its interval is the first one asked for).
void startHwSampler(uint64_t interval_ns, bool attached) {
    static std::once_flag once;
    std::call_once(once, [&] {
        HwOptions h;
        h.interval_ns = interval_ns;
        h.log = logLine;
        cuptiSession().keepAttached();
        hwSampler().start(*g_recorder, h, CuptiSession::libraryHandle());
        CuptiSession::onContextDevice([](int device) { hwSampler().setDevice(device); });
        if (attached) hwSampler().setDevice(fallbackHwDevice()); // its context exists already
    });
}

// ---- attach windows (dormant mode) ----
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

bool attachOpen(const control::WindowRequest& w, std::string& error) {
    std::lock_guard<std::mutex> lock(g_attach.mutex);
    if (g_attach.window_open) {
        error = "busy";
        return false;
    }
    if (g_stopped || !g_recorder) {
        error = "the collector has stopped";
        return false;
    }
    if (!g_attach.cupti_started && g_attach.cuda_ok) {
        std::string why;
        g_attach.cupti_started = cuptiSession().start(*g_recorder, g_attach.options, false, why);
        if (!g_attach.cupti_started) {
            g_attach.cuda_ok = false;
            g_count_launches = false;
            why += "; recording CPU ops only";
            logLine(why.c_str());
        }
    }
    g_table.record_shapes = w.shapes ? 1 : 0;
    if (w.hw_interval_us && g_attach.cupti_started) startHwSampler(uint64_t(w.hw_interval_us) * 1000, true);
    g_attach.window_open = true;
    g_attach.begin_ns = realtimeNs();
    g_attach.ops_at_open = g_recorder->opsRecorded();
    g_attach.events_at_open = g_recorder->eventsRecorded();
    if (w.steps) {
        std::lock_guard<std::mutex> wl(g_window_mutex);
        // The window starts at the next step boundary, so that it holds whole steps only: a step in
        // progress when the request came is counted (step 1) but not recorded.
        g_window.primary = 0;
        g_window.optimizer = 0;
        g_window.first = 2;
        g_window.last = uint64_t(w.steps) + 1;
        g_window.finished = false;
        g_window.began_ns = 0;
        g_window.ended_ns = 0;
        g_window.active = true;
    } else {
        g_recording = true;
        setOps(true);
        setGpuRecording(true);
    }
    g_attach.steps = w.steps != 0;
    if (w.steps) applyWindow();
    return true;
}

bool attachStepsDone() { return g_window.finished.load(); }

control::WindowReplyBody attachClose() {
    std::lock_guard<std::mutex> lock(g_attach.mutex);
    {
        std::lock_guard<std::mutex> wl(g_window_mutex);
        g_window.active = false;
    }
    const uint64_t now = realtimeNs();
    if (g_recording.exchange(false)) {
        setOps(false);
        setGpuRecording(false);
    }
    cuptiSession().drain(std::chrono::milliseconds(200)); // the window's last GPU work, with its times
    cuptiSession().detach(std::chrono::seconds(1));         // and the job back to its cost without CUPTI
    control::WindowReplyBody r{};
    // A step window's extent is that of its steps; a timed one's, from the request to now.
    const uint64_t began = g_attach.steps ? g_window.began_ns.load() : 0, ended = g_attach.steps ? g_window.ended_ns.load() : 0;
    r.begin_ns = int64_t(began ? began : g_attach.begin_ns);
    r.end_ns = int64_t(ended ? ended : now);
    if (g_recorder) {
        g_recorder->flush();
        r.ops = g_recorder->opsRecorded() - g_attach.ops_at_open;
        r.gpu_records = g_recorder->eventsRecorded() - g_attach.events_at_open - r.ops;
    }
    std::strncpy(r.capture, capturePathRef().c_str(), sizeof r.capture - 1);
    g_attach.window_open = false;
    ++g_attach.windows_done;
    return r;
}

control::StatusReplyBody attachStatus() {
    std::lock_guard<std::mutex> lock(g_attach.mutex);
    control::StatusReplyBody s{};
    s.pid = getpid();
    s.start_realtime_ns = g_start_ns;
    s.window_open = g_attach.window_open;
    s.windows_done = g_attach.windows_done;
    s.cuda_available = g_attach.cuda_ok;
    return s;
}

void forkChild() {
    // A forked child (a DataLoader worker) shares the parent's file and rings: it records nothing.
    g_recording = false;
    g_stopped = true;
    if (g_recorder) g_recorder->abandonAfterFork();
}

void startCollector() {
    if (!envFlag("SIGHTLINE_ENABLE", true)) return;
    g_table.record_shapes = envFlag("SIGHTLINE_SHAPES", false) ? 1 : 0;
    capturePathRef() = capturePath();
    const std::string& g_path = capturePathRef();
    const int fd = ::open(g_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        std::string why = "cannot create " + g_path + ": " + std::strerror(errno) + "; the job runs without recording";
        logLine(why.c_str());
        return;
    }
    capture::FileHeader h{};
    std::memcpy(h.magic, capture::kFileMagic, sizeof h.magic);
    h.version = capture::kFormatVersion;
    h.header_size = sizeof h;
    h.pid = getpid();
    h.start_realtime_ns = int64_t(realtimeNs());
    g_start_ns = h.start_realtime_ns;
    h.rank = envInt("RANK", -1);
    h.world_size = envInt("WORLD_SIZE", -1);
    h.local_rank = envInt("LOCAL_RANK", -1);
    gethostname(h.host, sizeof h.host - 1);
    g_recorder = new Recorder(std::make_unique<FileSink>(fd), h);

    g_table.correlate_ops = correlateOps();
    const bool cuda = envFlag("SIGHTLINE_CUDA", true), countable = launchCountingAvailable();
    CuptiOptions o; // every kind
    const char* acts = std::getenv("SIGHTLINE_ACTIVITIES");
    const std::string_view a = acts ? acts : "";
    if (a.empty() || a == "default") {
        // The light mode where launches can be counted (preloaded, on x86-64): CUPTI's hooks on
        // every API call are most of its cost, and counting links the kernels as well (docs/collector.md,
        // "Linking without API calls"). CUPTI's overhead records would disturb its numbering.
        if (countable && !g_table.correlate_ops) o.runtime = o.driver = o.sync = o.overhead = false;
    } else if (a != "all") {
        bool* const kinds[] = {&o.kernels, &o.memcpy, &o.memset, &o.runtime, &o.driver, &o.sync, &o.nvtx, &o.overhead};
        static_assert(std::size(kinds) == capture::kActivityWordCount, "one option for each word of kActivityWords");
        for (size_t i = 0; i < capture::kActivityWordCount; ++i) *kinds[i] = a.find(capture::kActivityWords[i]) != a.npos;
    }
    if (o.nvtx && !std::getenv("NVTX_INJECTION64_PATH")) {
        // CUPTI records NVTX ranges only when NVTX loads it as its injection library.
        const std::string cupti = CuptiSession::findLibrary();
        if (!cupti.empty()) setenv("NVTX_INJECTION64_PATH", cupti.c_str(), 0);
    }
    // Without API calls, kernels are linked by counting launches (not with correlation ids pushed).
    g_count_launches = (o.kernels || o.memcpy || o.memset) && !o.runtime && !o.driver && !g_table.correlate_ops && cuda && countable;
    if (cuda) sayWhatStaysUnlinked(o, countable);
    // Finalising CUPTI between windows would end a hardware sampling session too.
    const bool hw = envFlag("SIGHTLINE_HW", false);
    o.detach = !g_table.correlate_ops && !hw && envFlag("SIGHTLINE_CUPTI_DETACH", true);
    o.log = logLine;
    std::string why;
    CuptiSession::onFirstContext([] { std::atexit(stopCollector); });
    const bool dormant = envFlag("SIGHTLINE_DORMANT", false);
    if (dormant) {
        // Nothing recorded and CUPTI left alone until `sightline attach` opens a window.
        g_attach.options = o;
        g_attach.cuda_ok = cuda;
        ControlHooks hooks{attachOpen, attachStepsDone, attachClose, attachStatus};
        if (!startControlServer(std::move(hooks), why)) logLine(why.c_str());
    } else if (cuda && !cuptiSession().start(*g_recorder, o, true, why)) {
        why += "; recording CPU ops only";
        logLine(why.c_str());
        g_count_launches = false;
    } else if (g_count_launches) {
        setLaunchCounting(true, kLaunchSink); // recording from the start, as CUPTI is
    }
    g_recording = !dormant;
    if (hw && cuda && !dormant && cuptiSession().attached()) {
        startHwSampler(uint64_t(std::max(1, envInt("SIGHTLINE_HW_INTERVAL_US", 1000))) * 1000, false);
        hwSampler().setRecording(true); // a step window turns it off and on again (setGpuRecording)
    } else if (hw && !dormant) {
        logLine("hardware counters not recorded: CUPTI is not recording GPU activity in this process");
    }
    if (const char* steps = std::getenv("SIGHTLINE_STEPS"); steps && *steps && !dormant) {
        unsigned long long a = 0, b = 0;
        if (std::sscanf(steps, "%llu:%llu", &a, &b) == 2 && a >= 1 && b >= a) {
            g_window.active = true;
            g_window.first = a;
            g_window.last = b;
            applyWindow();
        } else {
            logLine("SIGHTLINE_STEPS must be A:B with 1 <= A <= B; recording every step");
        }
    }
    pthread_atfork(nullptr, nullptr, forkChild);
    std::atexit(stopCollector);
    installSignalFlush(SIGTERM);
    // libtorch linked into the program is loaded but maybe not initialised yet while shared-library
    // constructors run: the bridge is loaded from __libc_start_main (below). A Python job loads
    // torch later with dlopen: a watcher thread looks for it every 50 ms. (Interposing dlopen
    // would change the caller dlopen sees, and libtorch's own dlopen calls rely on their RUNPATH.)
    startQuietThread([] {
        while (!g_stopped.load() && !g_bridge_loaded.load()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            try {
                maybeLoadTorchBridge();
            } catch (...) {
                return;
            }
        }
    });
}

void ensureStarted() {
    std::call_once(g_start_once, [] {
        try {
            startCollector();
        } catch (const std::exception& e) {
            std::fprintf(stderr, "sightline: collector failed to start (%s); the job runs without recording\n", e.what());
        } catch (...) {
            std::fprintf(stderr, "sightline: collector failed to start; the job runs without recording\n");
        }
    });
}

__attribute__((constructor)) void onLoad() {
    // Under LD_PRELOAD every process of a job loads the collector, including tools the job runs
    // (shells, compilers); SIGHTLINE_OUTPUT marks the processes `sightline run` meant.
    if (std::getenv("SIGHTLINE_OUTPUT"))
        ensureStarted();
}

} // namespace
} // namespace sightline::collector

extern "C" {

// CUDA_INJECTION64_PATH entry point: CUDA calls it when it initialises.
__attribute__((visibility("default"))) int InitializeInjection(void) {
    sightline::collector::ensureStarted();
    sightline::collector::maybeLoadTorchBridge();
    return 1;
}

// Runs after every shared library's constructors and before main(): the moment a program that
// links libtorch can have its ops recorded from the start.
__attribute__((visibility("default"))) int __libc_start_main(int (*main_fn)(int, char**, char**), int argc, char** argv,
                                                             void (*init)(), void (*fini)(), void (*rtld_fini)(),
                                                             void* stack_end) {
    using Fn = int (*)(int (*)(int, char**, char**), int, char**, void (*)(), void (*)(), void (*)(), void*);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "__libc_start_main"));
    sightline::collector::maybeLoadTorchBridge();
    return real(main_fn, argc, argv, init, fini, rtld_fini, stack_end);
}

} // extern "C"
