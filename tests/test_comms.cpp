// The communication table: NCCL's bus-bandwidth factors, message sizes, and the table's rows on
// synthetic traces (GPU collectives timed on their kernels, gloo ones on the backend's range or
// the op, nested collectives counted once), through the trace database too.
#include "sightline/comms.h"
#include "sightline/import.h"
#include "sightline/op_tree.h"
#include "sightline/trace_db.h"
#include "sightline/report/report.h"
#include "test_support.h"

#include <cmath>

#include <sqlite3.h>

#include <catch2/catch.hpp>

using namespace sightline;

namespace {

// Metadata for the op with external id `op`, as the collector records it.
void addCollective(Trace& t, int64_t op, const std::string& name, const std::string& dtype, int32_t element_size,
                   int64_t in, int64_t out, int32_t group_size, const std::string& group = "0") {
    Collective c;
    c.op_id = op;
    c.name = t.strings.intern(name);
    c.dtype = t.strings.intern(dtype);
    c.element_size = element_size;
    c.in_elements = in;
    c.out_elements = out;
    c.group_name = t.strings.intern(group);
    c.group_desc = t.strings.intern(group == "0" ? "default_pg" : "tp");
    c.rank = 0;
    c.group_size = group_size;
    t.collectives.push_back(c);
}

const CommRow* findRow(const std::vector<CommRow>& rows, const std::string& collective, int64_t bytes) {
    for (const CommRow& r : rows)
        if (r.collective == collective && r.bytes == bytes) return &r;
    return nullptr;
}

constexpr const char* kAllReduceKernel = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
constexpr const char* kAllGatherKernel = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)";

// Three 1 MiB float all-reduces over 4 ranks (100 us of kernel each, launched inside the
// backend's "nccl:all_reduce" range within the collective's op), one 64 KiB one, an
// all-gather of bf16 over a group of 2, a collective whose op is missing, and a nested pair:
// c10d's dispatcher op around the backend's record_param_comms, both with metadata.
Trace gpuJob() {
    test::TraceBuilder b;
    for (int i = 0; i < 3; ++i) {
        const int64_t id = 10 + i;
        // As ProcessGroupNCCL records them: the kernel is launched inside the backend's own range.
        b.op("record_param_comms", 1000.0 * i, 20, id).op("nccl:all_reduce", 1000.0 * i + 2, 15, 100 + id).kernel(kAllReduceKernel, 1000.0 * i + 30, 100, 100 + id);
    }
    b.op("record_param_comms", 5000, 20, 20).kernel(kAllReduceKernel, 5030, 40, 20);
    b.op("c10d::_allgather_base_", 6000, 50, 30).op("record_param_comms", 6010, 20, 31).kernel(kAllGatherKernel, 6040, 25, 31);
    Trace t = b.build();
    for (int i = 0; i < 3; ++i) addCollective(t, 10 + i, "allreduce", "Float", 4, 262144, 262144, 4);
    addCollective(t, 20, "allreduce", "Float", 4, 16384, 16384, 4);
    addCollective(t, 30, "_allgather_base", "BFloat16", 2, 1024, 2048, 2, "1");
    addCollective(t, 31, "_allgather_base", "BFloat16", 2, 1024, 2048, 2, "1");
    addCollective(t, 99, "allreduce", "Float", 4, 8, 8, 4); // its op is not in the trace
    return t;
}

} // namespace

