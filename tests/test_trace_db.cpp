// The trace database: a round trip keeps every table the same; newer or foreign databases are refused.
#include "sightline/error.h"
#include "sightline/import.h"
#include "sightline/op_tree.h"
#include "sightline/tables.h"
#include "sightline/trace_db.h"
#include "test_support.h"

#include <sqlite3.h>

#include <catch2/catch.hpp>

using namespace sightline;

namespace {

int64_t queryInt(const std::filesystem::path& db, const char* sql) {
    sqlite3* h = nullptr;
    REQUIRE(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    REQUIRE(sqlite3_prepare_v2(h, sql, -1, &s, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_step(s) == SQLITE_ROW);
    const int64_t v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(h);
    return v;
}

void execSql(const std::filesystem::path& db, const char* sql) {
    sqlite3* h = nullptr;
    REQUIRE(sqlite3_open(db.c_str(), &h) == SQLITE_OK);
    REQUIRE(sqlite3_exec(h, sql, nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(h);
}

} // namespace

TEST_CASE("a trace written to the database reads back with the same tables", "[trace_db]") {
    const auto dir = test::tempDir();
    const Trace original = importTrace(test::fixture("qwen3next_fallback_small.json.gz"));
    writeTraceDb(original, dir / "t.db");
    CHECK(detectFormat(dir / "t.db") == InputFormat::TraceDb);
    const Trace back = importTrace(dir / "t.db");
    CHECK(back.source == original.source);
    CHECK(back.cpu.size() == original.cpu.size());
    CHECK(back.gpu.size() == original.gpu.size());
    CHECK(back.flows.size() == original.flows.size());
    CHECK(back.metadata == original.metadata);
    CHECK(back.recorder == "torch.profiler"); // its cost per op prices the replay's far end (docs/rules.md)
    CHECK(back.quality.events_read == original.quality.events_read);
    REQUIRE(back.devices.size() == 1);
    CHECK(back.devices[0].sm_count == 132);

    test::requireSameTables(original, back);
}

TEST_CASE("the database answers SQL through its documented views", "[trace_db]") {
    const auto dir = test::tempDir();
    writeTraceDb(importTrace(test::fixture("qwen3next_fallback_small.json.gz")), dir / "t.db");
    CHECK(queryInt(dir / "t.db", "PRAGMA user_version") == kTraceDbSchemaVersion);
    CHECK(queryInt(dir / "t.db", "SELECT count(*) FROM ops WHERE name = 'aten::bmm' AND counted = 1") == 601);
    CHECK(queryInt(dir / "t.db", "SELECT count(*) FROM kernels WHERE kind = 'kernel'") == 4428);
    CHECK(queryInt(dir / "t.db", "SELECT count(*) FROM kernels WHERE class = 'Memcpy DtoD'") == 147);
    // Nesting is stored: every counted cudaLaunchKernel has a parent op.
    CHECK(queryInt(dir / "t.db", "SELECT count(*) FROM ops WHERE name = 'cudaLaunchKernel' AND parent_id IS NULL") == 0);
}

TEST_CASE("a database of a newer schema is refused with both versions named", "[trace_db]") {
    const auto dir = test::tempDir();
    writeTraceDb(importTrace(test::fixture("dense_healthy.json.gz")), dir / "new.db");
    execSql(dir / "new.db", "PRAGMA user_version = 7");
    CHECK_THROWS_WITH(importTrace(dir / "new.db"),
                      Catch::Contains("schema 7 is newer") &&
                          Catch::Contains("(schema " + std::to_string(kTraceDbSchemaVersion) + ")"));
}

TEST_CASE("an SQLite file that is not a Sightline database is refused", "[trace_db]") {
    const auto dir = test::tempDir();
    execSql(dir / "other.db", "CREATE TABLE t(x); INSERT INTO t VALUES(1);");
    CHECK_THROWS_AS(importTrace(dir / "other.db"), InputError);
    CHECK_THROWS_WITH(importTrace(dir / "other.db"), Catch::Contains("not a Sightline trace database"));
}

namespace {

void checkSameTree(const OpTree& a, const OpTree& b) {
    CHECK(a.parent == b.parent);
    CHECK(a.counted == b.counted);
    CHECK(a.thread == b.thread);
    CHECK(a.depth == b.depth);
    CHECK(a.self_cpu_ns == b.self_cpu_ns);
    CHECK(a.self_device_ns == b.self_device_ns);
    CHECK(a.device_total_ns == b.device_total_ns);
    CHECK(a.links.gpu_linked == b.links.gpu_linked);
    CHECK(a.links.gpu_without_id == b.links.gpu_without_id);
    CHECK(a.links.gpu_unmatched == b.links.gpu_unmatched);
    CHECK(a.links.api_linked == b.links.api_linked);
    CHECK(a.links.folded == b.links.folded);
    CHECK(a.links.excluded == b.links.excluded);
    CHECK(a.links.partial_overlaps == b.links.partial_overlaps);
}

} // namespace

TEST_CASE("the op tree stored in the database is the one the trace builds", "[trace_db]") {
    const auto dir = test::tempDir();
    for (const char* fixture : {"qwen3next_fallback_small.json.gz", "dense_healthy.json.gz"}) {
        INFO(fixture);
        writeTraceDb(importTrace(test::fixture(fixture)), dir / "t.db");
        const Trace back = importTrace(dir / "t.db");
        const std::optional<OpTree> stored = readStoredOpTree(dir / "t.db", back);
        REQUIRE(stored);
        const OpTree built = buildOpTree(back);
        CHECK(built.links.folded > 0); // the fixtures fold and link: the comparison covers both
        CHECK(built.links.gpu_linked > 0);
        checkSameTree(*stored, built);
    }
}

TEST_CASE("the stored op tree of events stored as they ended (children first) is the one built", "[trace_db]") {
    // As a collector writes ops, at their end: each child before its parent, a same-name single
    // child folded, API calls of two ops, kernels of each, on two threads.
    test::TraceBuilder b;
    b.op("aten::empty", 1, 2, 11).api("cudaLaunchKernel", 6, 3, 12).op("aten::mm", 5, 10, 12).op("aten::mm", 4, 12, 13).op("aten::linear", 0, 20, 14).op("train_step", 0, 30, 15, 1, CpuKind::UserAnnotation).api("cudaLaunchKernel", 3, 1, 21, 2).op("aten::add", 2, 5, 21, 2).op("autograd::engine", 0, 10, 22, 2).kernel("nvjet_sm90_tst_256x128", 20, 40, 12).kernel("vectorized_elementwise_kernel", 61, 5, 21);
    const auto dir = test::tempDir();
    writeTraceDb(b.build(), dir / "t.db");
    const Trace back = importTrace(dir / "t.db");
    const OpTree built = buildOpTree(back);
    CHECK(built.links.folded == 1);
    CHECK(built.device_total_ns[5] == 40'000); // the step holds its thread's kernel (the folded mm's)
    CHECK(built.device_total_ns[8] == 5'000);  // the other thread's
    for (size_t i = 0; i < back.cpu.size(); ++i)
        if (built.parent[i] != OpTree::kNone) CHECK(size_t(built.parent[i]) > i); // the one-pass case
    const std::optional<OpTree> stored = readStoredOpTree(dir / "t.db", back);
    REQUIRE(stored);
    checkSameTree(*stored, built);
}

TEST_CASE("a trace of GPU activities without CPU events (kernels recorded alone) is written and read back", "[trace_db]") {
    // Its op tree is empty: each part an empty blob, which SQLite binds as NULL from a null pointer.
    test::TraceBuilder b;
    b.kernel("vectorized_elementwise_kernel", 10, 5, 1).kernel("nvjet_sm90_tst_256x128", 20, 40, 2);
    const auto dir = test::tempDir();
    writeTraceDb(b.build(), dir / "t.db");
    CHECK(queryInt(dir / "t.db", "SELECT count(*) FROM gpu_events") == 2);
    CHECK(queryInt(dir / "t.db", "SELECT count(*) FROM op_tree WHERE data IS NOT NULL AND length(data) = 0") >= 5);
    const Trace back = importTrace(dir / "t.db");
    CHECK(back.cpu.empty());
    CHECK(back.gpu.size() == 2);
    const std::optional<OpTree> stored = readStoredOpTree(dir / "t.db", back);
    REQUIRE(stored);
    CHECK(stored->parent.empty());
}

TEST_CASE("a stored op tree that does not fit its events is not used, and none is stored before schema 3", "[trace_db]") {
    const auto dir = test::tempDir();
    writeTraceDb(importTrace(test::fixture("dense_healthy.json.gz")), dir / "t.db");
    const Trace back = importTrace(dir / "t.db");
    const OpTree built = buildOpTree(back);
    REQUIRE(readStoredOpTree(dir / "t.db", back));
    auto variant = [&](const char* name, const std::string& sql) {
        std::filesystem::copy_file(dir / "t.db", dir / name);
        execSql(dir / name, sql.c_str());
        return dir / name;
    };
    // A part cut short; depths that contradict the parents (the bottom-up order rests on them).
    for (const auto& path : {variant("short.db", "UPDATE op_tree SET data = x'00010203' WHERE key = 'parent'"),
                             variant("depth.db", "UPDATE op_tree SET data = zeroblob(length(data)) WHERE key = 'depth'")}) {
        INFO(path);
        CHECK_FALSE(readStoredOpTree(path, back));
        checkSameTree(opTreeOf(back, path), built); // rebuilt
    }
    // An event left out of the tree given a parent far out of range: never followed.
    size_t left_out = 0;
    while (left_out < built.counted.size() && built.counted[left_out]) ++left_out;
    REQUIRE(left_out < built.counted.size());
    const std::string at = std::to_string(4 * left_out);
    CHECK_FALSE(readStoredOpTree(variant("parent.db", "UPDATE op_tree SET data = substr(data, 1, " + at + ") || x'FFFFFF7F' || substr(data, " + at + " + 5) WHERE key = 'parent'"),
                                 back));
    // A kernel's time changed with SQL after the import: the stored device times no longer fit.
    const auto edited = variant("edited.db", "UPDATE gpu_events SET end_ns = end_ns + 1000 WHERE id = 0");
    const Trace changed = importTrace(edited);
    CHECK_FALSE(readStoredOpTree(edited, changed));
    checkSameTree(opTreeOf(changed, edited), buildOpTree(changed));
    execSql(dir / "t.db", "DROP TABLE op_tree; PRAGMA user_version = 2");
    CHECK_FALSE(readStoredOpTree(dir / "t.db", importTrace(dir / "t.db")));
}

TEST_CASE("counter samples are stored in the database and read back, and a schema 3 database has none", "[trace_db]") {
    const auto dir = test::tempDir();
    Trace t = test::TraceBuilder().op("aten::mm", 0, 50, 1).kernel("gemm", 10, 30, 1).build();
    for (int i = 0; i < 3; ++i) {
        CounterSample c;
        c.start_ns = 10'000 + i * 1000;
        c.end_ns = c.start_ns + 1000;
        c.value = 0.1 + i;
        c.name = t.strings.intern("sm__cycles_active.avg.pct_of_peak_sustained_elapsed");
        c.label = i == 2 ? t.strings.intern("gemm") : StringId{};
        c.device = i == 1 ? -1 : 0;
        c.kind = i == 1 ? CounterKind::Memory : CounterKind::Hardware;
        t.counters.push_back(c);
    }
    writeTraceDb(t, dir / "t.db");
    const Trace back = importTrace(dir / "t.db");
    REQUIRE(back.counters.size() == 3);
    for (size_t i = 0; i < 3; ++i) {
        CHECK(back.counters[i].start_ns == t.counters[i].start_ns);
        CHECK(back.counters[i].end_ns == t.counters[i].end_ns);
        CHECK(back.counters[i].value == t.counters[i].value);
        CHECK(back.counters[i].device == t.counters[i].device);
        CHECK(back.counters[i].kind == t.counters[i].kind);
        CHECK(back.str(back.counters[i].name) == t.str(t.counters[i].name));
        CHECK(back.str(back.counters[i].label) == t.str(t.counters[i].label));
    }
    CHECK(queryInt(dir / "t.db", "SELECT count(*) FROM counters WHERE device = 0") == 2);
    execSql(dir / "t.db", "DROP TABLE counters; PRAGMA user_version = 3");
    const Trace old = importTrace(dir / "t.db");
    CHECK(old.counters.empty());
    CHECK(old.cpu.size() == t.cpu.size());
}
