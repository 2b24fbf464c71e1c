#pragma once
// `sightline ps` and `sightline attach PID`: talk to dormant collectors over their control sockets.
#include <string>

namespace sightline {

struct AttachOptions {
    int pid = 0;
    std::string duration; // "10s", "500ms"
    int steps = 0;
    bool shapes = false;
    std::string output;   // trace database to write (optional)
    bool import = true;   // import the window and print its summary (else only the window's line)
};

int listAttachable();
int attachWindow(const AttachOptions& options);

} // namespace sightline
