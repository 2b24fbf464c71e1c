// libsightline_collector.so: loaded with LD_PRELOAD (what `sightline run` sets) or as a CUDA
// injection library (CUDA_INJECTION64_PATH); both paths share one start. Configuration comes
// from the environment (docs/collector.md), read once into a CollectorConfig. It never throws or
// aborts: every failure is one "sightline: ..." line on stderr and the job runs on with less
// recorded. This file starts and stops the collector and offers the bridge its table; step
// windows, attach windows and the bridge's loading have files of their own.
#include "attach_window.h"
#include "collector_config.h"
#include "collector_state.h"
#include "control_server.h"
#include "cupti_session.h"
#include "hw_sampler.h"
#include "launch_hooks.h"
#include "recorder.h"
#include "step_window.h"
#include "torch_bridge_loader.h"
#include "sightline/collector_api.h"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sightline::collector {

constinit CollectorState g_collector;

void logLine(const char* line) { std::fprintf(stderr, "sightline: %s\n", line); }

// SIGHTLINE_OPS=0 keeps ops out of every window (steps are still counted): to measure the parts.
void setOps(bool on) {
    const CollectorState& c = g_collector;
    const bool ops = !c.config || c.config->ops;
    if (c.record_ops && (ops || !on) && c.record_ops(on ? 1 : 0) != 0) logLine("PyTorch ops are not recorded in this window");
}

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

// The capture's path: SIGHTLINE_OUTPUT is a directory; the file is named by host, pid and rank.
std::string capturePath(const CollectorConfig& config) {
    const std::string& dir = config.output_dir;
    mkdir(dir.c_str(), 0755);
    char host[64] = {};
    gethostname(host, sizeof host - 1);
    std::string name = std::string("sightline-") + host + "-" + std::to_string(getpid());
    if (!config.rank_name.empty()) name += "-rank" + config.rank_name;
    return dir + "/" + name + ".slcap";
}

// ---- the table offered to the libtorch bridge ----
int apiEnabled() { return g_collector.recording.load(std::memory_order_relaxed) ? 1 : 0; }
uint32_t apiIntern(const char* text, size_t n) noexcept {
    try {
        return g_collector.recorder ? g_collector.recorder->intern(std::string_view(text, n)) : 0;
    } catch (...) {
        return 0;
    }
}
void apiRecordOp(const capture::OpRecord* op) noexcept {
    if (!g_collector.recorder || !g_collector.recording.load(std::memory_order_relaxed)) return;
    g_collector.recorder->recordOp(*op);
}
void apiRecordCollective(const capture::CollectiveRecord* c) noexcept {
    if (!g_collector.recorder || !g_collector.recording.load(std::memory_order_relaxed)) return;
    g_collector.recorder->emit(*c);
}
void apiPush(uint64_t id) { cuptiSession().pushCorrelation(id); }
void apiPop() { cuptiSession().popCorrelation(); }
uint64_t apiNow() { return realtimeNs(); }

// ---- counting the job's launch calls where CUPTI records no API calls (launch_hooks.h) ----
void emitLaunch(const capture::LaunchRecord& r) {
    if (g_collector.recorder && g_collector.recording.load(std::memory_order_relaxed)) g_collector.recorder->emit(r);
}
uint32_t internLaunchName(std::string_view text) {
    try {
        return g_collector.recorder ? g_collector.recorder->intern(text) : 0;
    } catch (...) {
        return 0;
    }
}
const LaunchSink kLaunchSink{emitLaunch, internLaunchName};

} // namespace

void setGpuRecording(bool on) {
    cuptiSession().setRecording(on);
    hwSampler().setRecording(on);
    if (!g_collector.count_launches) return;
    setLaunchCounting(on, kLaunchSink);
    if (!on && g_collector.config && g_collector.config->debug) logLine(launchCountSummary().c_str());
}

