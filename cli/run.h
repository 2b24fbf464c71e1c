#pragma once
// `sightline run -- CMD ...`: runs a job with the collector preloaded, then imports its captures.
#include <string>
#include <vector>

namespace sightline {

struct RunOptions {
    std::vector<std::string> command;
    std::string output_dir; // empty: sightline-YYYYmmdd-HHMMSS
    bool shapes = false;
    bool hw = false; // sample hardware counters (docs/hardware.md)
    int hw_interval_us = 1000;
    std::string activities; // empty: all
    std::string steps;      // "A:B": record steps A to B only
    bool import = true;
    bool python_adapter = true; // put the Python adapter first on the job's PYTHONPATH
    bool dormant = false;       // start the job dormant, for `sightline attach` (implies no import)
    std::string self_path;      // argv[0] of sightline, to find the collector
};

// Returns the job's exit status (128 + signal when it was killed).
int runProfiled(const RunOptions& options);

} // namespace sightline
