// The Kineto JSON importer on the real fixtures: counts, fields, and that the windowed reader and
// the whole-document reader build the same trace.
#include "sightline/comms.h"
#include "sightline/import.h"
#include "test_support.h"

#include <algorithm>

#include <catch2/catch.hpp>

using namespace sightline;

namespace {

size_t countCpu(const Trace& t, CpuKind k) {
    return size_t(std::count_if(t.cpu.begin(), t.cpu.end(), [k](const CpuEvent& e) { return e.kind == k; }));
}
size_t countGpu(const Trace& t, GpuKind k) {
    return size_t(std::count_if(t.gpu.begin(), t.gpu.end(), [k](const GpuEvent& e) { return e.kind == k; }));
}

Trace importText(std::string text) {
    text.append(64, ' '); // simdjson's padding
    return importKinetoJson(text.data(), text.size() - 64, text.size(), "memory");
}

void requireSameTrace(const Trace& a, const Trace& b) {
    REQUIRE(a.cpu.size() == b.cpu.size());
    REQUIRE(a.gpu.size() == b.gpu.size());
    REQUIRE(a.flows.size() == b.flows.size());
    REQUIRE(a.metadata == b.metadata);
    REQUIRE(a.devices.size() == b.devices.size());
    for (size_t i = 0; i < a.cpu.size(); ++i) {
        const CpuEvent &x = a.cpu[i], &y = b.cpu[i];
        REQUIRE((x.start_ns == y.start_ns && x.end_ns == y.end_ns && a.str(x.name) == b.str(y.name) &&
                 x.external_id == y.external_id && x.correlation == y.correlation && x.kind == y.kind &&
                 a.str(x.input_dims) == b.str(y.input_dims)));
    }
    for (size_t i = 0; i < a.gpu.size(); ++i) {
        const GpuEvent &x = a.gpu[i], &y = b.gpu[i];
        REQUIRE((x.start_ns == y.start_ns && x.end_ns == y.end_ns && a.str(x.name) == b.str(y.name) &&
                 x.external_id == y.external_id && x.grid == y.grid && x.bytes == y.bytes));
    }
}

} // namespace

