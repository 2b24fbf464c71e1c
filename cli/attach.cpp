#include "attach.h"

#include "sightline/report/report.h"
#include "sightline/control_protocol.h"
#include "sightline/error.h"
#include "sightline/import.h"
#include "sightline/trace_db.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace sightline {

namespace fs = std::filesystem;
using namespace control;

namespace {

std::string socketOf(int pid) {
    return socketPath(socketDirectory(getuid(), std::getenv("XDG_RUNTIME_DIR")), pid);
}

int connectTo(const std::string& path) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (fd < 0 || path.size() >= sizeof addr.sun_path) return -1;
    std::strcpy(addr.sun_path, path.c_str());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

// Sends one request and reads one reply (blocking: a window reply comes when the window closes).
Message exchange(int fd, const std::vector<uint8_t>& request) {
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != ssize_t(request.size()))
        throw InputError("the job closed the connection");
    std::vector<uint8_t> buf;
    for (;;) {
        Message m;
        size_t used = 0;
        std::string error;
        const ParseResult r = parse(buf.data(), buf.size(), m, used, error);
        if (r == ParseResult::Ok) return m;
        if (r == ParseResult::Invalid) throw InputError("the job answered with a malformed message (" + error + ")");
        uint8_t chunk[1024];
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw InputError("the job closed the connection before answering");
        buf.insert(buf.end(), chunk, chunk + n);
    }
}

std::string commandOf(int pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (char& c : s)
        if (c == '\0') c = ' ';
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

uint64_t parseDuration(const std::string& text) {
    size_t used = 0;
    double v = 0;
    try {
        v = std::stod(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    const std::string unit = text.substr(used);
    const double scale = unit == "ms" ? 1 : unit == "s" || unit.empty() ? 1000
        : unit == "min"                                                 ? 60000
                                                                        : -1;
    if (used == 0 || scale < 0 || v <= 0 || v * scale > 24 * 3600 * 1000.0)
        throw InputError(fmt::format("--duration {}: give a time such as 10s or 500ms (at most a day)", text));
    return uint64_t(v * scale);
}

} // namespace

int listAttachable() {
    const std::string dir = socketDirectory(getuid(), std::getenv("XDG_RUNTIME_DIR"));
    std::error_code ec;
    std::printf("%-8s %-10s %-8s %s\n", "PID", "UPTIME", "WINDOWS", "COMMAND");
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        if (e.path().extension() != ".sock") continue;
        const int pid = std::atoi(e.path().stem().c_str());
        const int fd = connectTo(e.path().string());
        if (fd < 0) continue; // a stale socket of a job that is gone
        try {
            const Message m = exchange(fd, encode(Type::Status));
            if (m.type == Type::StatusReply) {
                StatusReplyBody s;
                std::memcpy(&s, m.payload.data(), sizeof s);
                timespec now;
                clock_gettime(CLOCK_REALTIME, &now);
                const double up = (double(now.tv_sec) * 1e9 + double(now.tv_nsec) - double(s.start_realtime_ns)) / 1e9;
                std::printf("%-8d %-10s %-8s %s%s\n", pid, fmt::format("{:.0f}s", up).c_str(),
                            fmt::format("{}{}", s.windows_done, s.window_open ? "+1" : "").c_str(), commandOf(pid).c_str(),
                            s.cuda_available ? "" : " (no CUDA)");
                ++n;
            }
        } catch (const InputError&) {
        }
        ::close(fd);
    }
    if (n == 0) std::fprintf(stderr, "sightline: no attachable jobs of this user (start one with SIGHTLINE_DORMANT=1 and the collector preloaded)\n");
    return 0;
}

int attachWindow(const AttachOptions& o) {
    if ((o.duration.empty()) == (o.steps <= 0))
        throw InputError("attach: give either --duration (10s, 500ms) or --steps N");
    WindowRequest w{};
    w.duration_ms = o.duration.empty() ? 0 : parseDuration(o.duration);
    w.steps = o.steps > 0 ? uint32_t(o.steps) : 0;
    w.shapes = o.shapes ? 1 : 0;
    w.hw_interval_us = o.hw ? uint32_t(o.hw_interval_us) : 0;
    const uint32_t request_size = o.hw ? sizeof w : control::kWindowRequestV1Size;
    const std::string path = socketOf(o.pid);
    const int fd = connectTo(path);
    if (fd < 0)
        throw InputError(fmt::format("attach: no attachable job {} ({}: {}); see sightline ps", o.pid, path, std::strerror(errno)));
    Message m;
    try {
        m = exchange(fd, encode(Type::OpenWindow, &w, request_size));
    } catch (...) {
        ::close(fd);
        throw;
    }
    ::close(fd);
    if (m.type == Type::Busy) throw InputError(fmt::format("attach: job {} is busy: another capture window is open", o.pid));
    if (m.type == Type::Error)
        throw InputError(fmt::format("attach: job {} refused: {}", o.pid, std::string(m.payload.begin(), m.payload.end())));
    if (m.type != Type::WindowReply) throw InputError("attach: unexpected answer from the job");
    WindowReplyBody r;
    std::memcpy(&r, m.payload.data(), sizeof r);
    const std::string capture(r.capture, strnlen(r.capture, sizeof r.capture));
    std::fprintf(stderr,
                 "sightline: window of %.3f s (%.6f to %.6f, seconds since the epoch) recorded %llu ops and %llu GPU "
                 "activities into %s\n",
                 double(r.end_ns - r.begin_ns) / 1e9, double(r.begin_ns) / 1e9, double(r.end_ns) / 1e9,
                 (unsigned long long)r.ops, (unsigned long long)r.gpu_records, capture.c_str());
    if (!o.import) return 0;
    Trace t = importCapture(capture);
    keepRange(t, r.begin_ns, r.end_ns);
    if (!o.output.empty()) writeTraceDb(t, o.output);
    requireReportable(t);
    const std::string text = summaryText(t);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
}

} // namespace sightline
