#pragma once
// The trace database: one SQLite file per trace, schema documented in docs/trace-db.md and
// versioned with PRAGMA user_version.
#include "sightline/import.h"
#include "sightline/op_tree.h"
#include "sightline/trace.h"

#include <filesystem>
#include <optional>
#include <vector>

namespace sightline {

inline constexpr int kTraceDbSchemaVersion = 4;

// Writes the trace (with its op nesting and kernel classes, for users' SQL) to a new database
// at `path`, replacing any file there. Throws InputError when the file cannot be written.
void writeTraceDb(const Trace& trace, const std::filesystem::path& path, const ProgressFn& progress = {});

// Reads a database written by writeTraceDb. Refuses a newer schema with both versions named.
Trace readTraceDb(const std::filesystem::path& path);

// The op tree stored with the trace `readTraceDb` read from `path` (schema 3 and later), equal to
// buildOpTree(trace) without its cost. Nothing for an earlier file, or when the stored tree does
// not fit the events (rows changed with SQL since the import, a damaged file): the tree is a
// cache of what the events say, rebuilt then.
std::optional<OpTree> readStoredOpTree(const std::filesystem::path& path, const Trace& trace);

// The same in two halves, so that the first can run while the trace is read: the stored parts
// (the tree without self CPU time and device totals, its link counts and the fingerprint of the
// events it was built from), then those parts checked against the trace read from the same file
// and completed.
struct StoredOpTree {
    OpTree partial;
    std::vector<uint64_t> links, fingerprint;
};
std::optional<StoredOpTree> readStoredOpTreeParts(const std::filesystem::path& path);
std::optional<OpTree> completeStoredOpTree(StoredOpTree parts, const Trace& trace);

// The op tree of a trace imported from `path`: the stored one when `path` was a trace database
// that holds one, else buildOpTree(trace).
OpTree opTreeOf(const Trace& trace, const std::filesystem::path& path);

} // namespace sightline
