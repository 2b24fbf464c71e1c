#pragma once
// `sightline ps` and `sightline attach PID`: talk to dormant collectors over their control sockets.
#include <string>

namespace sightline {

struct AttachOptions {
    int pid = 0;
    std::string duration; // "10s", "500ms"
    int steps = 0;
    bool shapes = false;
    bool hw = false; // sample hardware counters in the window (docs/hardware.md)
    int hw_interval_us = 1000;
    std::string output; // trace database to write (optional)
    bool import = true; // import the window and print its summary (else only the window's line)
};

int listAttachable();
int attachWindow(const AttachOptions& options);

} // namespace sightline
