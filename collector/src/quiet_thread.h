#pragma once
// The collector's own threads start with every signal blocked, so that no signal handler of the
// job runs on them: they are not the job's threads.
#include <csignal>
#include <thread>
#include <utility>

#include <pthread.h>

namespace sightline::collector {

// Blocks every signal on the calling thread while it lives; a thread started meanwhile inherits
// the mask.
class SignalsBlocked {
public:
    SignalsBlocked() {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &m_old);
    }
    ~SignalsBlocked() { pthread_sigmask(SIG_SETMASK, &m_old, nullptr); }
    SignalsBlocked(const SignalsBlocked&) = delete;
    SignalsBlocked& operator=(const SignalsBlocked&) = delete;

private:
    sigset_t m_old;
};

// A new thread running `fn` with every signal blocked; throws as std::thread does.
template <typename F>
std::thread quietThread(F fn) {
    SignalsBlocked blocked;
    return std::thread(std::move(fn));
}

// The same, detached; false when no thread can be had.
template <typename F>
bool startQuietThread(F fn) noexcept {
    try {
        quietThread(std::move(fn)).detach();
        return true;
    } catch (...) {
        return false;
    }
}

} // namespace sightline::collector
