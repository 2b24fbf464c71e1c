#pragma once
// The trace database: one SQLite file per trace, schema documented in docs/trace-db.md and
// versioned with PRAGMA user_version.
#include "sightline/import.h"
#include "sightline/trace.h"

#include <filesystem>

namespace sightline {

inline constexpr int kTraceDbSchemaVersion = 2;

// Writes the trace (with its op nesting and kernel classes, for users' SQL) to a new database
// at `path`, replacing any file there. Throws InputError when the file cannot be written.
void writeTraceDb(const Trace& trace, const std::filesystem::path& path, const ProgressFn& progress = {});

// Reads a database written by writeTraceDb. Refuses a newer schema with both versions named.
Trace readTraceDb(const std::filesystem::path& path);

} // namespace sightline