TEST_CASE("the GDN fixture imports with the counts its README gives", "[import]") {
    const Trace t = importTrace(test::fixture("qwen3next_fallback_small.json.gz"));
    CHECK(t.format == "kineto-json");
    CHECK(t.quality.events_read == 49'358);
    CHECK(countCpu(t, CpuKind::Op) == 24'735);
    CHECK(countCpu(t, CpuKind::Runtime) == 4'476);
    CHECK(countCpu(t, CpuKind::Driver) == 162);
    CHECK(countCpu(t, CpuKind::UserAnnotation) == 3);
    CHECK(countGpu(t, GpuKind::Kernel) == 4'428);
    CHECK(countGpu(t, GpuKind::Memcpy) == 150);
    CHECK(countGpu(t, GpuKind::Memset) == 33);
    CHECK(countGpu(t, GpuKind::Annotation) == 2);
    CHECK(t.overhead.size() == 1);
    REQUIRE(t.devices.size() == 1);
    CHECK(t.devices[0].name == "NVIDIA H200");
    CHECK(t.devices[0].sm_count == 132);
    CHECK(t.devices[0].total_memory == 150109880320);
    CHECK(t.metadata.at("cupti_version") == "130001");
    CHECK(t.metadata.at("baseTimeNanoseconds") == "1790857026000000000");
}

TEST_CASE("event fields are read exactly", "[import]") {
    const Trace t = importTrace(test::fixture("qwen3next_fallback_small.json.gz"));
    // The first kernel: vectorized_gather_kernel, ts 5098519330814.337, dur 2.816, grid [1024,1,1]
    auto k = std::find_if(t.gpu.begin(), t.gpu.end(), [&](const GpuEvent& g) { return g.kind == GpuKind::Kernel; });
    REQUIRE(k != t.gpu.end());
    CHECK(t.str(k->name).rfind("void at::native::vectorized_gather_kernel<16, long>", 0) == 0);
    CHECK(k->start_ns == 5098519330814337LL);
    CHECK(k->duration() == 2816);
    CHECK(k->external_id == 77323);
    CHECK(k->correlation == 334650);
    CHECK(k->stream == 7);
    CHECK(k->registers == 32);
    CHECK(k->grid == std::array<int32_t, 3>{1024, 1, 1});
    CHECK(k->block == std::array<int32_t, 3>{128, 1, 1});
    // Shapes were recorded: some op carries its input dims.
    CHECK(std::any_of(t.cpu.begin(), t.cpu.end(), [&](const CpuEvent& e) { return !e.input_dims.empty(); }));
}

TEST_CASE("windowed and whole-document reading give the same trace", "[import]") {
    // The fixture (16.7 MB) spans three 8 MiB windows. With every line break turned into a space the
    // layout has no window boundaries, so the same JSON goes through the single-document reader.
    std::string text = test::gunzip(test::fixture("qwen3next_fallback_small.json.gz"));
    REQUIRE(text.size() > 16'000'000);
    const Trace windowed = importText(text);
    std::string flat = text;
    std::replace(flat.begin(), flat.end(), '\n', ' ');
    const Trace whole = importText(flat);
    requireSameTrace(windowed, whole);
    CHECK(windowed.quality.events_read == 49'358);
}

TEST_CASE("a window boundary candidate inside an event falls back to the whole document", "[import]") {
    // An args object printed across lines with a list of objects: "},\n{" inside an event.
    const std::string text = R"({"traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0,
   "args": {"External id": 1, "list": [{"x": 1},
   {"y": 2}]}},
  {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 1.5, "dur": 0.5, "args": {"External id": 2}}
]})";
    const Trace t = importText(text);
    REQUIRE(t.cpu.size() == 2);
    CHECK(t.str(t.cpu[1].name) == "b");
}

TEST_CASE("the bare-list form of the Chrome trace format is read", "[import]") {
    const Trace t = importText(R"([{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 3, "tid": 4, "ts": 10.5, "dur": 1.25}])");
    REQUIRE(t.cpu.size() == 1);
    CHECK(t.cpu[0].start_ns == 10'500);
    CHECK(t.cpu[0].duration() == 1'250);
}

TEST_CASE("plain and gzip JSON give the same trace", "[import]") {
    const auto dir = test::tempDir();
    test::writeFile(dir / "trace.json", test::gunzip(test::fixture("dense_healthy.json.gz")));
    CHECK(detectFormat(dir / "trace.json") == InputFormat::KinetoJson);
    CHECK(detectFormat(test::fixture("dense_healthy.json.gz")) == InputFormat::KinetoJsonGz);
    requireSameTrace(importTrace(dir / "trace.json"), importTrace(test::fixture("dense_healthy.json.gz")));
}

TEST_CASE("progress is reported and ends at completion", "[import]") {
    std::vector<double> seen;
    importTrace(test::fixture("qwen3next_fallback_small.json.gz"), [&](double f) { seen.push_back(f); });
    REQUIRE(seen.size() >= 2);
    CHECK(std::is_sorted(seen.begin(), seen.end()));
    CHECK(seen.back() == 1.0);
}

TEST_CASE("a PyTorch profiler trace's collective metadata is read from its record_param_comms op", "[import][comms]") {
    // As Kineto writes an NCCL all-reduce: the op with c10d's metadata in its args, the launch, and
    // the kernel (which repeats the metadata: read from the op alone, so counted once).
    const Trace t = importText(R"json({"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 100, "dur": 50,
       "args": {"External id": 7, "Collective name": "allreduce", "dtype": "BFloat16", "In msg nelems": 1048576,
                "Out msg nelems": 1048576, "Group size": 2, "Process Group Name": "0",
                "Process Group Description": "default_pg", "Rank": 1}},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 110, "dur": 5,
       "args": {"External id": 7, "correlation": 99, "cbid": 211}},
      {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
       "pid": 0, "tid": 7, "ts": 120, "dur": 1000,
       "args": {"External id": 7, "correlation": 99, "device": 0, "stream": 7, "Collective name": "allreduce",
                "dtype": "BFloat16", "In msg nelems": 1048576, "Out msg nelems": 1048576, "Group size": 2}},
      {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 200, "dur": 5, "args": {"External id": 8}}
    ]})json");
    REQUIRE(t.collectives.size() == 1);
    const Collective& c = t.collectives[0];
    CHECK(c.op_id == 7);
    CHECK(t.str(c.name) == "allreduce");
    CHECK(t.str(c.dtype) == "BFloat16");
    CHECK(c.element_size == 2);
    CHECK(c.in_elements == 1048576);
    CHECK(c.out_elements == 1048576);
    CHECK(c.group_size == 2);
    CHECK(c.rank == 1);
    CHECK(t.str(c.group_name) == "0");
    CHECK(t.str(c.group_desc) == "default_pg");
    const auto rows = commTable(t, buildOpTree(t), Taxonomy::builtin());
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].timing == CommTiming::GpuKernels);
    CHECK(rows[0].bytes == 2 * 1048576);
    CHECK(rows[0].total_ns == 1'000'000);
    CHECK(rows[0].algbw_gbps() == Approx(2.097152));
    CHECK(rows[0].busbw_gbps() == Approx(2.097152)); // all-reduce over 2 ranks: 2(n-1)/n = 1
    CHECK(dtypeElementSize("Float") == 4);
    CHECK(dtypeElementSize("Float8_e4m3fn") == 1);
    CHECK(dtypeElementSize("NoSuchType") == 0);
}