TEST_CASE("comms: bus bandwidth factors follow NCCL's convention", "[comms]") {
    CHECK(busBandwidthFactor("allreduce", 8) == Approx(2.0 * 7 / 8));
    CHECK(busBandwidthFactor("allreduce_coalesced", 2) == Approx(1.0));
    CHECK(busBandwidthFactor("_allgather_base", 4) == Approx(0.75));
    CHECK(busBandwidthFactor("allgather_into_tensor_coalesced", 4) == Approx(0.75));
    CHECK(busBandwidthFactor("reduce_scatter", 2) == Approx(0.5));
    CHECK(busBandwidthFactor("_reduce_scatter_base", 8) == Approx(7.0 / 8));
    CHECK(busBandwidthFactor("alltoall_base", 4) == Approx(0.75));
    for (const char* once : {"broadcast", "reduce", "send", "recv"}) {
        INFO(once);
        CHECK(busBandwidthFactor(once, 8) == 1.0);
        CHECK(busBandwidthFactor(once, 0) == 1.0); // n does not matter
    }
    CHECK(std::isnan(busBandwidthFactor("barrier", 8)));
    CHECK(std::isnan(busBandwidthFactor("allreduce", 0))); // group size unknown
    CHECK(std::isnan(busBandwidthFactor("frobnicate", 8)));
    CHECK(busBandwidthFactor("allreduce", 1) == 0.0); // one rank moves nothing
}

TEST_CASE("comms: message size and algorithm bandwidth", "[comms]") {
    Collective gather;
    gather.element_size = 2;
    gather.in_elements = 5;
    gather.out_elements = 10;
    CHECK(messageBytes(gather) == 20); // the gathered output
    Collective scatter = gather;
    std::swap(scatter.in_elements, scatter.out_elements);
    CHECK(messageBytes(scatter) == 20);                                     // the whole input
    CHECK(algorithmBandwidth(1'000'000'000, 1'000'000'000) == Approx(1.0)); // 1 GB in 1 s
    CHECK(algorithmBandwidth(4096, 1000) == Approx(4.096));
    CHECK(std::isnan(algorithmBandwidth(4096, 0)));
    CHECK(std::isnan(algorithmBandwidth(0, 1000)));
}

