#pragma once
// Reading traces: one entry point that picks the importer from the file's first bytes.
#include "sightline/trace.h"

#include <filesystem>
#include <functional>

namespace sightline {

// Called now and then during long work with the fraction done (0..1). It may throw Cancelled.
using ProgressFn = std::function<void(double fraction)>;

enum class InputFormat { KinetoJson,
                         KinetoJsonGz,
                         TraceDb,
                         Capture,
                         Unknown };
const char* toString(InputFormat format);

// Looks at the first bytes of a file. Throws InputError when it cannot be opened.
InputFormat detectFormat(const std::filesystem::path& path);

// Reads any supported trace: Kineto / Chrome-trace JSON (plain or gzip) or a Sightline trace
// database. Throws InputError with one actionable line on bad input.
Trace importTrace(const std::filesystem::path& path, const ProgressFn& progress = {});

// The Kineto importer over JSON text in memory: `size` bytes at `data`, with `capacity` bytes
// readable (at least size + simdjson::SIMDJSON_PADDING). The text may be modified.
// `source` names the input in messages.
Trace importKinetoJson(char* data, size_t size, size_t capacity, const std::string& source,
                       const ProgressFn& progress = {});

// The collector's raw capture (docs/capture-format.md). Keeps every whole chunk of a capture
// cut short and counts what was lost; refuses a newer format with both versions named.
Trace importCapture(const std::filesystem::path& path);

} // namespace sightline