TEST_CASE("PyTorch's counters become counter samples: range-profiler ranges, counter events, memory instants", "[import][hardware]") {
    // cuda_profiler_range: one event per kernel (named for it), the metrics as arguments, times
    // spread by PyTorch; a hardware counter event of a "GPU 0 Counters" process; [memory] instants.
    const Trace t = importText(R"JSON({"traceEvents": [
      {"ph": "X", "cat": "cuda_profiler_range", "name": "void fft2d_r2c_32x32<float>(...)", "pid": 0, "tid": 0, "ts": 100, "dur": 50,
       "args": {"smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": 86114304, "sm__inst_executed_pipe_tensor.sum": 0}},
      {"ph": "X", "cat": "cuda_profiler_range", "name": "ampere_sgemm_64x64_nn", "pid": 0, "tid": 0, "ts": 150, "dur": 50,
       "args": {"smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": 12, "sm__inst_executed_pipe_tensor.sum": 7}},
      {"ph": "C", "cat": "hardware_counters", "name": "sm__cycles_active.avg.pct_of_peak_sustained_elapsed", "pid": "GPU 1 Counters", "tid": 0,
       "ts": 200, "args": {"": 61.5}},
      {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 7, "tid": 7, "ts": 300, "s": "t",
       "args": {"Total Reserved": 2097152, "Total Allocated": 1048576, "Bytes": 512, "Addr": 1, "Device Type": 1, "Device Id": 0}}
    ]})JSON");
    REQUIRE(t.counters.size() == 7);
    const CounterSample& r = t.counters[0];
    CHECK(t.str(r.label) == "void fft2d_r2c_32x32<float>(...)");
    CHECK(t.str(r.name) == "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum");
    CHECK(r.value == 86114304.0);
    CHECK(r.device == 0);
    CHECK(r.kind == CounterKind::Hardware);
    CHECK(t.str(t.counters[3].name) == "sm__inst_executed_pipe_tensor.sum");
    CHECK(t.counters[3].value == 7.0);
    const CounterSample& c = t.counters[4];
    CHECK(t.str(c.name) == "sm__cycles_active.avg.pct_of_peak_sustained_elapsed");
    CHECK(c.device == 1);
    CHECK(c.start_ns == 200'000);
    CHECK(c.label.empty());
    CHECK(c.value == 61.5);
    CHECK(t.str(t.counters[5].name) == "Total Allocated");
    CHECK(t.counters[5].value == 1048576.0);
    CHECK(t.counters[5].kind == CounterKind::Memory);
    CHECK(t.counters[5].device == 0);
    CHECK(t.str(t.counters[6].name) == "Total Reserved");
    CHECK(t.cpu.empty()); // none of them is an op
}
