// The report writers against golden files (regenerate with UPDATE_GOLDEN=1), and the JSON contract.
#include "sightline/report/report.h"
#include "sightline/import.h"
#include "synthetic_training.h"
#include "test_support.h"

#include <cstdio>
#include <cstdlib>
#include <set>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace sightline;

namespace {

Report fixtureReport(const std::string& name, const ReportOptions& options) {
    Trace t = importTrace(test::fixture(name));
    t.source = name; // the golden files must not depend on where the checkout lives
    return buildReport(t, Taxonomy::builtin(), RuleSet::builtin(), options);
}

// `diff -u` of two files (diffutils is on every machine the tests run on), at most 200 lines.
std::string unifiedDiff(const std::filesystem::path& a, const std::filesystem::path& b) {
    const std::string command = "diff -u '" + a.string() + "' '" + b.string() + "' 2>&1";
    std::string out;
    if (FILE* p = popen(command.c_str(), "r")) {
        char line[4096];
        for (int n = 0; n < 200 && std::fgets(line, sizeof line, p); ++n) out += line;
        pclose(p);
    }
    return out.empty() ? "(no diff output: is diff installed?)" : out;
}

void checkGolden(const std::string& golden_name, const std::string& actual) {
    const auto path = std::filesystem::path(SIGHTLINE_TEST_DIR) / "golden" / golden_name;
    if (const char* u = std::getenv("UPDATE_GOLDEN"); u && std::string(u) == "1") {
        test::writeFile(path, actual);
        WARN("updated " << path);
        return;
    }
    REQUIRE(std::filesystem::exists(path));
    const std::string expected = test::readFile(path);
    // On a mismatch the report is written beside the golden file as NAME.actual and the test
    // prints their unified diff (not the two whole reports).
    auto actual_path = path;
    actual_path += ".actual";
    const bool same = expected == actual;
    std::string why;
    if (same) {
        std::filesystem::remove(actual_path);
    } else {
        test::writeFile(actual_path, actual);
        why = "golden file differs; the report is in " + actual_path.string() + "\n" + unifiedDiff(path, actual_path);
    }
    INFO(why);
    CHECK(same);
}

} // namespace

TEST_CASE("text report of the GDN fixture matches its golden file", "[report]") {
    ReportOptions o;
    checkGolden("qwen3next_fallback_small.txt", formatText(fixtureReport("qwen3next_fallback_small.json.gz", o), o));
}

TEST_CASE("Markdown report of the dense fixture matches its golden file", "[report]") {
    ReportOptions o;
    o.op_rows = 15;
    o.class_rows = 12;
    o.kernel_rows = 8;
    checkGolden("dense_healthy.md", formatMarkdown(fixtureReport("dense_healthy.json.gz", o), o));
}

TEST_CASE("JSON report of the GDN fixture matches its golden file", "[report]") {
    ReportOptions o;
    o.op_rows = 40;
    o.class_rows = 0;
    o.kernel_rows = 20;
    checkGolden("qwen3next_fallback_small.json", formatJson(fixtureReport("qwen3next_fallback_small.json.gz", o), o));
}