namespace {

// Ops carry CUPTI external correlation ids only when asked (SIGHTLINE_LINK=correlation). CUPTI
// writes those ids with its records of API calls only (on the H200, kernels alone with a push
// around every op gave 0 linked of 18,444 GPU activities), so they cannot stand in for launch
// calls that are not recorded: such kernels stay unlinked, and the job's stderr says so.
void sayWhatStaysUnlinked(const CuptiOptions& o, bool countable) {
    if (!o.kernels && !o.memcpy && !o.memset) return;
    if (!o.runtime && !o.driver && g_collector.count_launches)
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

void stopCollector() {
    CollectorState& c = g_collector;
    stopControlServer();
    if (c.stopped.exchange(true) || !c.recorder) return;
    c.recording = false;
    if (c.count_launches && launchesCounted() && c.config->debug) logLine(launchCountSummary().c_str());
    try {
        hwSampler().stop(std::chrono::seconds(2)); // its last samples, before the capture closes
        cuptiSession().stop();
        c.recorder->close();
        // A process that recorded nothing (a shell, `dirname`, a tool the job ran with the
        // preload inherited) leaves no capture behind.
        if (c.recorder->eventsRecorded() == 0) ::unlink(c.capture_path->c_str());
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

void installSignalFlush(int sig) {
    struct sigaction old {};
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
    struct sigaction sa {};
    sa.sa_handler = onSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
}

} // namespace

// Starts the sampler once (later windows reuse it: its interval is the first one asked for).
void startHwSampler(uint64_t interval_ns, bool attached) {
    std::call_once(g_collector.hw_started, [&] {
        HwOptions h;
        h.interval_ns = interval_ns;
        h.log = logLine;
        cuptiSession().keepAttached();
        hwSampler().start(*g_collector.recorder, h, CuptiSession::libraryHandle());
        CuptiSession::onContextDevice([](int device) { hwSampler().setDevice(device); });
        if (attached) hwSampler().setDevice(g_collector.config->hw_fallback_device); // its context exists already
    });
}

namespace {

void forkChild() {
    // A forked child (a DataLoader worker) shares the parent's file and rings: it records nothing.
    g_collector.recording = false;
    g_collector.stopped = true;
    if (g_collector.recorder) g_collector.recorder->abandonAfterFork();
}

// Creates the capture file and its recorder; false (with a line on stderr) when it cannot.
bool openCapture(const CollectorConfig& config) {
    CollectorState& c = g_collector;
    c.capture_path = new std::string(capturePath(config));
    const std::string& path = *c.capture_path;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        std::string why = "cannot create " + path + ": " + std::strerror(errno) + "; the job runs without recording";
        logLine(why.c_str());
        return false;
    }
    capture::FileHeader h{};
    std::memcpy(h.magic, capture::kFileMagic, sizeof h.magic);
    h.version = capture::kFormatVersion;
    h.header_size = sizeof h;
    h.pid = getpid();
    h.start_realtime_ns = int64_t(realtimeNs());
    c.start_ns = h.start_realtime_ns;
    h.rank = config.rank;
    h.world_size = config.world_size;
    h.local_rank = config.local_rank;
    gethostname(h.host, sizeof h.host - 1);
    c.recorder = new Recorder(std::make_unique<FileSink>(fd), h);
    return true;
}

void fillBridgeTable(const CollectorConfig& config) {
    g_collector.table = SightlineCollectorApi{kSightlineCollectorApiVersion, config.shapes ? 1 : 0, apiEnabled, apiIntern,
                                              apiRecordOp, apiPush, apiPop, apiNow, logLine, onUserRangeEnd,
                                              apiRecordCollective, onUserRangeBegin, config.correlate_ops ? 1 : 0};
}

// CUPTI started (or the control endpoint, dormant), with the activity kinds the configuration asks for.
void startGpuRecording(const CollectorConfig& config) {
    CollectorState& c = g_collector;
    const bool countable = launchCountingAvailable();
    CuptiOptions o = activityOptions(config, countable);
    if (o.nvtx && !config.nvtx_injection_set) {
        // CUPTI records NVTX ranges only when NVTX loads it as its injection library.
        const std::string cupti = CuptiSession::findLibrary();
        if (!cupti.empty()) setenv("NVTX_INJECTION64_PATH", cupti.c_str(), 0);
    }
    // Without API calls, kernels are linked by counting launches (not with correlation ids pushed).
    c.count_launches = (o.kernels || o.memcpy || o.memset) && !o.runtime && !o.driver && !config.correlate_ops && config.cuda && countable;
    if (config.cuda) sayWhatStaysUnlinked(o, countable);
    // Finalising CUPTI between windows would end a hardware sampling session too.
    o.detach = !config.correlate_ops && !config.hw && config.cupti_detach;
    o.log = logLine;
    std::string why;
    CuptiSession::onFirstContext([] { std::atexit(stopCollector); });
    if (config.dormant) {
        // Nothing recorded and CUPTI left alone until `sightline attach` opens a window.
        if (!startDormant(o, config.cuda, why)) logLine(why.c_str());
    } else if (config.cuda && !cuptiSession().start(*c.recorder, o, true, why)) {
        why += "; recording CPU ops only";
        logLine(why.c_str());
        c.count_launches = false;
    } else if (c.count_launches) {
        setLaunchCounting(true, kLaunchSink); // recording from the start, as CUPTI is
    }
}

void startCollector() {
    const CollectorConfig& config = *(g_collector.config = new CollectorConfig(CollectorConfig::fromEnvironment()));
    if (!config.enabled) return;
    fillBridgeTable(config);
    if (!openCapture(config)) return;
    startGpuRecording(config);
    g_collector.recording = !config.dormant;
    if (config.hw && config.cuda && !config.dormant && cuptiSession().attached()) {
        startHwSampler(config.hw_interval_us * 1000, false);
        hwSampler().setRecording(true); // a step window turns it off and on again (setGpuRecording)
    } else if (config.hw && !config.dormant) {
        logLine("hardware counters not recorded: CUPTI is not recording GPU activity in this process");
    }
    if (config.steps_given && !config.dormant) {
        if (config.steps_error) logLine("SIGHTLINE_STEPS must be A:B with 1 <= A <= B; recording every step");
        else startStepWindow(config.steps_first, config.steps_last);
    }
    pthread_atfork(nullptr, nullptr, forkChild);
    std::atexit(stopCollector);
    installSignalFlush(SIGTERM);
    watchForTorch();
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
