#include "op_tree_store.h"

#include "sightline/trace_db.h"

#include <algorithm>
#include <array>

namespace sightline {

using detail::Db;
using detail::Stmt;

namespace {

// What is stored: the tree's per-event arrays as they are in memory (native byte order), its link
// counts, and a fingerprint of the events it was built from. Self CPU time and device totals
// follow from these and the events' times.
constexpr const char *kParent = "parent", *kCounted = "counted", *kDepth = "depth", *kThread = "thread",
                     *kSelfDevice = "self_device_ns", *kLinks = "links", *kFingerprint = "fingerprint";
constexpr int kParts = 7;
constexpr size_t kMaxPartBytes = size_t(900) << 20; // under SQLite's default 1e9-byte limit

std::array<uint64_t, 7> linkCounts(const LinkStats& l) {
    return {l.gpu_linked, l.gpu_without_id, l.gpu_unmatched, l.api_linked, l.folded, l.excluded, l.partial_overlaps};
}

// The events' counts and a hash of what the tree rests on (times, external ids, threads): rows
// changed with SQL after the import make the stored tree not fit, and it is rebuilt.
std::array<uint64_t, 4> fingerprint(const Trace& t) {
    auto mix = [](uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; };
    uint64_t cpu = 0xcbf29ce484222325ull, gpu = cpu;
    for (const CpuEvent& e : t.cpu)
        cpu = mix(mix(mix(mix(cpu, uint64_t(e.start_ns)), uint64_t(e.end_ns)), uint64_t(e.external_id)), e.thread);
    for (const GpuEvent& g : t.gpu)
        gpu = mix(mix(mix(gpu, uint64_t(g.start_ns)), uint64_t(g.end_ns)), uint64_t(g.external_id));
    return {t.cpu.size(), t.gpu.size(), cpu, gpu};
}

// One part's bytes straight from the database's pages into `out` (no intermediate copy); false
// when they are not a whole number of elements.
template <typename T>
bool readPart(Db& db, int64_t rowid, int64_t bytes, std::vector<T>& out) {
    if (bytes < 0 || bytes % int64_t(sizeof(T)) != 0) return false;
    out.resize(size_t(bytes) / sizeof(T));
    sqlite3_blob* blob = nullptr;
    if (sqlite3_blob_open(db.handle(), "main", "op_tree", "data", rowid, 0, &blob) != SQLITE_OK) db.fail("cannot read the op tree");
    const int rc = bytes ? sqlite3_blob_read(blob, out.data(), int(bytes), 0) : SQLITE_OK;
    sqlite3_blob_close(blob);
    if (rc != SQLITE_OK) db.fail("cannot read the op tree");
    return true;
}

} // namespace

namespace detail {

void writeStoredOpTree(Db& db, const OpTree& tree, const Trace& trace) {
    if (tree.self_device_ns.size() * sizeof(int64_t) > kMaxPartBytes) return;
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
    put(kFingerprint, fingerprint(trace));
}

} // namespace detail

std::optional<StoredOpTree> readStoredOpTreeParts(const std::filesystem::path& path) {
    Db db(path, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX);
    db.exec("PRAGMA mmap_size=1099511627776");
    if (db.scalar("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='op_tree'") == 0)
        return std::nullopt; // schema 2 and earlier
    StoredOpTree parts;
    OpTree& t = parts.partial;
    int found = 0;
    bool whole = true;
    Stmt s(db, "SELECT rowid, key, length(data) FROM op_tree");
    while (s.next()) {
        const int64_t rowid = s.i64(0), bytes = s.i64(2);
        const std::string_view key = s.text(1);
        ++found;
        if (key == kParent) whole &= readPart(db, rowid, bytes, t.parent);
        else if (key == kCounted) whole &= readPart(db, rowid, bytes, t.counted);
        else if (key == kDepth) whole &= readPart(db, rowid, bytes, t.depth);
        else if (key == kThread) whole &= readPart(db, rowid, bytes, t.thread);
        else if (key == kSelfDevice) whole &= readPart(db, rowid, bytes, t.self_device_ns);
        else if (key == kLinks) whole &= readPart(db, rowid, bytes, parts.links);
        else if (key == kFingerprint) whole &= readPart(db, rowid, bytes, parts.fingerprint);
        else --found;
    }
    if (found != kParts || !whole || parts.links.size() != 7 || parts.fingerprint.size() != 4)
        return std::nullopt; // not the parts this version writes: rebuilt
    return parts;
}

std::optional<OpTree> completeStoredOpTree(StoredOpTree parts, const Trace& trace) {
    const std::array<uint64_t, 4> print = fingerprint(trace);
    if (!std::equal(print.begin(), print.end(), parts.fingerprint.begin())) return std::nullopt; // events changed
    OpTree t = std::move(parts.partial);
    const size_t n = trace.cpu.size();
    if (t.parent.size() != n || t.counted.size() != n || t.depth.size() != n || t.thread.size() != n || t.self_device_ns.size() != n)
        return std::nullopt;
    const auto& l = parts.links;
    t.links = {l[0], l[1], l[2], l[3], l[4], l[5], l[6]};
    // Every entry checked before anything follows an index: as buildOpTree leaves them, an event
    // left out or folded has no parent, depth or GPU time; a counted one's parent is counted and
    // one level up (so no chain of parents can loop), and capped depths are not trusted.
    for (size_t i = 0; i < n; ++i) {
        const int32_t p = t.parent[i];
        bool fits = t.counted[i] <= 1 && t.thread[i] < trace.threads.size() && t.depth[i] != UINT16_MAX;
        if (!t.counted[i]) fits = fits && p == OpTree::kNone && t.depth[i] == 0 && t.self_device_ns[i] == 0;
        else if (p != OpTree::kNone)
            fits = fits && p >= 0 && size_t(p) < n && t.counted[size_t(p)] == 1 && t.depth[i] == t.depth[size_t(p)] + 1;
        else fits = fits && t.depth[i] == 0;
        if (!fits) return std::nullopt;
    }
    // Self CPU time: an event's duration less its direct children's (counted events only).
    t.self_cpu_ns.assign(n, 0);
    uint16_t deepest = 0;
    bool children_first = true; // every child before its parent (events stored as they ended)
    for (size_t i = 0; i < n; ++i) {
        if (!t.counted[i]) continue;
        t.self_cpu_ns[i] += trace.cpu[i].duration();
        if (const int32_t p = t.parent[i]; p != OpTree::kNone) {
            t.self_cpu_ns[size_t(p)] -= trace.cpu[i].duration();
            children_first &= size_t(p) > i;
        }
        deepest = std::max(deepest, t.depth[i]);
    }
    // Device totals bottom-up: in one pass when children come before their parents, else the
    // deepest events first (depth is the parent's plus one).
    t.device_total_ns = t.self_device_ns;
    auto addUp = [&](uint32_t i) {
        if (t.counted[i] && t.parent[i] != OpTree::kNone) t.device_total_ns[size_t(t.parent[i])] += t.device_total_ns[i];
    };
    if (children_first) {
        for (uint32_t i = 0; i < n; ++i) addUp(i);
    } else {
        std::vector<uint32_t> at_depth(size_t(deepest) + 2, 0);
        for (size_t i = 0; i < n; ++i)
            if (t.counted[i]) ++at_depth[size_t(t.depth[i]) + 1];
        for (size_t d = 1; d < at_depth.size(); ++d) at_depth[d] += at_depth[d - 1];
        std::vector<uint32_t> by_depth(at_depth.back());
        for (size_t i = 0; i < n; ++i)
            if (t.counted[i]) by_depth[at_depth[t.depth[i]]++] = uint32_t(i);
        for (size_t j = by_depth.size(); j-- > 0;) addUp(by_depth[j]);
    }
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
