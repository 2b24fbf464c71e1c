// Sightline's op table against PyTorch's own key_averages() table for the same trace: every CPU-side
// row of PyTorch's table must have the same call count and agree on self CPU, CPU total and self
// device time to the table's rounding. Run on every fixture, so the aggregation rules are checked
// on traces of different shapes (one step in a user range; three ProfilerStep#N steps).
#include "sightline/import.h"
#include "sightline/op_tree.h"
#include "sightline/tables.h"
#include "test_support.h"

#include <cmath>
#include <regex>
#include <set>
#include <sstream>

#include <catch2/catch.hpp>

using namespace sightline;

namespace {

struct TorchRow {
    std::string name;
    uint64_t calls = 0;
    double self_cpu_ms = 0, cpu_total_ms = 0, self_device_ms = 0;
};

double toMs(const std::string& s) {
    static const std::regex re(R"(([0-9.]+)(us|ms|s))");
    std::smatch m;
    if (!std::regex_match(s, m, re))
        throw std::runtime_error("bad time '" + s + "'");
    const double v = std::stod(m[1]);
    return m[2] == "us" ? v / 1000 : m[2] == "ms" ? v
                                                  : v * 1000;
}

std::vector<std::string> splitColumns(const std::string& line) {
    static const std::regex sep(R"(\s{2,})");
    std::string trimmed = std::regex_replace(line, std::regex(R"(^\s+|\s+$)"), "");
    std::vector<std::string> out;
    std::sregex_token_iterator it(trimmed.begin(), trimmed.end(), sep, -1), end;
    for (; it != end; ++it)
        out.push_back(*it);
    return out;
}

// Reads both tables of a key_averages.txt; keeps rows with CPU time (ops, annotations, API calls).
std::vector<TorchRow> readTorchTable(const std::string& text) {
    std::vector<TorchRow> rows;
    std::set<std::string> seen;
    std::vector<std::string> header;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("---", 0) == 0 || line.find_first_not_of(' ') == std::string::npos || line.rfind("Self ", 0) == 0)
            continue;
        auto cols = splitColumns(line);
        if (!cols.empty() && cols[0] == "Name") {
            header = cols;
            continue;
        }
        if (header.empty() || cols.size() != header.size() || !seen.insert(line).second)
            continue;
        auto col = [&](const char* h) {
            for (size_t i = 0; i < header.size(); ++i)
                if (header[i] == h) return cols[i];
            throw std::runtime_error(std::string("no column ") + h);
        };
        TorchRow r{cols[0], std::stoull(col("# of Calls")), toMs(col("Self CPU")), toMs(col("CPU total")),
                   toMs(col("Self CUDA"))};
        if (r.self_cpu_ms == 0 && r.cpu_total_ms == 0)
            continue; // GPU-only rows (kernels, GPU-side annotations) are in the kernel tables
        rows.push_back(r);
    }
    return rows;
}

bool close(double sightline_ms, double torch_ms) {
    return std::fabs(sightline_ms - torch_ms) <= std::max(0.01 * torch_ms, 0.02);
}

void checkFixture(const std::string& name) {
    const Trace trace = importTrace(test::fixture(name + ".json.gz"));
    const Tables tables = computeTables(trace, buildOpTree(trace), Taxonomy::builtin());
    const auto torch = readTorchTable(test::readFile(test::fixture(name + ".key_averages.txt")));
    REQUIRE(torch.size() > 40);
    size_t matched = 0;
    for (const TorchRow& t : torch) {
        const bool truncated = t.name.size() > 3 && t.name.compare(t.name.size() - 3, 3, "...") == 0;
        const std::string prefix = truncated ? t.name.substr(0, t.name.size() - 3) : t.name;
        bool found = false;
        std::string seen;
        for (const OpRow& r : tables.ops) {
            if (truncated ? r.name.rfind(prefix, 0) != 0 : r.name != t.name)
                continue;
            seen += " [" + r.name + " calls=" + std::to_string(r.calls) + " self=" + std::to_string(r.self_cpu_ns / 1e6) +
                " total=" + std::to_string(r.cpu_total_ns / 1e6) + " dev=" + std::to_string(r.self_device_ns / 1e6) + "]";
            if (r.calls == t.calls && close(r.self_cpu_ns / 1e6, t.self_cpu_ms) && close(r.cpu_total_ns / 1e6, t.cpu_total_ms) &&
                close(r.self_device_ns / 1e6, t.self_device_ms)) {
                found = true;
                break;
            }
        }
        INFO(name << ": torch row '" << t.name << "' calls=" << t.calls << " self=" << t.self_cpu_ms << "ms total="
                  << t.cpu_total_ms << "ms selfdev=" << t.self_device_ms << "ms; sightline:" << seen);
        CHECK(found);
        matched += found;
    }
    CHECK(matched == torch.size());
}

} // namespace

TEST_CASE("op table matches PyTorch key_averages on the GDN fallback fixture", "[key_averages]") {
    checkFixture("qwen3next_fallback_small");
}

TEST_CASE("op table matches PyTorch key_averages on the dense three-step fixture", "[key_averages]") {
    checkFixture("dense_healthy");
}

TEST_CASE("self CPU total matches PyTorch's footer", "[key_averages]") {
    // "Self CPU time total: 282.990ms" in qwen3next_fallback_small.key_averages.txt
    const Trace trace = importTrace(test::fixture("qwen3next_fallback_small.json.gz"));
    const Tables tables = computeTables(trace, buildOpTree(trace), Taxonomy::builtin());
    CHECK(tables.self_cpu_total_ns / 1e6 == Approx(282.990).margin(0.001));
    // "Self CUDA time total: 24.503ms": every kernel, memcpy and memset once
    CHECK(tables.gpu_total_ns / 1e6 == Approx(24.503).margin(0.001));
}
