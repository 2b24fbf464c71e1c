#include "test_support.h"

#include "sightline/replay.h"

#include "sightline/chrome_export.h"
#include "sightline/import.h"
#include "sightline/op_tree.h"
#include "sightline/tables.h"
#include "sightline/taxonomy.h"

#include <algorithm>
#include <tuple>

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <unistd.h>
#include <zlib.h>

namespace sightline::test {

std::filesystem::path fixture(const std::string& name) {
    return std::filesystem::path(SIGHTLINE_TEST_DIR) / "fixtures" / "kineto" / name;
}

namespace {

// The directories tempDir made, removed when the test process ends (SIGHTLINE_KEEP_TEST_DIRS=1
// keeps them to look at): left behind, a full run of the suite left about 200 in the temporary
// directory, and a development machine had gathered 57,807 of them.
struct TempDirs {
    std::mutex lock;
    std::vector<std::filesystem::path> made;
    ~TempDirs() {
        if (std::getenv("SIGHTLINE_KEEP_TEST_DIRS")) return;
        std::error_code ec;
        for (const auto& dir : made) std::filesystem::remove_all(dir, ec);
    }
};
TempDirs& tempDirs() {
    static TempDirs dirs;
    return dirs;
}

} // namespace

std::filesystem::path tempDir() {
    static std::atomic<int> counter{0};
    auto dir = std::filesystem::temp_directory_path() /
        ("sightline-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    TempDirs& dirs = tempDirs();
    const std::lock_guard<std::mutex> hold(dirs.lock);
    dirs.made.push_back(dir);
    return dir;
}

std::string readFile(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw std::runtime_error("cannot read " + path.string());
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void writeFile(const std::filesystem::path& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    if (!out)
        throw std::runtime_error("cannot write " + path.string());
}

std::string gunzip(const std::filesystem::path& path) {
    gzFile f = gzopen(path.c_str(), "rb");
    if (!f)
        throw std::runtime_error("cannot open " + path.string());
    std::string out;
    char buf[1 << 16];
    int n;
    while ((n = gzread(f, buf, sizeof buf)) > 0)
        out.append(buf, size_t(n));
    gzclose(f);
    return out;
}

// The findings as the report makes them: the rules' fixes priced by the what-if replay.
Evaluated evaluate(const Trace& t) {
    const Taxonomy& tax = Taxonomy::builtin();
    const OpTree tree = buildOpTree(t);
    Evaluated e{computeMetrics(t, tree, tax), {}};
    const ReplayModel replay(t, tree, tax, e.metrics);
    e.findings = RuleSet::builtin().evaluate(e.metrics, &replay);
    return e;
}

const Finding* findingOf(const Evaluated& e, const std::string& rule) {
    for (const Finding& f : e.findings)
        if (f.rule == rule) return &f;
    return nullptr;
}

Trace exportAndReimport(const Trace& trace) {
    const auto path = tempDir() / "export.json";
    exportChromeTrace(trace, path);
    return importTrace(path);
}

namespace {

template <class Row, class Key>
void sortRows(std::vector<Row>& rows, Key key) {
    std::sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) { return key(a) < key(b); });
}

void requireSameGpuRows(std::vector<GpuRow> a, std::vector<GpuRow> b) {
    auto key = [](const GpuRow& r) { return std::tie(r.name, r.kind); };
    sortRows(a, key);
    sortRows(b, key);
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        INFO(a[i].name);
        CHECK(a[i].name == b[i].name);
        CHECK(a[i].klass == b[i].klass);
        CHECK(a[i].calls == b[i].calls);
        CHECK(a[i].total_ns == b[i].total_ns);
        CHECK(a[i].min_ns == b[i].min_ns);
        CHECK(a[i].max_ns == b[i].max_ns);
    }
}

} // namespace

void requireSameTables(const Trace& a, const Trace& b) {
    const Taxonomy taxonomy = Taxonomy::builtin();
    Tables ta = computeTables(a, buildOpTree(a), taxonomy);
    Tables tb = computeTables(b, buildOpTree(b), taxonomy);
    auto key = [](const OpRow& r) { return std::tie(r.name, r.kind); };
    sortRows(ta.ops, key);
    sortRows(tb.ops, key);
    REQUIRE(ta.ops.size() == tb.ops.size());
    for (size_t i = 0; i < ta.ops.size(); ++i) {
        INFO(ta.ops[i].name);
        CHECK(ta.ops[i].name == tb.ops[i].name);
        CHECK(ta.ops[i].kind == tb.ops[i].kind);
        CHECK(ta.ops[i].calls == tb.ops[i].calls);
        CHECK(ta.ops[i].self_cpu_ns == tb.ops[i].self_cpu_ns);
        CHECK(ta.ops[i].cpu_total_ns == tb.ops[i].cpu_total_ns);
        CHECK(ta.ops[i].self_device_ns == tb.ops[i].self_device_ns);
        CHECK(ta.ops[i].device_total_ns == tb.ops[i].device_total_ns);
    }
    CHECK(ta.self_cpu_total_ns == tb.self_cpu_total_ns);
    CHECK(ta.gpu_total_ns == tb.gpu_total_ns);
    CHECK(ta.gpu_activities == tb.gpu_activities);
    requireSameGpuRows(ta.kernels, tb.kernels);
    requireSameGpuRows(ta.kernel_classes, tb.kernel_classes);
}

namespace {
int64_t ns(double us) { return static_cast<int64_t>(us * 1000.0 + (us >= 0 ? 0.5 : -0.5)); }
} // namespace

TraceBuilder::TraceBuilder() {
    m_trace.source = "synthetic";
    m_trace.format = "test";
}

TraceBuilder& TraceBuilder::op(const std::string& name, double start_us, double dur_us, int64_t external_id,
                               int64_t tid, CpuKind kind) {
    CpuEvent e;
    e.name = m_trace.strings.intern(name);
    e.start_ns = ns(start_us);
    e.end_ns = ns(start_us + dur_us);
    e.thread = m_trace.threadIndex(1, tid);
    e.kind = kind;
    e.external_id = external_id;
    m_trace.cpu.push_back(e);
    return *this;
}

TraceBuilder& TraceBuilder::api(const std::string& name, double start_us, double dur_us, int64_t external_id,
                                int64_t tid, int64_t correlation) {
    op(name, start_us, dur_us, external_id, tid, CpuKind::Runtime);
    m_trace.cpu.back().correlation = correlation;
    return *this;
}

TraceBuilder& TraceBuilder::kernel(const std::string& name, double start_us, double dur_us, int64_t external_id,
                                   GpuKind kind, int32_t stream) {
    GpuEvent g;
    g.name = m_trace.strings.intern(name);
    g.start_ns = ns(start_us);
    g.end_ns = ns(start_us + dur_us);
    g.external_id = external_id;
    g.kind = kind;
    g.stream = stream;
    m_trace.gpu.push_back(g);
    return *this;
}

Trace TraceBuilder::build() { return std::move(m_trace); }

} // namespace sightline::test