TEST_CASE("the JSON report carries the documented contract", "[report]") {
    ReportOptions o;
    o.op_rows = o.class_rows = o.kernel_rows = 0;
    const auto doc = nlohmann::json::parse(formatJson(fixtureReport("qwen3next_fallback_small.json.gz", o), o));
    CHECK(doc.at("sightline_report") == kReportJsonVersion);
    REQUIRE(doc.at("ops").size() > 100);
    for (const char* key : {"name", "kind", "calls", "self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us"})
        CHECK(doc["ops"][0].contains(key));
    for (const char* key : {"class", "family", "calls", "total_us", "avg_us"})
        CHECK(doc["kernel_classes"][0].contains(key));
    for (const char* key : {"name", "class", "calls", "total_us"})
        CHECK(doc["kernels"][0].contains(key));
    // The fixture's story: elementwise kernels split by functor, GEMMs by family, the DtoD copy.
    std::set<std::string> classes;
    for (const auto& c : doc["kernel_classes"])
        classes.insert(c["class"].get<std::string>());
    for (const char* c : {"Elementwise add", "Elementwise mul", "Elementwise copy/cast", "Elementwise fill",
                          "nvjet GEMM", "xmma GEMM fp32 (FFMA, no tensor cores)", "Memcpy DtoD", "triangular solve (trsm)"})
        CHECK(classes.count(c) == 1);
    // Rows are ordered by self CPU time by default, and totals add up.
    double sum_gpu = 0;
    for (const auto& c : doc["kernel_classes"])
        sum_gpu += c["total_us"].get<double>();
    CHECK(sum_gpu == Approx(doc["totals"]["gpu_us"].get<double>()));
    CHECK(doc["ops"][0]["self_cpu_us"].get<double>() >= doc["ops"][1]["self_cpu_us"].get<double>());
}

TEST_CASE("row limits and sort keys", "[report]") {
    ReportOptions o;
    o.op_rows = 5;
    o.op_sort = OpSort::Calls;
    o.gpu_sort = GpuSort::Calls;
    const Report r = fixtureReport("dense_healthy.json.gz", o);
    const auto doc = nlohmann::json::parse(formatJson(r, o));
    REQUIRE(doc["ops"].size() == 5);
    for (size_t i = 1; i < 5; ++i)
        CHECK(doc["ops"][i - 1]["calls"].get<uint64_t>() >= doc["ops"][i]["calls"].get<uint64_t>());
    CHECK(doc["kernel_classes"][0]["calls"].get<uint64_t>() >= doc["kernel_classes"][1]["calls"].get<uint64_t>());
    CHECK(formatDuration(127'566'000) == "127.566ms");
    CHECK(formatDuration(6'791) == "6.791us");
    CHECK(formatDuration(1'500'000'000) == "1.500s");
}

TEST_CASE("per-step tables split the trace's tables by step", "[report]") {
    const Trace t = importTrace(test::fixture("dense_healthy.json.gz"));
    auto mmCalls = [&](const std::string& step) {
        ReportOptions o;
        o.step = step;
        const Report r = buildReport(t, Taxonomy::builtin(), RuleSet::builtin(), o);
        for (const OpRow& op : r.tables.ops)
            if (op.name == "aten::mm") return op.calls;
        return uint64_t(0);
    };
    CHECK(mmCalls("") == 513);
    CHECK(mmCalls("1") == 171);
    CHECK(mmCalls("2") + mmCalls("3") == mmCalls("steady"));
    CHECK(mmCalls("1") + mmCalls("2") + mmCalls("3") == 513);
    ReportOptions bad;
    bad.step = "4";
    CHECK_THROWS_WITH(buildReport(t, Taxonomy::builtin(), RuleSet::builtin(), bad), Catch::Contains("has 3 step(s)"));
}

TEST_CASE("the steps table and the steady state show host outliers where a step has them", "[report]") {
    auto text = [](bool setup) {
        test::SyntheticTraining job;
        job.kernels("aten::add", test::kAddKernel, 50, 2, 20).op("aten::_cudnn_attention_forward", 7, 100);
        if (setup) job.op("aten::_cudnn_attention_forward", 1, 20000); // a new shape each step
        ReportOptions o;
        return formatText(buildReport(job.build(), Taxonomy::builtin(), RuleSet::builtin(), o), o);
    };
    const std::string with = text(true), without = text(false);
    CHECK(with.find("Host outliers") != std::string::npos);
    CHECK(with.find("host outliers 1.0 a step") != std::string::npos);
    CHECK(with.find("aten::_cudnn_attention_forward 19.90 ms") != std::string::npos);
    CHECK(with.find("19.900ms") != std::string::npos); // each step's column
    CHECK(without.find("Host outliers") == std::string::npos);
    CHECK(without.find("host outliers") == std::string::npos);
}
