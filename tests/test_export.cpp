// sightline export: Chrome trace-event JSON that Sightline's own Kineto importer reads back with
// the same tables, valid whatever the trace's strings hold, exact on any clock.
#include "sightline/chrome_export.h"
#include "sightline/error.h"
#include "sightline/import.h"
#include "sightline/steps.h"
#include "synthetic_training.h"
#include "test_support.h"

#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>

using namespace sightline;
using nlohmann::json;

namespace {

json exportedJson(const Trace& trace, const std::vector<ExportMarker>& markers = {}, ExportStats* stats = nullptr) {
    const auto path = test::tempDir() / "out.json";
    const ExportStats st = exportChromeTrace(trace, path, markers);
    if (stats) *stats = st;
    return json::parse(test::readFile(path)); // throws on anything that is not strict JSON
}

std::vector<json> eventsOf(const json& doc, const std::string& ph) {
    std::vector<json> out;
    for (const json& e : doc.at("traceEvents"))
        if (e.at("ph") == ph) out.push_back(e);
    return out;
}

} // namespace

TEST_CASE("the bundled fixtures export and read back with the same op and kernel tables", "[export]") {
    for (const char* name : {"qwen3next_fallback_small.json.gz", "dense_healthy.json.gz"}) {
        INFO(name);
        const Trace source = importTrace(test::fixture(name));
        const Trace back = test::exportAndReimport(source);
        CHECK(back.cpu.size() == source.cpu.size());
        CHECK(back.gpu.size() == source.gpu.size());
        CHECK(back.overhead.size() == source.overhead.size());
        CHECK(back.metadata == source.metadata);
        REQUIRE(back.devices.size() == source.devices.size());
        CHECK(back.devices[0].name == source.devices[0].name);
        CHECK(back.devices[0].sm_count == source.devices[0].sm_count);
        CHECK(back.devices[0].total_memory == source.devices[0].total_memory);
        test::requireSameTables(source, back);
        const auto a = detectSteps(source), b = detectSteps(back);
        REQUIRE(a.size() == b.size());
        for (size_t i = 0; i < a.size(); ++i) {
            CHECK(a[i].name == b[i].name);
            CHECK(a[i].start_ns == b[i].start_ns);
            CHECK(a[i].end_ns == b[i].end_ns);
        }
    }
}

TEST_CASE("synthetic training steps export with the same tables", "[export]") {
    const Trace source = test::healthyStep([](test::SyntheticTraining& s) {
                             s.kernels("aten::mul", test::kMulKernel, 40, 2.0).item().dataloader(300);
                         }).build(4);
    test::requireSameTables(source, test::exportAndReimport(source));
}

TEST_CASE("times far from zero are written from a whole second before the trace and read back exactly", "[export]") {
    Trace t = test::healthyStep().build(3);
    const int64_t clock = 1'790'857'026'123'456'789; // a capture's CLOCK_REALTIME nanoseconds
    for (CpuEvent& e : t.cpu) {
        e.start_ns += clock;
        e.end_ns += clock + 1;
    } // odd nanoseconds
    for (GpuEvent& g : t.gpu) {
        g.start_ns += clock;
        g.end_ns += clock + 3;
    }
    t.metadata["baseTimeNanoseconds"] = "1790857000000000000";
    ExportStats st;
    const json doc = exportedJson(t, {}, &st);
    CHECK(st.time_shift_ns == 1'790'857'026'000'000'000);
    CHECK(doc.at("sightlineTimeShiftNs") == 1'790'857'026'000'000'000);
    CHECK(eventsOf(doc, "X").front().at("ts").get<double>() < 1e7); // microseconds from that second
    Trace back = test::exportAndReimport(t);
    REQUIRE(back.cpu.size() == t.cpu.size());
    for (size_t i = 0; i < t.cpu.size(); ++i) {
        REQUIRE(back.cpu[i].start_ns == t.cpu[i].start_ns);
        REQUIRE(back.cpu[i].end_ns == t.cpu[i].end_ns);
    }
    CHECK(back.metadata.at("schemaVersion") == "1"); // every export has one, as PyTorch's traces do
    back.metadata.erase("schemaVersion");
    CHECK(back.metadata == t.metadata); // the shift is not left behind as metadata
    test::requireSameTables(t, back);
}

