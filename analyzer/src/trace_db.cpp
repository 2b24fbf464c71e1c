#include "sightline/trace_db.h"

#include "sightline/error.h"
#include "sightline/op_tree.h"
#include "sightline/taxonomy.h"
#include "op_tree_store.h"
#include "sqlite_util.h"

#include <fmt/format.h>

#include <exception>
#include <thread>

namespace sightline {

using detail::Db;
using detail::Stmt;

namespace {

// Schema version 4 (2 added `collectives`, 3 `op_tree`, 4 `counters`; a file of an earlier version
// reads without them). Documented in docs/trace-db.md; change both together and bump the version.
constexpr const char* kSchema = R"SQL(
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE strings(id INTEGER PRIMARY KEY, text TEXT NOT NULL);
CREATE TABLE threads(id INTEGER PRIMARY KEY, pid INTEGER NOT NULL, tid INTEGER NOT NULL, name_id INTEGER NOT NULL);
CREATE TABLE devices(id INTEGER PRIMARY KEY, name TEXT, total_memory INTEGER, compute_major INTEGER,
  compute_minor INTEGER, sm_count INTEGER, max_threads_per_sm INTEGER, shared_memory_per_sm INTEGER,
  registers_per_sm INTEGER);
CREATE TABLE cpu_events(id INTEGER PRIMARY KEY, kind INTEGER NOT NULL, name_id INTEGER NOT NULL,
  thread_id INTEGER NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, external_id INTEGER,
  correlation INTEGER, sequence INTEGER, cbid INTEGER, input_dims_id INTEGER, input_types_id INTEGER,
  parent_id INTEGER, depth INTEGER, counted INTEGER NOT NULL);
CREATE TABLE gpu_events(id INTEGER PRIMARY KEY, kind INTEGER NOT NULL, name_id INTEGER NOT NULL,
  device INTEGER, stream INTEGER, context INTEGER, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
  correlation INTEGER, external_id INTEGER, bytes INTEGER, grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,
  block_x INTEGER, block_y INTEGER, block_z INTEGER, registers INTEGER, shared_memory INTEGER);
CREATE TABLE overhead(id INTEGER PRIMARY KEY, name_id INTEGER NOT NULL, start_ns INTEGER, end_ns INTEGER);
CREATE TABLE flows(id INTEGER PRIMARY KEY, flow_id INTEGER, kind INTEGER, is_start INTEGER, thread_id INTEGER, ts_ns INTEGER);
CREATE TABLE kernel_classes(name_id INTEGER PRIMARY KEY, family TEXT NOT NULL, class TEXT NOT NULL);
CREATE TABLE collectives(id INTEGER PRIMARY KEY, op_external_id INTEGER NOT NULL, name_id INTEGER NOT NULL,
  dtype_id INTEGER NOT NULL, element_size INTEGER NOT NULL, in_elements INTEGER NOT NULL, out_elements INTEGER NOT NULL,
  group_name_id INTEGER NOT NULL, group_desc_id INTEGER NOT NULL, rank INTEGER NOT NULL, group_size INTEGER NOT NULL);
CREATE TABLE counters(id INTEGER PRIMARY KEY, name_id INTEGER NOT NULL, label_id INTEGER NOT NULL, device INTEGER NOT NULL,
  kind INTEGER NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, value REAL NOT NULL);
CREATE TABLE quality(key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE op_tree(key TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE cpu_kinds(kind INTEGER PRIMARY KEY, name TEXT);
CREATE TABLE gpu_kinds(kind INTEGER PRIMARY KEY, name TEXT);
CREATE VIEW ops AS
  SELECT e.id, k.name AS kind, s.text AS name, t.pid, t.tid, e.start_ns, e.end_ns, e.end_ns - e.start_ns AS dur_ns,
         e.external_id, e.parent_id, e.depth, e.counted
  FROM cpu_events e JOIN strings s ON s.id = e.name_id JOIN threads t ON t.id = e.thread_id
  JOIN cpu_kinds k ON k.kind = e.kind;
CREATE VIEW kernels AS
  SELECT g.id, k.name AS kind, s.text AS name, c.family, c.class, g.device, g.stream, g.start_ns, g.end_ns,
         g.end_ns - g.start_ns AS dur_ns, g.correlation, g.external_id, g.bytes
  FROM gpu_events g JOIN strings s ON s.id = g.name_id JOIN gpu_kinds k ON k.kind = g.kind
  LEFT JOIN kernel_classes c ON c.name_id = g.name_id;
CREATE VIEW comms AS
  SELECT c.id, n.text AS collective, d.text AS dtype, c.element_size, c.in_elements, c.out_elements,
         max(c.in_elements, c.out_elements) * c.element_size AS bytes, g.text AS group_name, gd.text AS group_desc,
         c.rank, c.group_size, c.op_external_id
  FROM collectives c JOIN strings n ON n.id = c.name_id JOIN strings d ON d.id = c.dtype_id
  JOIN strings g ON g.id = c.group_name_id JOIN strings gd ON gd.id = c.group_desc_id;
CREATE INDEX cpu_events_external ON cpu_events(external_id);
CREATE INDEX gpu_events_external ON gpu_events(external_id);
)SQL";

void writeKinds(Db& db) {
    Stmt s(db, "INSERT INTO cpu_kinds VALUES(?,?)");
    for (auto k : {CpuKind::Op, CpuKind::UserAnnotation, CpuKind::Runtime, CpuKind::Driver, CpuKind::PythonFunction})
        s.bind(1, int64_t(k)).bind(2, toString(k)).run();
    Stmt g(db, "INSERT INTO gpu_kinds VALUES(?,?)");
    for (auto k : {GpuKind::Kernel, GpuKind::Memcpy, GpuKind::Memset, GpuKind::Annotation})
        g.bind(1, int64_t(k)).bind(2, toString(k)).run();
}

void writeMeta(Db& db, const Trace& trace) {
    Stmt s(db, "INSERT INTO meta VALUES(?,?)");
    s.bind(1, "sightline_schema").bind(2, std::to_string(kTraceDbSchemaVersion)).run();
    s.bind(1, "source").bind(2, trace.source).run();
    s.bind(1, "format").bind(2, trace.format).run();
    if (!trace.recorder.empty()) s.bind(1, "recorder").bind(2, trace.recorder).run();
    for (const auto& [k, v] : trace.metadata)
        if (k != "sightline_schema" && k != "source" && k != "format" && k != "recorder")
            s.bind(1, k).bind(2, v).run();
}

void writeStrings(Db& db, const Trace& trace) {
    Stmt s(db, "INSERT INTO strings VALUES(?,?)");
    for (uint32_t i = 0; i < trace.strings.size(); ++i)
        s.bind(1, int64_t(i)).bind(2, trace.strings.view(StringId{i})).run();
}

void writeThreadsAndDevices(Db& db, const Trace& trace) {
    Stmt s(db, "INSERT INTO threads VALUES(?,?,?,?)");
    for (size_t i = 0; i < trace.threads.size(); ++i)
        s.bind(1, int64_t(i)).bind(2, trace.threads[i].pid).bind(3, trace.threads[i].tid).bind(4, int64_t(trace.threads[i].name.value)).run();
    Stmt d(db, "INSERT INTO devices VALUES(?,?,?,?,?,?,?,?,?)");
    for (const DeviceInfo& v : trace.devices)
        d.bind(1, v.id).bind(2, v.name).bind(3, v.total_memory).bind(4, v.compute_major).bind(5, v.compute_minor).bind(6, v.sm_count).bind(7, v.max_threads_per_sm).bind(8, v.shared_memory_per_sm).bind(9, v.registers_per_sm).run();
}

// CPU events with their op tree; progress runs over the CPU then the GPU events.
void writeCpuEvents(Db& db, const Trace& trace, const ProgressFn& progress, double total) {
    const OpTree tree = buildOpTree(trace);
    Stmt s(db, "INSERT INTO cpu_events VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    for (size_t i = 0; i < trace.cpu.size(); ++i) {
        const CpuEvent& e = trace.cpu[i];
        s.bind(1, int64_t(i)).bind(2, int64_t(e.kind)).bind(3, int64_t(e.name.value)).bind(4, int64_t(e.thread)).bind(5, e.start_ns).bind(6, e.end_ns).bind(7, e.external_id).bind(8, e.correlation).bind(9, e.sequence).bind(10, int64_t(e.cbid)).bind(11, int64_t(e.input_dims.value)).bind(12, int64_t(e.input_types.value));
        if (tree.parent[i] == OpTree::kNone) s.bindNull(13);
        else s.bind(13, int64_t(tree.parent[i]));
        s.bind(14, int64_t(tree.depth[i])).bind(15, int64_t(tree.counted[i])).run();
        if (progress && (i & 0xffff) == 0)
            progress(double(i) / total);
    }
    detail::writeStoredOpTree(db, tree, trace);
}

// GPU events, and the built-in taxonomy's class of each distinct kernel name.
void writeGpuEvents(Db& db, const Trace& trace, const ProgressFn& progress, double total) {
    Stmt s(db, "INSERT INTO gpu_events VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    std::vector<uint8_t> classified(trace.strings.size(), 0);
    Stmt c(db, "INSERT INTO kernel_classes VALUES(?,?,?)");
    const Taxonomy& taxonomy = Taxonomy::builtin();
    for (size_t i = 0; i < trace.gpu.size(); ++i) {
        const GpuEvent& g = trace.gpu[i];
        s.bind(1, int64_t(i)).bind(2, int64_t(g.kind)).bind(3, int64_t(g.name.value)).bind(4, g.device).bind(5, g.stream).bind(6, g.context).bind(7, g.start_ns).bind(8, g.end_ns).bind(9, g.correlation).bind(10, g.external_id).bind(11, int64_t(g.bytes)).bind(12, g.grid[0]).bind(13, g.grid[1]).bind(14, g.grid[2]).bind(15, g.block[0]).bind(16, g.block[1]).bind(17, g.block[2]).bind(18, g.registers).bind(19, g.shared_memory).run();
        if (g.kind != GpuKind::Annotation && !classified[g.name.value]) {
            classified[g.name.value] = 1;
            const KernelClass k = taxonomy.classify(trace.str(g.name));
            c.bind(1, int64_t(g.name.value)).bind(2, k.family).bind(3, k.name).run();
        }
        if (progress && (i & 0xffff) == 0)
            progress(double(trace.cpu.size() + i) / total);
    }
}

// Overhead spans, flows, collectives and the data-quality counters.
void writeSideTables(Db& db, const Trace& trace) {
    Stmt s(db, "INSERT INTO overhead VALUES(?,?,?,?)");
    for (size_t i = 0; i < trace.overhead.size(); ++i)
        s.bind(1, int64_t(i)).bind(2, int64_t(trace.overhead[i].name.value)).bind(3, trace.overhead[i].start_ns).bind(4, trace.overhead[i].end_ns).run();
    Stmt f(db, "INSERT INTO flows VALUES(?,?,?,?,?,?)");
    for (size_t i = 0; i < trace.flows.size(); ++i) {
        const FlowPoint& p = trace.flows[i];
        f.bind(1, int64_t(i)).bind(2, p.id).bind(3, int64_t(p.kind)).bind(4, int64_t(p.is_start)).bind(5, int64_t(p.thread)).bind(6, p.ts_ns).run();
    }
    Stmt c(db, "INSERT INTO collectives VALUES(?,?,?,?,?,?,?,?,?,?,?)");
    for (size_t i = 0; i < trace.collectives.size(); ++i) {
        const Collective& v = trace.collectives[i];
        c.bind(1, int64_t(i)).bind(2, v.op_id).bind(3, int64_t(v.name.value)).bind(4, int64_t(v.dtype.value)).bind(5, int64_t(v.element_size)).bind(6, v.in_elements).bind(7, v.out_elements).bind(8, int64_t(v.group_name.value)).bind(9, int64_t(v.group_desc.value)).bind(10, int64_t(v.rank)).bind(11, int64_t(v.group_size)).run();
    }
    Stmt k(db, "INSERT INTO counters VALUES(?,?,?,?,?,?,?,?)");
    for (size_t i = 0; i < trace.counters.size(); ++i) {
        const CounterSample& v = trace.counters[i];
        k.bind(1, int64_t(i)).bind(2, int64_t(v.name.value)).bind(3, int64_t(v.label.value)).bind(4, int64_t(v.device)).bind(5, int64_t(v.kind)).bind(6, v.start_ns).bind(7, v.end_ns).bindReal(8, v.value).run();
    }
    Stmt q(db, "INSERT INTO quality VALUES(?,?)");
    for (const QualityCounter& qf : kQualityCounters)
        q.bind(1, qf.name).bind(2, int64_t(trace.quality.*qf.field)).run();
}

} // namespace

void writeTraceDb(const Trace& trace, const std::filesystem::path& path, const ProgressFn& progress) {
    std::error_code ec;
    std::filesystem::remove(path, ec);
    Db db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    db.exec("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA locking_mode=EXCLUSIVE;");
    db.exec("BEGIN");
    db.exec(kSchema);
    db.exec(fmt::format("PRAGMA user_version={}", kTraceDbSchemaVersion).c_str());
    writeKinds(db);
    writeMeta(db, trace);
    writeStrings(db, trace);
    writeThreadsAndDevices(db, trace);
    const double total = double(trace.cpu.size() + trace.gpu.size() + 1);
    writeCpuEvents(db, trace, progress, total);
    writeGpuEvents(db, trace, progress, total);
    writeSideTables(db, trace);
    db.exec("COMMIT");
    if (progress)
        progress(1.0);
}

namespace {

// Opens a database for reading by one thread: no SQLite mutexes, pages mapped rather than copied.
Db openForReading(const std::filesystem::path& path) {
    Db db(path, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX);
    db.exec("PRAGMA mmap_size=1099511627776");
    return db;
}

template <typename Sid>
std::vector<CpuEvent> readCpuEvents(const std::filesystem::path& path, size_t threads, const Sid& sid) {
    Db db = openForReading(path);
    std::vector<CpuEvent> cpu;
    cpu.reserve(size_t(db.scalar("SELECT count(*) FROM cpu_events")));
    Stmt s(db, "SELECT kind, name_id, thread_id, start_ns, end_ns, external_id, correlation, sequence, cbid, "
               "input_dims_id, input_types_id FROM cpu_events ORDER BY id");
    while (s.next()) {
        CpuEvent e;
        e.kind = static_cast<CpuKind>(s.i64(0));
        e.name = sid(s.i64(1));
        e.thread = static_cast<uint32_t>(s.i64(2));
        e.start_ns = s.i64(3);
        e.end_ns = s.i64(4);
        e.external_id = s.i64(5);
        e.correlation = s.i64(6);
        e.sequence = s.i64(7);
        e.cbid = int32_t(s.i64(8));
        e.input_dims = sid(s.i64(9));
        e.input_types = sid(s.i64(10));
        if (e.thread >= threads)
            throw InputError(fmt::format("{}: damaged database (thread id {} out of range)", path.string(), e.thread));
        cpu.push_back(e);
    }
    return cpu;
}

// The schema version, after checking that this is a trace database this sightline reads.
int64_t checkedVersion(Db& db, const std::filesystem::path& path) {
    const int64_t version = db.scalar("PRAGMA user_version");
    if (version > kTraceDbSchemaVersion)
        throw InputError(fmt::format("{}: trace database schema {} is newer than this sightline reads "
                                     "(schema {}); update sightline",
                                     path.string(), version, kTraceDbSchemaVersion));
    const int64_t has_meta = db.scalar("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='meta'");
    if (version < 1 || !has_meta)
        throw InputError(fmt::format("{}: an SQLite database, but not a Sightline trace database", path.string()));
    return version;
}

void readMeta(Db& db, const std::filesystem::path& path, Trace& t) {
    Stmt s(db, "SELECT key, value FROM meta");
    while (s.next())
        t.metadata[std::string(s.text(0))] = std::string(s.text(1));
    t.source = t.metadata.count("source") ? t.metadata["source"] : path.string();
    // Databases written before the recorder was kept name it by the format they were written from.
    const std::string from = t.metadata.count("format") ? t.metadata["format"] : "";
    if (t.metadata.count("recorder")) t.recorder = t.metadata["recorder"];
    else if (from == "kineto-json") t.recorder = "torch.profiler";
    else if (from == "sightline-capture") t.recorder = "sightline";
    t.metadata.erase("recorder");
    t.metadata.erase("sightline_schema");
    t.metadata.erase("source");
    t.metadata.erase("format");
}

void readStrings(Db& db, const std::filesystem::path& path, Trace& t) {
    Stmt s(db, "SELECT id, text FROM strings ORDER BY id");
    while (s.next()) {
        const StringId id = t.strings.intern(s.text(1));
        if (int64_t(id.value) != s.i64(0))
            throw InputError(fmt::format("{}: damaged strings table (id {} read as {})", path.string(), s.i64(0), id.value));
    }
}

void readThreadsAndDevices(Db& db, Trace& t) {
    Stmt s(db, "SELECT pid, tid, name_id FROM threads ORDER BY id");
    while (s.next()) {
        const uint32_t i = t.threadIndex(s.i64(0), s.i64(1));
        t.threads[i].name = StringId{static_cast<uint32_t>(s.i64(2))};
    }
    Stmt d(db, "SELECT id, name, total_memory, compute_major, compute_minor, sm_count, max_threads_per_sm, "
               "shared_memory_per_sm, registers_per_sm FROM devices ORDER BY id");
    while (d.next()) {
        DeviceInfo v;
        v.id = int32_t(d.i64(0));
        v.name = d.text(1);
        v.total_memory = d.i64(2);
        v.compute_major = int32_t(d.i64(3));
        v.compute_minor = int32_t(d.i64(4));
        v.sm_count = int32_t(d.i64(5));
        v.max_threads_per_sm = int32_t(d.i64(6));
        v.shared_memory_per_sm = d.i64(7);
        v.registers_per_sm = int32_t(d.i64(8));
        t.devices.push_back(std::move(v));
    }
}

// A string id read from the database, checked against the strings table.
struct CheckedStringId {
    const std::filesystem::path& path;
    int64_t strings;
    StringId operator()(int64_t v) const {
        if (v < 0 || v >= strings)
            throw InputError(fmt::format("{}: damaged database (string id {} out of range)", path.string(), v));
        return StringId{static_cast<uint32_t>(v)};
    }
};

void readGpuEvents(Db& db, const CheckedStringId& sid, Trace& t) {
    t.gpu.reserve(size_t(db.scalar("SELECT count(*) FROM gpu_events")));
    Stmt s(db, "SELECT kind, name_id, device, stream, context, start_ns, end_ns, correlation, external_id, bytes, "
               "grid_x, grid_y, grid_z, block_x, block_y, block_z, registers, shared_memory FROM gpu_events ORDER BY id");
    while (s.next()) {
        GpuEvent g;
        g.kind = static_cast<GpuKind>(s.i64(0));
        g.name = sid(s.i64(1));
        g.device = int32_t(s.i64(2));
        g.stream = int32_t(s.i64(3));
        g.context = int32_t(s.i64(4));
        g.start_ns = s.i64(5);
        g.end_ns = s.i64(6);
        g.correlation = s.i64(7);
        g.external_id = s.i64(8);
        g.bytes = uint64_t(s.i64(9));
        g.grid = {int32_t(s.i64(10)), int32_t(s.i64(11)), int32_t(s.i64(12))};
        g.block = {int32_t(s.i64(13)), int32_t(s.i64(14)), int32_t(s.i64(15))};
        g.registers = int32_t(s.i64(16));
        g.shared_memory = int32_t(s.i64(17));
        t.gpu.push_back(g);
    }
}

// Overhead spans, flows, collectives (schema 2 on) and the data-quality counters.
void readSideTables(Db& db, int64_t version, const CheckedStringId& sid, Trace& t) {
    Stmt s(db, "SELECT name_id, start_ns, end_ns FROM overhead ORDER BY id");
    while (s.next())
        t.overhead.push_back(OverheadSpan{s.i64(1), s.i64(2), sid(s.i64(0))});
    Stmt f(db, "SELECT flow_id, kind, is_start, thread_id, ts_ns FROM flows ORDER BY id");
    while (f.next()) {
        FlowPoint p;
        p.id = f.i64(0);
        p.kind = static_cast<FlowKind>(f.i64(1));
        p.is_start = f.i64(2) != 0;
        p.thread = static_cast<uint32_t>(f.i64(3));
        p.ts_ns = f.i64(4);
        t.flows.push_back(p);
    }
    if (version >= 2) {
        Stmt c(db, "SELECT op_external_id, name_id, dtype_id, element_size, in_elements, out_elements, group_name_id, "
                   "group_desc_id, rank, group_size FROM collectives ORDER BY id");
        while (c.next()) {
            Collective v;
            v.op_id = c.i64(0);
            v.name = sid(c.i64(1));
            v.dtype = sid(c.i64(2));
            v.element_size = int32_t(c.i64(3));
            v.in_elements = c.i64(4);
            v.out_elements = c.i64(5);
            v.group_name = sid(c.i64(6));
            v.group_desc = sid(c.i64(7));
            v.rank = int32_t(c.i64(8));
            v.group_size = int32_t(c.i64(9));
            t.collectives.push_back(v);
        }
    }
    if (version >= 4) {
        Stmt k(db, "SELECT name_id, label_id, device, kind, start_ns, end_ns, value FROM counters ORDER BY id");
        while (k.next()) {
            CounterSample v;
            v.name = sid(k.i64(0));
            v.label = sid(k.i64(1));
            v.device = int32_t(k.i64(2));
            v.kind = k.i64(3) == int64_t(CounterKind::Memory) ? CounterKind::Memory : CounterKind::Hardware;
            v.start_ns = k.i64(4);
            v.end_ns = k.i64(5);
            v.value = k.f64(6);
            t.counters.push_back(v);
        }
    }
    Stmt q(db, "SELECT key, value FROM quality");
    while (q.next())
        for (const QualityCounter& qf : kQualityCounters)
            if (q.text(0) == qf.name)
                t.quality.*qf.field = uint64_t(q.i64(1));
}

} // namespace

Trace readTraceDb(const std::filesystem::path& path) {
    Db db = openForReading(path);
    const int64_t version = checkedVersion(db, path);
    Trace t;
    t.format = "sqlite";
    readMeta(db, path, t);
    readStrings(db, path, t);
    readThreadsAndDevices(db, t);
    const CheckedStringId sid{path, static_cast<int64_t>(t.strings.size())};
    // The CPU events are read on a second connection of their own while this one reads the rest.
    std::vector<CpuEvent> cpu;
    std::exception_ptr cpu_error;
    std::thread cpu_reader([&] {
        try {
            cpu = readCpuEvents(path, t.threads.size(), sid);
        } catch (...) {
            cpu_error = std::current_exception();
        }
    });
    struct Join {
        std::thread& th;
        ~Join() {
            if (th.joinable()) th.join();
        }
    } join{cpu_reader};
    readGpuEvents(db, sid, t);
    readSideTables(db, version, sid, t);
    cpu_reader.join();
    if (cpu_error) std::rethrow_exception(cpu_error);
    t.cpu = std::move(cpu);
    return t;
}

} // namespace sightline
