// Hardware counters (docs/hardware.md) on synthetic traces with samples: averages over intervals,
// the metrics pass (per step, per kernel class, per op), the report's title line and tables, and
// the rules that read them.
#include "sightline/report/report.h"
#include "sightline/hardware.h"
#include "sightline/metrics.h"
#include "sightline/op_tree.h"
#include "sightline/rules.h"
#include "synthetic_training.h"
#include "test_support.h"

#include <functional>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace sightline;
using namespace sightline::test;

namespace {

const char* const kSm = "sm__cycles_active.avg.pct_of_peak_sustained_elapsed";
const char* const kWarps = "sm__warps_active.avg.pct_of_peak_sustained_elapsed";
const char* const kTensor = "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed";
const char* const kRead = "dram__bytes_read.sum";
const char* const kWrite = "dram__bytes_write.sum";

struct Values {
    double sm, warps, tensor, dram_bytes_per_s; // the last split evenly into reads and writes
};

void sample(Trace& t, int64_t start, int64_t end, const char* name, double v) {
    CounterSample c;
    c.start_ns = start;
    c.end_ns = end;
    c.value = v;
    c.name = t.strings.intern(name);
    c.device = 0;
    t.counters.push_back(c);
}

// Samples every `interval_ns` over the whole trace, each with the values `at` gives for the GPU
// work running at the sample's middle (null when none).
void addSamples(Trace& t, int64_t interval_ns, const std::function<Values(const GpuEvent*)>& at) {
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (const CpuEvent& e : t.cpu) lo = std::min(lo, e.start_ns), hi = std::max(hi, e.end_ns);
    for (const GpuEvent& g : t.gpu) hi = std::max(hi, g.end_ns);
    for (int64_t s = lo; s < hi; s += interval_ns) {
        const int64_t mid = s + interval_ns / 2;
        const GpuEvent* running = nullptr;
        for (const GpuEvent& g : t.gpu)
            if (g.start_ns <= mid && mid < g.end_ns) running = &g;
        const Values v = at(running);
        const double bytes = v.dram_bytes_per_s * double(interval_ns) / 1e9 / 2;
        for (auto [name, x] : {std::pair{kSm, v.sm}, {kWarps, v.warps}, {kTensor, v.tensor}, {kRead, bytes}, {kWrite, bytes}})
            sample(t, s, s + interval_ns, name, x);
    }
}

// A class-faithful GPU: tensor pipes busy in GEMMs only, all SMs in GEMMs and attention, DRAM
// busy in elementwise kernels, little activity between kernels.
Values healthyGpu(const Trace& t, const GpuEvent* g) {
    if (!g) return {2, 1, 0, 0.05e12};
    const std::string_view name = t.str(g->name);
    if (name == kNvjet) return {98, 40, 70, 0.8e12};
    if (name == kFlashFwd || name == kFlashBwd) return {97, 30, 55, 1.0e12};
    return {92, 60, 0, 3.0e12};
}

} // namespace

TEST_CASE("samples average over an interval by overlap, and instants hold until the next, and bytes become a rate", "[hardware]") {
    Trace t;
    sample(t, 0, 1000, kSm, 50);
    sample(t, 1000, 2000, kSm, 100);
    sample(t, 0, 1000, kRead, 1e6);
    sample(t, 0, 1000, kWrite, 1e6);
    sample(t, 5000, 5000, kTensor, 40); // instants: the first holds until the second
    sample(t, 6000, 6000, kTensor, 80);
    sample(t, 0, 1000, "sm__cycles_active.avg", 12345); // a raw count, not a percentage: not used
    const HwSeries s(t);
    const HwFigures a = s.over(0, 500, 1500);
    CHECK(a.covered_ns == 1000);
    CHECK(a[HwMetric::SmActive] == Approx(75));
    CHECK(a[HwMetric::DramBytesPerS] == Approx(2e12)); // 2 MB in 1 us; known over the first half only
    CHECK(s.over(0, 5000, 6000)[HwMetric::TensorActive] == Approx(40));
    CHECK(std::isnan(s.over(0, 5000, 6000)[HwMetric::SmActive]));
    CHECK_FALSE(s.over(1, 0, 2000).known());    // another device
    CHECK_FALSE(s.over(0, 3000, 4000).known()); // no sample there
    HwAverage avg;
    avg.add(a);
    avg.add(s.over(0, 1500, 2000)); // 500 ns at 100%
    CHECK(avg.result()[HwMetric::SmActive] == Approx((75.0 * 1000 + 100.0 * 500) / 1500));
}

