#pragma once
// A trace written as Chrome trace-event JSON, the format Perfetto's UI and chrome://tracing open
// (docs/export.md): CPU threads with their nested ops, GPU streams with kernels and copies, an
// arrow from each launch to its GPU work, counter tracks, and markers (steps, findings) as
// instant events. Streamed: the JSON is never held in memory.
#include "sightline/import.h"
#include "sightline/trace.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sightline {

// The top-level key of a trace the export wrote with its times moved (a whole number of seconds
// subtracted; docs/export.md): Sightline's Kineto importer adds it back and drops the key.
inline constexpr std::string_view kExportShiftKey = "sightlineTimeShiftNs";

// A point on the timeline drawn as a global instant event (a line across all tracks).
struct ExportMarker {
    int64_t ts_ns = 0; // on the trace's clock
    std::string name;
    std::string category;                                  // "step", "finding"
    std::vector<std::pair<std::string, std::string>> args; // shown as text
};

struct ExportStats {
    uint64_t events = 0;            // trace events written, metadata events included
    uint64_t flows = 0;             // arrows (each a start and an end event)
    uint64_t counters = 0;          // counter events
    uint64_t clamped_durations = 0; // negative durations written as zero
    int64_t time_shift_ns = 0;      // subtracted from every time (see docs/export.md)
    uint64_t bytes = 0;
};

// Writes `trace` to `path` ("-" for standard output; ".gz" for gzip). Throws InputError when
// the file cannot be written; nothing is left at `path` then.
ExportStats exportChromeTrace(const Trace& trace, const std::filesystem::path& path,
                              const std::vector<ExportMarker>& markers = {}, const ProgressFn& progress = {});

} // namespace sightline
