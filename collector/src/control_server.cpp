#include "control_server.h"

#include "quiet_thread.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <csignal>
#include <cstring>
#include <dirent.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>

namespace sightline::collector {

using namespace control;

namespace {

// Function-local statics: the collector starts from a shared-library constructor, which may run
// before this file's own globals are initialised.
std::string& socketPath() {
    static auto* p = new std::string();
    return *p;
}
ControlHooks& hooks() {
    static auto* h = new ControlHooks();
    return *h;
}

bool sendAll(int fd, const std::vector<uint8_t>& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
        const ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        off += size_t(n);
    }
    return true;
}

void sendError(int fd, const std::string& message) {
    const std::string m = message.substr(0, kMaxPayload);
    sendAll(fd, encode(Type::Error, m.data(), uint32_t(m.size())));
}

// Reads one request, waiting at most `timeout_ms` for it; refuses anything malformed.
bool readRequest(int fd, Message& msg, std::string& error) {
    std::vector<uint8_t> buf;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (;;) {
        size_t consumed = 0;
        const ParseResult r = parse(buf.data(), buf.size(), msg, consumed, error);
        if (r == ParseResult::Ok) return true;
        if (r == ParseResult::Invalid) return false;
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) {
            error = "timed out waiting for a request";
            return false;
        }
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, int(left)) <= 0) continue;
        uint8_t chunk[512];
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) {
            error = "the client went away";
            return false;
        }
        buf.insert(buf.end(), chunk, chunk + n);
        if (buf.size() > sizeof(FrameHeader) + kMaxPayload) {
            error = "oversized request";
            return false;
        }
    }
}

// True while the client is still connected (it may vanish mid-window; the window goes on).
bool clientAlive(int fd) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return true;
    char c;
    return ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

void serveClient(int fd) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != getuid()) {
        sendError(fd, "permission denied: only the job's own user may attach");
        return;
    }
    Message msg;
    std::string error;
    if (!readRequest(fd, msg, error)) {
        sendError(fd, "refused: " + error);
        return;
    }
    if (msg.type == Type::Status) {
        const StatusReplyBody s = hooks().status();
        sendAll(fd, encode(Type::StatusReply, &s, sizeof s));
        return;
    }
    if (msg.type != Type::OpenWindow) {
        sendError(fd, "refused: not a request");
        return;
    }
    WindowRequest w;
    std::memcpy(&w, msg.payload.data(), sizeof w);
    if (!hooks().open(w, error)) {
        if (error == "busy") sendAll(fd, encode(Type::Busy));
        else sendError(fd, error);
        return;
    }
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(w.duration_ms);
    for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        if (w.duration_ms ? std::chrono::steady_clock::now() >= end : hooks().stepsDone()) break;
        if (w.duration_ms == 0 && !clientAlive(fd)) {
            // Nobody waits for a step window any more: it still closes by itself after its steps.
            while (!hooks().stepsDone()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
            break;
        }
    }
    const WindowReplyBody reply = hooks().close();
    sendAll(fd, encode(Type::WindowReply, &reply, sizeof reply));
}

void removeStaleSockets(const std::string& dir) {
    DIR* d = opendir(dir.c_str());
    if (!d) return;
    while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (name.size() < 6 || name.substr(name.size() - 5) != ".sock") continue;
        const long pid = std::strtol(name.c_str(), nullptr, 10);
        if (pid > 0 && kill(pid_t(pid), 0) != 0 && errno == ESRCH) ::unlink((dir + "/" + name).c_str());
    }
    closedir(d);
}

} // namespace

bool startControlServer(ControlHooks given, std::string& why) {
    hooks() = std::move(given);
    const std::string dir = socketDirectory(getuid(), std::getenv("XDG_RUNTIME_DIR"));
    ::mkdir(dir.c_str(), 0700);
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 0077) != 0) {
        why = dir + " is not a private directory of this user; attach is off";
        return false;
    }
    removeStaleSockets(dir);
    socketPath() = control::socketPath(dir, getpid());
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (fd < 0 || socketPath().size() >= sizeof addr.sun_path) {
        why = "cannot create the control socket; attach is off";
        if (fd >= 0) ::close(fd);
        return false;
    }
    std::strcpy(addr.sun_path, socketPath().c_str());
    ::unlink(socketPath().c_str());
    const mode_t old = ::umask(0177);
    const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::umask(old);
    if (!bound || ::chmod(socketPath().c_str(), 0600) != 0 || ::listen(fd, 4) != 0) {
        why = "cannot listen on " + socketPath() + ": " + std::strerror(errno) + "; attach is off";
        ::close(fd);
        return false;
    }
    quietThread([fd] {
        for (;;) {
            const int client = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
            if (client < 0) {
                if (errno == EINTR || errno == ECONNABORTED) continue;
                return;
            }
            // One thread a client, so that a second client hears "busy" while a window is open.
            try {
                std::thread([client] {
                    try {
                        serveClient(client);
                    } catch (const std::exception& e) {
                        if (std::getenv("SIGHTLINE_DEBUG")) std::fprintf(stderr, "sightline: control: %s\n", e.what());
                    } catch (...) {
                    }
                    ::close(client);
                }).detach();
            } catch (...) {
                ::close(client);
            }
        }
    }).detach();
    return true;
}

void stopControlServer() {
    if (!socketPath().empty()) ::unlink(socketPath().c_str());
}

} // namespace sightline::collector
