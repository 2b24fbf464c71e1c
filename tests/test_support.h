#pragma once
// Helpers shared by the tests: fixture paths, temporary files, synthetic traces.
#include "sightline/metrics.h"
#include "sightline/rules.h"
#include "sightline/trace.h"

#include <filesystem>
#include <string>
#include <vector>

namespace sightline::test {

std::filesystem::path fixture(const std::string& name); // tests/fixtures/kineto/NAME
std::filesystem::path tempDir();                        // a fresh directory for this test run
std::string readFile(const std::filesystem::path& path);
void writeFile(const std::filesystem::path& path, const std::string& bytes);
std::string gunzip(const std::filesystem::path& path);

// A trace's metrics and the built-in rules' findings on them (rule tests).
struct Evaluated {
    Metrics metrics;
    std::vector<Finding> findings;
};
Evaluated evaluate(const Trace& trace);
// The finding of `rule`, null when it did not fire.
const Finding* findingOf(const Evaluated& e, const std::string& rule);

// Writes `trace` with `sightline export`'s writer and reads the JSON back with the Kineto importer.
Trace exportAndReimport(const Trace& trace);
// The op table (calls, self CPU, CPU total, self and total GPU) and the kernel and kernel-class
// tables of the two traces are the same, row by row (Catch2 checks).
void requireSameTables(const Trace& a, const Trace& b);

// Builds small traces by hand: times in microseconds as in Kineto's JSON.
class TraceBuilder {
public:
    TraceBuilder();
    // A CPU event on thread `tid` of process 1.
    TraceBuilder& op(const std::string& name, double start_us, double dur_us, int64_t external_id = 0,
                     int64_t tid = 1, CpuKind kind = CpuKind::Op);
    TraceBuilder& api(const std::string& name, double start_us, double dur_us, int64_t external_id,
                      int64_t tid = 1, int64_t correlation = 0);
    TraceBuilder& kernel(const std::string& name, double start_us, double dur_us, int64_t external_id,
                         GpuKind kind = GpuKind::Kernel, int32_t stream = 7);
    Trace build();

private:
    Trace m_trace;
};

} // namespace sightline::test
