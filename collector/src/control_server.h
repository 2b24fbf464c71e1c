#pragma once
// The collector's control endpoint for attach windows (docs/attach.md): a Unix-domain socket
// <per-user dir>/<pid>.sock, mode 0600 in a 0700 directory, peers checked with SO_PEERCRED.
#include "sightline/control_protocol.h"

#include <functional>
#include <string>

namespace sightline::collector {

struct ControlHooks {
    // Opens a capture window; false when it cannot (the reason in `error`).
    std::function<bool(const control::WindowRequest&, std::string& error)> open;
    // True once the window opened by `open` has closed by itself (its steps were counted).
    std::function<bool()> stepsDone;
    // Closes the window; returns its extent and counts.
    std::function<control::WindowReplyBody()> close;
    std::function<control::StatusReplyBody()> status;
};

// Starts the server thread (signals blocked). Returns false, with a one-line reason, when the
// endpoint cannot be set up; the job runs on either way.
bool startControlServer(ControlHooks hooks, std::string& why);
// Removes the socket file (at exit).
void stopControlServer();

} // namespace sightline::collector
