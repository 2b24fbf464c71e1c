#pragma once
// The op tree stored in the trace database beside the events it nests (table `op_tree`, schema 3),
// so that opening a database does not rebuild it. Internal to the analyzer.
#include "sightline/op_tree.h"
#include "sightline/trace.h"
#include "sqlite_util.h"

namespace sightline::detail {

// Stores `tree`, built from `trace`, with a fingerprint of the events it was built from. Stores
// nothing when a part would pass SQLite's size limit (a reader then rebuilds the tree).
void writeStoredOpTree(Db& db, const OpTree& tree, const Trace& trace);

} // namespace sightline::detail
