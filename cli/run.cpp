#include "run.h"

#include "sightline/report/report.h"
#include "sightline/activities.h"
#include "sightline/error.h"
#include "sightline/import.h"
#include "sightline/trace_db.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

namespace sightline {

namespace fs = std::filesystem;

namespace {

pid_t g_child = -1;

void forward(int sig) {
    if (g_child > 0) kill(g_child, sig);
}

fs::path findCollector(const std::string& self) {
    if (const char* p = std::getenv("SIGHTLINE_COLLECTOR"); p && *p) return p;
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (ec) exe = fs::absolute(self);
    const fs::path dir = exe.parent_path();
    for (const fs::path& candidate : {dir / "../collector/libsightline_collector.so", dir / "../lib/sightline/libsightline_collector.so",
                                      dir / "libsightline_collector.so"}) {
        if (fs::exists(candidate, ec)) return fs::canonical(candidate, ec);
    }
    throw InputError("the collector (libsightline_collector.so) was not found beside sightline: it is built only where the "
                     "CUDA toolkit with CUPTI was found at configure time; or set SIGHTLINE_COLLECTOR");
}

// The Python adapter's startup directory (sitecustomize.py and sightline_adapter/), shipped
// beside the collector; empty (with one line on stderr) when it is missing.
fs::path findPythonAdapter(const fs::path& collector) {
    const char* env = std::getenv("SIGHTLINE_ADAPTER_DIR");
    const fs::path dir = env && *env ? fs::path(env) : collector.parent_path() / "python";
    std::error_code ec;
    if (fs::exists(dir / "sitecustomize.py", ec)) return fs::absolute(dir, ec);
    std::fprintf(stderr, "sightline: the Python adapter was not found (%s): Python jobs' batches and data waits go "
                         "unrecorded\n",
                 dir.c_str());
    return {};
}

std::string defaultDir() {
    char buf[64];
    const std::time_t now = std::time(nullptr);
    std::strftime(buf, sizeof buf, "sightline-%Y%m%d-%H%M%S", std::localtime(&now));
    return buf;
}

} // namespace

namespace {

// Refuses a bad --steps or --activities before anything runs.
void checkRunOptions(const RunOptions& o) {
    if (o.command.empty())
        throw InputError("run: nothing to run; usage: sightline run [options] -- COMMAND [ARGS...]");
    if (!o.steps.empty()) {
        unsigned long long a = 0, b = 0;
        char extra = 0;
        if (std::sscanf(o.steps.c_str(), "%llu:%llu%c", &a, &b, &extra) != 2 || a < 1 || b < a)
            throw InputError(fmt::format("--steps {}: give A:B with 1 <= A <= B (steps counted from 1, both included)", o.steps));
    }
    if (!o.activities.empty() && o.activities != "all" && o.activities != "default") {
        // The collector reads the list by the words it contains; a misspelt one would silently
        // record nothing of that kind.
        const auto& known = capture::kActivityWords;
        size_t at = 0;
        while (at <= o.activities.size()) {
            const size_t comma = std::min(o.activities.find(',', at), o.activities.size());
            const std::string word = o.activities.substr(at, comma - at);
            if (std::find(std::begin(known), std::end(known), word) == std::end(known))
                throw InputError(fmt::format("--activities {}: unknown activity '{}' (known: {}; or all, or default alone)", o.activities,
                                             word, fmt::join(known, ",")));
            at = comma + 1;
        }
    }
}

std::vector<fs::path> capturesIn(const fs::path& dir) {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.path().extension() == ".slcap") out.push_back(e.path());
    return out;
}

// The environment the job runs with: the collector preloaded, its settings, the torch bridge
// and the Python adapter.
struct JobEnvironment {
    std::string preload;
    fs::path bridge;
    std::string pythonpath;
};

JobEnvironment jobEnvironment(const RunOptions& o, const fs::path& collector) {
    JobEnvironment env;
    env.preload = collector.string();
    if (const char* old = std::getenv("LD_PRELOAD"); old && *old) env.preload += std::string(":") + old;
    env.bridge = collector.parent_path() / "libsightline_torch.so";
    if (o.python_adapter) {
        const fs::path adapter = findPythonAdapter(collector);
        if (!adapter.empty()) {
            env.pythonpath = adapter.string();
            if (const char* old = std::getenv("PYTHONPATH"); old && *old) env.pythonpath += std::string(":") + old;
        }
    }
    return env;
}

// Starts the job; returns its exit status (128 + the signal when a signal ended it).
int runJob(const RunOptions& o, const JobEnvironment& env, const fs::path& dir) {
    g_child = fork();
    if (g_child < 0) throw InputError("run: fork failed");
    if (g_child == 0) {
        setenv("LD_PRELOAD", env.preload.c_str(), 1);
        setenv("SIGHTLINE_OUTPUT", dir.c_str(), 1);
        setenv("SIGHTLINE_SHAPES", o.shapes ? "1" : "0", 1);
        setenv("SIGHTLINE_HW", o.hw ? "1" : "0", 1);
        setenv("SIGHTLINE_HW_INTERVAL_US", std::to_string(o.hw_interval_us).c_str(), 1);
        if (!o.activities.empty()) setenv("SIGHTLINE_ACTIVITIES", o.activities.c_str(), 1);
        if (!o.steps.empty()) setenv("SIGHTLINE_STEPS", o.steps.c_str(), 1);
        if (fs::exists(env.bridge)) setenv("SIGHTLINE_TORCH_BRIDGE", env.bridge.c_str(), 0);
        if (!env.pythonpath.empty()) setenv("PYTHONPATH", env.pythonpath.c_str(), 1);
        if (o.dormant) setenv("SIGHTLINE_DORMANT", "1", 1);
        std::vector<char*> argv;
        for (const std::string& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        execvp(argv[0], argv.data());
        std::fprintf(stderr, "sightline: cannot run %s: %s\n", argv[0], std::strerror(errno));
        _exit(127);
    }
    if (o.dormant)
        std::fprintf(stderr, "sightline: job %d started dormant; record windows with: sightline attach %d --steps N\n", int(g_child),
                     int(g_child));
    struct sigaction sa {};
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    int status = 0;
    while (waitpid(g_child, &status, 0) < 0 && errno == EINTR) {}
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Imports each capture into a trace database beside it and prints the summary of the one with
// the most events (the main process, usually).
void importCaptures(const std::vector<fs::path>& captures) {
    std::optional<Trace> best;
    for (const fs::path& c : captures) {
        try {
            Trace t = importCapture(c);
            const fs::path db = fs::path(c).replace_extension(".db");
            writeTraceDb(t, db);
            std::fprintf(stderr, "sightline: %s: %zu CPU events, %zu GPU activities -> %s\n", c.filename().c_str(),
                         t.cpu.size(), t.gpu.size(), db.filename().c_str());
            if (!t.cpu.empty() && (!best || t.eventCount() > best->eventCount())) best = std::move(t);
        } catch (const InputError& e) {
            std::fprintf(stderr, "sightline: %s\n", e.what());
        }
    }
    if (best) {
        const std::string summary = summaryText(*best);
        std::fwrite(summary.data(), 1, summary.size(), stdout);
    }
}

} // namespace

int runProfiled(const RunOptions& o) {
    checkRunOptions(o);
    const fs::path collector = findCollector(o.self_path);
    const fs::path dir = fs::absolute(o.output_dir.empty() ? defaultDir() : o.output_dir);
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw InputError(fmt::format("{}: cannot create the output directory: {}", dir.string(), ec.message()));
    const std::vector<fs::path> before = capturesIn(dir);
    const int code = runJob(o, jobEnvironment(o, collector), dir);

    std::vector<fs::path> captures;
    for (const fs::path& c : capturesIn(dir))
        if (std::find(before.begin(), before.end(), c) == before.end()) captures.push_back(c);
    std::sort(captures.begin(), captures.end());
    if (captures.empty())
        std::fprintf(stderr, "sightline: the job exited with status %d; it ran no PyTorch op, CUDA work or NVTX range, so "
                             "no capture was kept\n",
                     code);
    else
        std::fprintf(stderr, "sightline: the job exited with status %d; %zu capture(s) in %s\n", code, captures.size(), dir.c_str());
    if (!o.import || o.dormant) return code; // a dormant job's windows were imported by attach
    importCaptures(captures);
    return code;
}

} // namespace sightline
