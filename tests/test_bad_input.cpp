// Bad input: each case gets one clear InputError naming the file and the problem, never a crash.
#include "sightline/error.h"
#include "sightline/import.h"
#include "sightline/tables.h"
#include "test_support.h"

#include <catch2/catch.hpp>
#include <zlib.h>

using namespace sightline;
namespace fs = std::filesystem;

namespace {

// Imports and checks for the table preconditions, as `sightline report` does; returns the message.
std::string failure(const fs::path& path) {
    try {
        Trace t = importTrace(path);
        requireReportable(t);
    } catch (const InputError& e) {
        const std::string msg = e.what();
        CHECK(msg.find('\n') == std::string::npos); // one line
        CHECK(msg.find(path.filename().string()) != std::string::npos);
        return msg;
    }
    FAIL("no error for " << path);
    return {};
}

std::string gzipBytes(const std::string& text) {
    const auto dir = test::tempDir();
    gzFile f = gzopen((dir / "x.gz").c_str(), "wb");
    gzwrite(f, text.data(), unsigned(text.size()));
    gzclose(f);
    return test::readFile(dir / "x.gz");
}

} // namespace

TEST_CASE("a missing file", "[bad_input]") {
    CHECK_THAT(failure("/nonexistent/trace.json"), Catch::Contains("no such file"));
}

TEST_CASE("a directory", "[bad_input]") {
    const auto dir = test::tempDir();
    CHECK_THAT(failure(dir), Catch::Contains("is a directory"));
}

TEST_CASE("an empty file", "[bad_input]") {
    const auto dir = test::tempDir();
    test::writeFile(dir / "empty.json", "");
    CHECK_THAT(failure(dir / "empty.json"), Catch::Contains("empty"));
}

TEST_CASE("a truncated .gz", "[bad_input]") {
    const auto dir = test::tempDir();
    const std::string gz = test::readFile(test::fixture("qwen3next_fallback_small.json.gz"));
    for (size_t cut : {size_t(10), gz.size() / 3, gz.size() - 9}) {
        test::writeFile(dir / "cut.json.gz", gz.substr(0, cut));
        CHECK_THAT(failure(dir / "cut.json.gz"), Catch::Contains("truncated"));
    }
}

TEST_CASE("a corrupt .gz", "[bad_input]") {
    const auto dir = test::tempDir();
    std::string gz = test::readFile(test::fixture("dense_healthy.json.gz"));
    for (size_t i = 1000; i < 2000; ++i)
        gz[i] = char(gz[i] ^ 0x5a);
    test::writeFile(dir / "bad.json.gz", gz);
    CHECK_THAT(failure(dir / "bad.json.gz"), Catch::Contains("corrupt gzip"));
}

TEST_CASE("a truncated plain JSON trace", "[bad_input]") {
    const auto dir = test::tempDir();
    const std::string text = test::gunzip(test::fixture("dense_healthy.json.gz"));
    for (size_t cut : {size_t(100), text.size() / 2, text.size() - 3}) {
        test::writeFile(dir / "cut.json", text.substr(0, cut));
        CHECK_THAT(failure(dir / "cut.json"), Catch::Contains("JSON"));
    }
}

TEST_CASE("a file that is not JSON", "[bad_input]") {
    const auto dir = test::tempDir();
    test::writeFile(dir / "notes.json", "hello, this is not a trace\n");
    CHECK_THAT(failure(dir / "notes.json"), Catch::Contains("not a trace Sightline can read"));
    test::writeFile(dir / "binary.json", std::string("\x7f"
                                                     "ELF\x02\x01\x01\0\0\0",
                                                     10));
    CHECK_THAT(failure(dir / "binary.json"), Catch::Contains("not a trace Sightline can read"));
    test::writeFile(dir / "broken.json", "{\"traceEvents\": [ {\"ph\": \"X\", }");
    CHECK_THAT(failure(dir / "broken.json"), Catch::Contains("JSON"));
    test::writeFile(dir / "gz-text.json.gz", gzipBytes("just words"));
    CHECK_THAT(failure(dir / "gz-text.json.gz"), Catch::Contains("JSON"));
}

TEST_CASE("JSON that is not a trace", "[bad_input]") {
    const auto dir = test::tempDir();
    test::writeFile(dir / "config.json", R"({"model_type": "qwen3_5_text", "hidden_size": 2560})");
    CHECK_THAT(failure(dir / "config.json"), Catch::Contains("no \"traceEvents\""));
    test::writeFile(dir / "number.json", "[1, 2, 3]");
    CHECK_THAT(failure(dir / "number.json"), Catch::Contains("JSON"));
    test::writeFile(dir / "events-not-list.json", R"({"traceEvents": {"a": 1}})");
    CHECK_THAT(failure(dir / "events-not-list.json"), Catch::Contains("not a list"));
}

TEST_CASE("an empty trace", "[bad_input]") {
    const auto dir = test::tempDir();
    test::writeFile(dir / "empty-trace.json", R"({"schemaVersion": 1, "traceEvents": []})");
    CHECK_THAT(failure(dir / "empty-trace.json"), Catch::Contains("no events"));
    test::writeFile(dir / "meta-only.json",
                    R"({"traceEvents": [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "python3"}}]})");
    CHECK_THAT(failure(dir / "meta-only.json"), Catch::Contains("no events"));
}

TEST_CASE("a trace with kernels but no CPU ops is analysed, one with API calls alone is refused", "[bad_input]") {
    const auto dir = test::tempDir();
    test::writeFile(dir / "gpu-only.json", R"({"traceEvents": [
  {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.0, "dur": 2.0, "args": {"stream": 7}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 0.5, "dur": 0.2}
]})");
    CHECK_NOTHROW(requireReportable(importTrace(dir / "gpu-only.json")));
    test::writeFile(dir / "api-only.json", R"({"traceEvents": [
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 0.5, "dur": 0.2}
]})");
    CHECK_THAT(failure(dir / "api-only.json"), Catch::Contains("no CPU ops and no GPU activity"));
}

TEST_CASE("a negative duration is clamped and counted", "[bad_input]") {
    std::string text = R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 5, "dur": -2}]})";
    text.append(64, ' ');
    const Trace t = importKinetoJson(text.data(), text.size() - 64, text.size(), "memory");
    REQUIRE(t.cpu.size() == 1);
    CHECK(t.cpu[0].duration() == 0);
    CHECK(t.quality.negative_durations == 1);
}