TEST_CASE("a first sample spanning the sampler's start-up is left out, not spread over the work it hid", "[hardware]") {
    // As on the H200: one sample over the first 700 us with near-zero counts, then 100 us samples.
    Trace t;
    sample(t, 0, 700'000, kSm, 0.5);
    for (int64_t s = 700'000; s < 1'700'000; s += 100'000) sample(t, s, s + 100'000, kSm, 90);
    const HwSeries series(t);
    CHECK_FALSE(series.over(0, 100'000, 600'000).known()); // inside the start-up: unknown, not 0.5%
    const HwFigures f = series.over(0, 0, 1'700'000);
    CHECK(f.covered_ns == 1'000'000);
    CHECK(f[HwMetric::SmActive] == Approx(90));
}

TEST_CASE("per step, per kernel class and per op figures follow the work that ran", "[hardware]") {
    Trace t = healthyStep().build(3);
    addSamples(t, 2000, [&](const GpuEvent* g) { return healthyGpu(t, g); });
    const Evaluated e = evaluate(t);
    const Metrics& m = e.metrics;
    REQUIRE(m.steps.size() == 3);
    for (const StepMetrics& s : m.steps) CHECK(s.hw.known());
    CHECK(m.values.at("hw.sm_active_pct") > 80); // the healthy step's GPU is busy with big kernels
    CHECK(m.values.at("hw.covered_pct") == Approx(100).margin(2));
    const auto& classes = m.hw.classes;
    REQUIRE(classes.count("nvjet GEMM"));
    CHECK(classes.at("nvjet GEMM")[HwMetric::TensorActive] == Approx(70).margin(5));
    for (const auto& [name, f] : classes)
        if (name.starts_with("Elementwise")) CHECK(f[HwMetric::TensorActive] < 15);
    CHECK(m.hw.families.at("gemm")[HwMetric::TensorActive] == Approx(70).margin(5));
    REQUIRE(!m.hw.ops.empty());
    // Without samples, no hardware figure at all.
    const Evaluated plain = evaluate(healthyStep().build(3));
    CHECK(std::isnan(plain.metrics.value("hw.sm_active_pct")));
    CHECK(plain.metrics.hw.classes.empty());
}

TEST_CASE("the report's title line and hardware tables appear with samples only", "[hardware]") {
    Trace t = healthyStep().build(3);
    t.source = "synthetic";
    const ReportOptions o;
    const std::string without = formatText(buildReport(t, Taxonomy::builtin(), RuleSet::builtin(), o), o);
    CHECK(without.find("SMs active") == std::string::npos);
    addSamples(t, 2000, [&](const GpuEvent* g) { return healthyGpu(t, g); });
    const Report r = buildReport(t, Taxonomy::builtin(), RuleSet::builtin(), o);
    const std::string text = formatText(r, o);
    const std::string title = text.substr(text.find('\n') + 1, text.find('\n', text.find('\n') + 1) - text.find('\n') - 1);
    CHECK(title.starts_with("GPU busy "));
    CHECK(title.find(" · SMs active ") != std::string::npos);
    CHECK(title.find(" · tensor pipes ") != std::string::npos);
    CHECK(text.find("Hardware counters per step") != std::string::npos);
    CHECK(text.find("Hardware counters by kernel class") != std::string::npos);
    const auto doc = nlohmann::json::parse(formatJson(r, o));
    REQUIRE(doc.contains("hardware"));
    CHECK(doc["hardware"]["steps"].size() == 3);
    CHECK(doc["hardware"]["kernel_classes"][0].contains("tensor_pct"));
}

TEST_CASE("a GPU busy on a few SMs fires few-sm-kernels with the saving its file explains", "[hardware][rules]") {
    Trace t = healthyStep().build(3);
    addSamples(t, 2000, [](const GpuEvent* g) { return g ? Values{20, 5, 0, 0.1e12} : Values{0, 0, 0, 0}; });
    const Evaluated e = evaluate(t);
    const Finding* f = findingOf(e, "few-sm-kernels");
    REQUIRE(f != nullptr);
    const double busy = e.metrics.value("gpu.busy_pct"), sm = e.metrics.value("hw.sm_active_pct");
    CHECK(sm < 25);
    CHECK(f->saving_ms == Approx(e.metrics.value("gpu.busy_ms") * (1 - sm / busy) * 0.5));
    CHECK(f->message.find("unknown") == std::string::npos);
}

TEST_CASE("GEMM time with idle tensor pipes fires gemm-tensor-idle", "[hardware][rules]") {
    Trace t = healthyStep().build(3);
    addSamples(t, 2000, [&](const GpuEvent* g) {
        Values v = healthyGpu(t, g);
        v.tensor = 3; // fp32 GEMMs on CUDA cores
        return v;
    });
    const Evaluated e = evaluate(t);
    const Finding* f = findingOf(e, "gemm-tensor-idle");
    REQUIRE(f != nullptr);
    double gemm_ns = 0;
    for (const GpuRow& r : e.metrics.steady_tables.kernel_classes)
        if (r.family == "gemm") gemm_ns += double(r.total_ns);
    CHECK(f->saving_ms == Approx(gemm_ns / 1e6 / double(e.metrics.steady.size()) * 0.5));
    CHECK(findingOf(evaluate([&] {
                        Trace h = healthyStep().build(3);
                        addSamples(h, 2000, [&](const GpuEvent* g) { return healthyGpu(h, g); });
                        return h;
                    }()),
                    "gemm-tensor-idle") == nullptr);
}

TEST_CASE("elementwise time at DRAM's ceiling fires memory-bound-elementwise, and a healthy step fires no hardware rule", "[hardware][rules]") {
    Trace t = healthyStep([](SyntheticTraining& s) { s.kernels("aten::mul", kMulKernel, 600, 8); }).build(3);
    addSamples(t, 2000, [&](const GpuEvent* g) {
        Values v = healthyGpu(t, g);
        if (g && t.str(g->name) == kMulKernel) v.dram_bytes_per_s = 3.9e12; // 91% of the H200's 4.3 TB/s
        return v;
    });
    const Evaluated e = evaluate(t);
    const Finding* f = findingOf(e, "memory-bound-elementwise");
    REQUIRE(f != nullptr);
    CHECK(e.metrics.hw.families.at("elementwise")[HwMetric::DramBytesPerS] > 3e12);
    CHECK(f->message.find("unknown") == std::string::npos);

    Trace h = healthyStep().build(3);
    addSamples(h, 2000, [&](const GpuEvent* g) { return healthyGpu(h, g); });
    const Evaluated healthy = evaluate(h);
    for (const char* rule : {"few-sm-kernels", "gemm-tensor-idle", "memory-bound-elementwise", "mfu-tensor-check"})
        CHECK(findingOf(healthy, rule) == nullptr);
}

TEST_CASE("MFU from shapes far from the tensor pipes' activity fires mfu-tensor-check, either way round", "[hardware][rules]") {
    auto withShapes = [](const char* dims) {
        Trace t = healthyStep().build(3);
        for (CpuEvent& e : t.cpu)
            if (t.str(e.name) == "aten::mm") e.input_dims = t.strings.intern(dims);
        return t;
    };
    // Small shapes: MFU of a fraction of a percent while the tensor pipes work 60% of the step.
    Trace few_flops = withShapes("[[64, 64], [64, 64]]");
    addSamples(few_flops, 2000, [](const GpuEvent*) { return Values{95, 40, 60, 0.5e12}; });
    const Evaluated a = evaluate(few_flops);
    REQUIRE(a.metrics.value("mfu.pct") < 1);
    const Finding* f = findingOf(a, "mfu-tensor-check");
    REQUIRE(f != nullptr);
    CHECK(f->saving_ms == 0);
    CHECK(f->severity == Severity::Info);
    // The same shapes with the tensor pipes as idle as the FLOPs say: nothing to report.
    Trace agree = withShapes("[[64, 64], [64, 64]]");
    addSamples(agree, 2000, [](const GpuEvent*) { return Values{95, 40, 0.5, 0.5e12}; });
    CHECK(findingOf(evaluate(agree), "mfu-tensor-check") == nullptr);
}
