#include "op_tree_store.h"

#include "sightline/error.h"
#include "sightline/trace_db.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>

namespace sightline {

using detail::Db;
using detail::Stmt;

namespace {

// What is stored: the tree's per-event arrays as they are in memory (native byte order), and its
// link counts. Self CPU time and device totals follow from these and the events' times.
constexpr const char* kParent = "parent", *kCounted = "counted", *kDepth = "depth", *kThread = "thread",
                      *kSelfDevice = "self_device_ns", *kLinks = "links";
constexpr int kParts = 6;

std::array<uint64_t, 7> linkCounts(const LinkStats& l) {
    return {l.gpu_linked, l.gpu_without_id, l.gpu_unmatched, l.api_linked, l.folded, l.excluded, l.partial_overlaps};
}

// One part's bytes straight from the database's pages into `out` (no intermediate copy).
template <typename T>
void readPart(Db& db, int64_t rowid, int64_t bytes, std::vector<T>& out, const std::filesystem::path& path) {
    if (bytes % int64_t(sizeof(T)) != 0)
        throw InputError(fmt::format("{}: damaged op tree (a part of {} bytes)", path.string(), bytes));
    out.resize(size_t(bytes) / sizeof(T));
    sqlite3_blob* blob = nullptr;
    if (sqlite3_blob_open(db.handle(), "main", "op_tree", "data", rowid, 0, &blob) != SQLITE_OK) db.fail("cannot read the op tree");
    const int rc = bytes ? sqlite3_blob_read(blob, out.data(), int(bytes), 0) : SQLITE_OK;
    sqlite3_blob_close(blob);
    if (rc != SQLITE_OK) db.fail("cannot read the op tree");
}

} // namespace

namespace detail {

void writeStoredOpTree(Db& db, const OpTree& tree) {
    Stmt s(db, "INSERT INTO op_tree VALUES(?,?)");
    auto put = [&](const char* key, const auto& v) {
        s.bind(1, key).bindBlob(2, v.data(), v.size() * sizeof(v[0])).run();
    };
    put(kParent, tree.parent);
    put(kCounted, tree.counted);
    put(kDepth, tree.depth);
    put(kThread, tree.thread);
    put(kSelfDevice, tree.self_device_ns);
    put(kLinks, linkCounts(tree.links));
}

} // namespace detail

std::optional<StoredOpTree> readStoredOpTreeParts(const std::filesystem::path& path) {
    Db db(path, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX);
    db.exec("PRAGMA mmap_size=1099511627776");
    if (db.scalar("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='op_tree'") == 0)
        return std::nullopt; // schema 2 and earlier
    StoredOpTree parts;
    parts.path = path;
    OpTree& t = parts.partial;
    std::vector<uint64_t> links;
    int found = 0;
    Stmt s(db, "SELECT rowid, key, length(data) FROM op_tree");
    while (s.next()) {
        const int64_t rowid = s.i64(0), bytes = s.i64(2);
        const std::string_view key = s.text(1);
        ++found;
        if (key == kParent) readPart(db, rowid, bytes, t.parent, path);
        else if (key == kCounted) readPart(db, rowid, bytes, t.counted, path);
        else if (key == kDepth) readPart(db, rowid, bytes, t.depth, path);
        else if (key == kThread) readPart(db, rowid, bytes, t.thread, path);
        else if (key == kSelfDevice) readPart(db, rowid, bytes, t.self_device_ns, path);
        else if (key == kLinks) readPart(db, rowid, bytes, links, path);
        else --found;
    }
    if (found != kParts || links.size() != 7)
        throw InputError(fmt::format("{}: damaged op tree ({} of its {} parts)", path.string(), found, kParts));
    t.links = {links[0], links[1], links[2], links[3], links[4], links[5], links[6]};
    return parts;
}

OpTree completeStoredOpTree(StoredOpTree parts, const Trace& trace) {
    OpTree t = std::move(parts.partial);
    const size_t n = trace.cpu.size();
    const std::string file = parts.path.string();
    if (t.parent.size() != n || t.counted.size() != n || t.depth.size() != n || t.thread.size() != n || t.self_device_ns.size() != n)
        throw InputError(fmt::format("{}: damaged op tree (not one entry for each of the {} CPU events)", file, n));
    // Self CPU time: an event's duration less its direct children's (counted events only). The
    // parents are checked first, so that nothing below follows a bad index.
    t.self_cpu_ns.assign(n, 0);
    uint16_t deepest = 0;
    bool children_first = true; // every child before its parent (events stored as they ended)
    for (size_t i = 0; i < n; ++i) {
        if (!t.counted[i]) continue;
        const int32_t p = t.parent[i];
        const bool bad_parent = p < OpTree::kNone || p >= int32_t(n) ||
                                (p != OpTree::kNone && (!t.counted[size_t(p)] || (t.depth[i] != t.depth[size_t(p)] + 1 &&
                                                                                   t.depth[i] != UINT16_MAX)));
        if (bad_parent || t.thread[i] >= trace.threads.size())
            throw InputError(fmt::format("{}: damaged op tree (event {}: parent {}, thread {})", file, i, p, t.thread[i]));
        t.self_cpu_ns[i] += trace.cpu[i].duration();
        if (p != OpTree::kNone) {
            t.self_cpu_ns[size_t(p)] -= trace.cpu[i].duration();
            children_first &= size_t(p) > i;
        }
        deepest = std::max(deepest, t.depth[i]);
    }
    // Device totals bottom-up: in one pass when children come before their parents, else the
    // deepest events first (depth is the parent's plus one; capped depths do not say the order).
    t.device_total_ns = t.self_device_ns;
    auto addUp = [&](uint32_t i) {
        if (t.counted[i] && t.parent[i] != OpTree::kNone) t.device_total_ns[size_t(t.parent[i])] += t.device_total_ns[i];
    };
    if (children_first) {
        for (uint32_t i = 0; i < n; ++i) addUp(i);
    } else {
        if (deepest == UINT16_MAX) return buildOpTree(trace);
        std::vector<uint32_t> at_depth(size_t(deepest) + 2, 0);
        for (size_t i = 0; i < n; ++i)
            if (t.counted[i]) ++at_depth[size_t(t.depth[i]) + 1];
        for (size_t d = 1; d < at_depth.size(); ++d) at_depth[d] += at_depth[d - 1];
        std::vector<uint32_t> by_depth(at_depth.back());
        for (size_t i = 0; i < n; ++i)
            if (t.counted[i]) by_depth[at_depth[t.depth[i]]++] = uint32_t(i);
        for (size_t j = by_depth.size(); j-- > 0;) addUp(by_depth[j]);
    }
    for (size_t i = 0; i < n; ++i)
        if (!t.counted[i]) t.device_total_ns[i] = 0;
    return t;
}

std::optional<OpTree> readStoredOpTree(const std::filesystem::path& path, const Trace& trace) {
    std::optional<StoredOpTree> parts = readStoredOpTreeParts(path);
    if (!parts) return std::nullopt;
    return completeStoredOpTree(std::move(*parts), trace);
}

OpTree opTreeOf(const Trace& trace, const std::filesystem::path& path) {
    std::optional<OpTree> stored;
    if (trace.format == "sqlite") stored = readStoredOpTree(path, trace);
    return stored ? std::move(*stored) : buildOpTree(trace);
}

} // namespace sightline