TEST_CASE("names with quotes, control bytes and invalid UTF-8 and shapes that are not JSON give valid JSON", "[export]") {
    Trace t = test::TraceBuilder()
                  .op("say \"hi\"\\ \n\t\x01 é", 0, 10, 1)
                  .op("bad \xC3\x28 byte \xFF", 20, 10, 2)
                  .kernel("k\"ernel", 5, 2, 1)
                  .build();
    t.cpu[0].input_dims = t.strings.intern("[[4096, 1024], [1024, 3072]]");
    t.cpu[1].input_dims = t.strings.intern("[[1, 2]");
    t.cpu[1].input_types = t.strings.intern("[\"float\"]");
    const json doc = exportedJson(t);
    const Trace back = test::exportAndReimport(t);
    REQUIRE(back.cpu.size() == 2);
    CHECK(back.str(back.cpu[0].name) == "say \"hi\"\\ \n\t\x01 é");
    CHECK(back.str(back.cpu[1].name) == "bad \xEF\xBF\xBD( byte \xEF\xBF\xBD");
    CHECK(back.str(back.cpu[0].input_dims) == "[[4096, 1024], [1024, 3072]]");
    CHECK(back.cpu[1].input_dims.empty()); // written as a string, which is not the shapes' list
    CHECK(back.str(back.cpu[1].input_types) == "[\"float\"]");
    CHECK(back.str(back.gpu[0].name) == "k\"ernel");
    for (const json& e : eventsOf(doc, "X"))
        if (e.at("name") == "bad \xEF\xBF\xBD( byte \xEF\xBF\xBD") CHECK(e.at("args").at("Input Dims") == "[[1, 2]");
}

TEST_CASE("each launch gets an arrow from its CUDA call, else from its op, to the GPU work", "[export]") {
    // TraceBuilder gives kernels no correlation id: the first is linked to its call by hand.
    Trace linked = test::TraceBuilder()
                       .op("aten::mm", 0, 50, 1)
                       .api("cudaLaunchKernel", 10, 5, 1, 1, 77)
                       .op("aten::add", 60, 20, 2, 2)
                       .kernel("gemm", 100, 20, 1)
                       .kernel("add", 130, 2, 2)
                       .kernel("orphan", 140, 2, 9)
                       .build();
    linked.gpu[0].correlation = 77;
    ExportStats st;
    const json doc = exportedJson(linked, {}, &st);
    CHECK(st.flows == 2); // the orphan's op is not in the trace
    const auto starts = eventsOf(doc, "s"), ends = eventsOf(doc, "f");
    REQUIRE(starts.size() == 2);
    REQUIRE(ends.size() == 2);
    std::map<int64_t, std::pair<double, int64_t>> from; // id -> (ts, tid)
    for (const json& s : starts) from[s.at("id").get<int64_t>()] = {s.at("ts").get<double>(), s.at("tid").get<int64_t>()};
    for (const json& f : ends) {
        const int64_t id = f.at("id").get<int64_t>();
        REQUIRE(from.count(id));
        CHECK(f.at("bp") == "e");
        if (f.at("ts").get<double>() == 100.0) { // the GEMM: from its launch call
            CHECK(from[id].first == 10.0);
            CHECK(from[id].second == 1);
        } else { // the add: from its op, on the op's thread
            CHECK(from[id].first == 60.0);
            CHECK(from[id].second == 2);
        }
    }
}

TEST_CASE("negative durations are written as zero and counted", "[export]") {
    Trace t = test::TraceBuilder().op("a", 10, 5, 1).kernel("k", 20, 5, 1).build();
    t.gpu[0].end_ns = t.gpu[0].start_ns - 100;
    ExportStats st;
    const json doc = exportedJson(t, {}, &st);
    CHECK(st.clamped_durations == 1);
    for (const json& e : eventsOf(doc, "X")) CHECK(e.at("dur").get<double>() >= 0);
}

TEST_CASE("collectives, ranks and devices survive the export", "[export]") {
    Trace t = test::TraceBuilder().op("record_param_comms", 0, 10, 5).kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 2, 5, 5).build();
    Collective c;
    c.op_id = 5;
    c.name = t.strings.intern("allreduce");
    c.dtype = t.strings.intern("BFloat16");
    c.element_size = 2;
    c.in_elements = c.out_elements = 1 << 20;
    c.group_name = t.strings.intern("0");
    c.group_desc = t.strings.intern("default_pg");
    c.rank = 1;
    c.group_size = 2;
    t.collectives.push_back(c);
    t.metadata["rank"] = "1";
    t.metadata["world_size"] = "2";
    t.metadata["dist_backend"] = "nccl";
    t.metadata["note"] = "007"; // not a JSON number as it stands
    const Trace back = test::exportAndReimport(t);
    REQUIRE(back.collectives.size() == 1);
    CHECK(back.str(back.collectives[0].name) == "allreduce");
    CHECK(back.collectives[0].in_elements == 1 << 20);
    CHECK(back.collectives[0].element_size == 2);
    CHECK(back.collectives[0].group_size == 2);
    CHECK(back.str(back.collectives[0].group_desc) == "default_pg");
    CHECK(back.metadata.at("rank") == "1");
    CHECK(back.metadata.at("world_size") == "2");
    CHECK(back.metadata.at("dist_backend") == "nccl");
    CHECK(back.metadata.at("note") == "007");
}