TEST_CASE("comms: GPU collectives are rows by size and group, timed on their NCCL kernels", "[comms]") {
    const Trace t = gpuJob();
    const auto rows = commTable(t, buildOpTree(t), Taxonomy::builtin());
    REQUIRE(rows.size() == 3);
    CHECK(rows[0].collective == "allreduce"); // by total time: 300 us first

    const CommRow* big = findRow(rows, "allreduce", 1 << 20);
    REQUIRE(big);
    CHECK(big->calls == 3);
    CHECK(big->total_ns == 300'000);
    CHECK(big->timing == CommTiming::GpuKernels);
    CHECK(big->dtype == "Float");
    CHECK(big->group == "0");
    CHECK(big->group_desc == "default_pg");
    CHECK(big->group_size == 4);
    CHECK(big->in_elements == 262144);
    CHECK(big->algbw_gbps() == Approx(3.0 * (1 << 20) / 300'000.0));
    CHECK(big->busbw_gbps() == Approx(1.5 * 3.0 * (1 << 20) / 300'000.0));

    const CommRow* small = findRow(rows, "allreduce", 65536);
    REQUIRE(small);
    CHECK(small->calls == 1);
    CHECK(small->total_ns == 40'000);

    // The dispatcher op and its record_param_comms are one call, timed on the inner op's kernel.
    const CommRow* gather = findRow(rows, "_allgather_base", 4096);
    REQUIRE(gather);
    CHECK(gather->calls == 1);
    CHECK(gather->total_ns == 25'000);
    CHECK(gather->group == "1");
    CHECK(gather->busbw_gbps() == Approx(0.5 * 4096 / 25'000.0));
}

TEST_CASE("comms: CPU collectives are timed on the backend's range, else on the op", "[comms]") {
    test::TraceBuilder b;
    // Two all-reduces: each gloo range starts on the backend's thread after its call returned.
    b.op("c10d::allreduce_", 0, 10, 1).op("gloo:all_reduce", 15, 500, 2, 9, CpuKind::UserAnnotation);
    b.op("c10d::allreduce_", 1000, 10, 3).op("gloo:all_reduce", 1012, 300, 4, 9, CpuKind::UserAnnotation);
    // A broadcast whose range was not recorded: its op's own time.
    b.op("c10d::broadcast_", 2000, 40, 5);
    b.op("c10d::barrier", 3000, 5, 6).op("gloo:barrier", 3001, 70, 7, 9, CpuKind::UserAnnotation);
    Trace t = b.build();
    addCollective(t, 1, "allreduce", "Float", 4, 1000, 1000, 2);
    addCollective(t, 3, "allreduce", "Float", 4, 1000, 1000, 2);
    addCollective(t, 5, "broadcast", "Long", 8, 10, 10, 2);
    addCollective(t, 6, "barrier", "Byte", 1, 1, 1, 2);
    const auto rows = commTable(t, buildOpTree(t), Taxonomy::builtin());
    REQUIRE(rows.size() == 3);

    const CommRow* reduce = findRow(rows, "allreduce", 4000);
    REQUIRE(reduce);
    CHECK(reduce->timing == CommTiming::BackendRange);
    CHECK(reduce->calls == 2);
    CHECK(reduce->total_ns == 800'000);
    CHECK(reduce->busbw_gbps() == Approx(8000.0 / 800'000.0)); // 2(n-1)/n = 1 for two ranks

    const CommRow* bcast = findRow(rows, "broadcast", 80);
    REQUIRE(bcast);
    CHECK(bcast->timing == CommTiming::CpuOp);
    CHECK(bcast->total_ns == 40'000);

    const CommRow* barrier = findRow(rows, "barrier", 1);
    REQUIRE(barrier);
    CHECK(barrier->timing == CommTiming::BackendRange);
    CHECK(barrier->total_ns == 70'000);
    CHECK(std::isnan(barrier->algbw_gbps())); // a barrier moves no message
}

TEST_CASE("comms: the report has a communication section only when collectives were recorded", "[comms]") {
    const Trace t = gpuJob();
    const ReportOptions o;
    const Report r = buildReport(t, Taxonomy::builtin(), RuleSet::builtin(), o);
    REQUIRE(r.comms.size() == 3);
    const std::string text = formatText(r, o);
    CHECK_THAT(text, Catch::Contains("Communication (3 rows, by total)"));
    CHECK_THAT(text, Catch::Contains("GPU kernels"));
    CHECK_THAT(formatJson(r, o), Catch::Contains("\"busbw_gbps\": 15.72"));

    test::TraceBuilder plain;
    plain.op("aten::mm", 0, 10, 1).kernel("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", 2, 5, 1);
    const Report none = buildReport(plain.build(), Taxonomy::builtin(), RuleSet::builtin(), o);
    CHECK(none.comms.empty());
    CHECK_THAT(formatText(none, o), !Catch::Contains("Communication"));
    CHECK_THAT(formatJson(none, o), Catch::Contains("\"communication\": []"));
}

TEST_CASE("comms: collectives survive the trace database, and a schema 1 database reads with none", "[comms][trace_db]") {
    const auto dir = test::tempDir();
    const Trace t = gpuJob();
    writeTraceDb(t, dir / "c.db");
    const Trace back = importTrace(dir / "c.db");
    REQUIRE(back.collectives.size() == t.collectives.size());
    for (size_t i = 0; i < t.collectives.size(); ++i) {
        const Collective &a = t.collectives[i], &b = back.collectives[i];
        CHECK(back.str(b.name) == t.str(a.name));
        CHECK(back.str(b.dtype) == t.str(a.dtype));
        CHECK(back.str(b.group_name) == t.str(a.group_name));
        CHECK(b.op_id == a.op_id);
        CHECK(b.in_elements == a.in_elements);
        CHECK(b.out_elements == a.out_elements);
        CHECK(b.element_size == a.element_size);
        CHECK(b.group_size == a.group_size);
    }
    const auto rows = commTable(back, buildOpTree(back), Taxonomy::builtin());
    CHECK(rows.size() == 3);

    // What schema 1 was: no collectives table.
    sqlite3* h = nullptr;
    REQUIRE(sqlite3_open((dir / "c.db").c_str(), &h) == SQLITE_OK);
    REQUIRE(sqlite3_exec(h, "DROP VIEW comms; DROP TABLE collectives; PRAGMA user_version = 1", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(h);
    const Trace old = importTrace(dir / "c.db");
    CHECK(old.collectives.empty());
    CHECK(old.cpu.size() == t.cpu.size());
}
