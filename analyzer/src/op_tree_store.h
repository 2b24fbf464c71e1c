#pragma once
// The op tree stored in the trace database beside the events it nests (table `op_tree`, schema 3),
// so that opening a database does not rebuild it. Internal to the analyzer.
#include "sightline/op_tree.h"
#include "sqlite_util.h"

namespace sightline::detail {

void writeStoredOpTree(Db& db, const OpTree& tree);

} // namespace sightline::detail