TEST_CASE("steps and findings are global instant events that the importer leaves aside", "[export]") {
    const Trace t = test::healthyStep().build(3);
    const std::vector<ExportMarker> markers = {{t.cpu[0].start_ns, "ProfilerStep#1", "step", {{"step time", "1.2ms"}}},
                                               {t.cpu[0].start_ns, "Elementwise storm", "finding", {{"fix", "fuse \"them\""}}}};
    const json doc = exportedJson(t, markers);
    const auto instants = eventsOf(doc, "i");
    REQUIRE(instants.size() == 2);
    CHECK(instants[0].at("s") == "g");
    CHECK(instants[0].at("cat") == "step");
    CHECK(instants[1].at("args").at("fix") == "fuse \"them\"");
    test::requireSameTables(t, test::exportAndReimport(t));
}

TEST_CASE("a gzip export reads back the same, and an export that cannot be written leaves nothing", "[export]") {
    const Trace t = test::healthyStep().build(3);
    const auto dir = test::tempDir();
    exportChromeTrace(t, dir / "t.json.gz");
    CHECK(detectFormat(dir / "t.json.gz") == InputFormat::KinetoJsonGz);
    test::requireSameTables(t, importTrace(dir / "t.json.gz"));
    CHECK_THROWS_AS(exportChromeTrace(t, dir / "missing" / "t.json"), InputError);
    CHECK_FALSE(std::filesystem::exists(dir / "missing"));
    CHECK(std::filesystem::directory_iterator(dir)->path().filename() == "t.json.gz");
}

TEST_CASE("counter samples go out as counter tracks of their GPU and ranges as slices, and read back", "[export]") {
    Trace t = test::TraceBuilder().op("aten::mm", 0, 50, 1).kernel("gemm", 10, 30, 1).build();
    auto sample = [&](const char* name, int64_t start_us, double value, int32_t device, CounterKind kind, const char* label = "") {
        CounterSample c;
        c.start_ns = start_us * 1000;
        c.end_ns = c.start_ns + (*label ? 30'000 : 0);
        c.value = value;
        c.name = t.strings.intern(name);
        c.label = t.strings.intern(label);
        c.device = device;
        c.kind = kind;
        t.counters.push_back(c);
    };
    sample("sm__cycles_active.avg.pct_of_peak_sustained_elapsed", 10, 87.5, 0, CounterKind::Hardware);
    sample("sm__cycles_active.avg.pct_of_peak_sustained_elapsed", 20, 12.25, 0, CounterKind::Hardware);
    sample("Total Allocated", 5, 1 << 30, 0, CounterKind::Memory);
    sample("Total Allocated", 6, 1 << 20, -1, CounterKind::Memory);
    sample("sm__inst_executed_pipe_tensor.sum", 10, 4096, 0, CounterKind::Hardware, "gemm");
    sample("dram__bytes_read.sum", 10, 1e9, 0, CounterKind::Hardware, "gemm");
    ExportStats st;
    const json doc = exportedJson(t, {}, &st);
    CHECK(st.counters == 6);
    const auto counters = eventsOf(doc, "C");
    REQUIRE(counters.size() == 4);
    CHECK(counters[0].at("pid") == eventsOf(doc, "X").back().at("pid")); // the GPU's process
    CHECK(counters[0].at("cat") == "hardware_counters");
    CHECK(counters[0].at("args").at("") == 87.5);
    CHECK(counters[3].at("pid") == 1); // the host's reading: the CPU process
    const Trace back = test::exportAndReimport(t);
    REQUIRE(back.counters.size() == t.counters.size());
    for (size_t i = 0; i < t.counters.size(); ++i) {
        INFO(i);
        const CounterSample &a = t.counters[i], &b = back.counters[i];
        CHECK(back.str(b.name) == t.str(a.name));
        CHECK(back.str(b.label) == t.str(a.label));
        CHECK(b.value == a.value);
        CHECK(b.device == a.device);
        CHECK(b.kind == a.kind);
        CHECK(b.start_ns == a.start_ns);
        if (!a.label.empty()) CHECK(b.end_ns == a.end_ns); // a counter's value holds until the next: no end
    }
    test::requireSameTables(t, back);
}
