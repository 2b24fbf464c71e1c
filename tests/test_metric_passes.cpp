// Each metric pass alone (metric_passes.h) on synthetic traces whose figures are known, and steps
// on the GPU's clock when the host runs ahead (docs/metrics.md).
#include "sightline/metric_passes.h"
#include "sightline/op_tree.h"
#include "sightline/rules.h"
#include "synthetic_training.h"

#include <set>

#include <catch2/catch.hpp>

using namespace sightline;
using namespace sightline::test;

namespace {

// One pass run alone on a trace.
template <typename Pass>
std::vector<StepMetrics> runPass(const Trace& t, Pass pass) {
    const OpTree tree = buildOpTree(t);
    const MetricContext ctx(t, tree, Taxonomy::builtin());
    std::vector<StepMetrics> steps(ctx.steps.size());
    for (size_t i = 0; i < steps.size(); ++i) steps[i].step = ctx.steps[i];
    pass(ctx, steps);
    return steps;
}

Metrics metricsOf(const Trace& t) { return computeMetrics(t, buildOpTree(t), Taxonomy::builtin()); }

} // namespace

TEST_CASE("a GPU-bound job whose host runs ahead: steps on the GPU's clock", "[metrics][passes]") {
    const Trace t = gpuBoundMlp().build(4);
    const Metrics m = metricsOf(t);
    REQUIRE(m.steps.size() == 4);
    // The job's own timer (CUDA events at step boundaries) measures each step's GPU work back to
    // back: kGpuBoundStepMs. The first step also waits for its first launch (11.5 us).
    CHECK(double(m.steps[0].time_ns) / 1e6 == Approx(kGpuBoundStepMs + 0.0115));
    for (size_t s = 1; s < 4; ++s) {
        INFO("step " << s + 1);
        CHECK(double(m.steps[s].time_ns) / 1e6 == Approx(kGpuBoundStepMs));
        CHECK(m.steps[s].host_ahead_ns > 100'000'000); // the host started the step >100 ms before its GPU work
        CHECK(m.steps[s].gpu_busy_ns == m.steps[s].time_ns);
        CHECK(m.steps[s].idle.launch_ns == 0);
    }
    CHECK(m.steady == std::vector<size_t>{1, 2, 3});
    CHECK(m.values.at("step.time_ms") == Approx(kGpuBoundStepMs));
    CHECK(m.values.at("gpu.busy_pct") > 95);
    CHECK(m.values.at("idle.launch_ms") == 0);
    CHECK(m.values.at("host.ahead_ms") > 100);
    for (const Finding& f : RuleSet::builtin().evaluate(m)) CHECK(f.rule != "launch-bound");
}

TEST_CASE("a launch-bound job whose host never waits for the GPU is still launch-bound", "[metrics][passes]") {
    // 500 kernels of 2 us launched every 21 us, no synchronisation at the step's end.
    const Metrics m = metricsOf(SyntheticTraining().kernels("aten::add", kAddKernel, 500, 2, 20).hostRunsAhead().build());
    CHECK(m.values.at("host.ahead_ms") == 0);
    CHECK(m.values.at("gpu.busy_pct") < 10);
    CHECK(m.values.at("idle.launch_ms") == Approx(9.5035)); // 22.5 us before the first kernel, 499 gaps of 19 us
    bool launch_bound = false;
    for (const Finding& f : RuleSet::builtin().evaluate(m)) launch_bound |= f.rule == "launch-bound";
    CHECK(launch_bound);
}

TEST_CASE("an idle gap is blamed on launches only when the launch that ended it came after it began", "[metrics][passes]") {
    // Two 100 us kernels, the second launched 500 us after the first: the host was late.
    SyntheticTraining job;
    job.kernels("aten::mm", kNvjet, 1, 100).host(500).kernels("aten::mm", kNvjet, 1, 100);
    const Trace t = job.build(1);
    const auto steps = runPass(t, timelinePass);
    REQUIRE(steps.size() == 1);
    CHECK(steps[0].idle.launch_ns == 7'500 + 406'000); // before the first kernel, and between the two
    CHECK(steps[0].idle.dependency_ns == 0);
    CHECK(steps[0].idle.tail_ns == 2'000); // the final synchronize
    // Without launch calls (GPU activity alone) the same gaps have an unknown cause.
    Trace gpu_only = job.build(1);
    for (GpuEvent& g : gpu_only.gpu) g.correlation = 0;
    const auto unknown = runPass(gpu_only, timelinePass);
    CHECK(unknown[0].idle.launch_ns == 0);
    CHECK(unknown[0].idle.unknown_ns == steps[0].idle.launch_ns);
}

TEST_CASE("the host pass counts dispatch, launches, syncs and the data loader", "[metrics][passes]") {
    const Trace t = SyntheticTraining().dataloader(300).kernels("aten::add", kAddKernel, 10, 2, 4).item().build(1);
    const auto s = runPass(t, hostPass);
    CHECK(s[0].launches == 10);
    CHECK(s[0].sync_calls == 2); // the .item() and the step's final synchronize
    CHECK(s[0].dataloader_ns == 300'000);
    CHECK(s[0].api_ns > 10 * 4'000);
    CHECK(s[0].cpu_dispatch_ns >= s[0].api_ns);
    CHECK(s[0].gpu_time_ns == 0); // not this pass's field
}

TEST_CASE("the kernel and memop passes count GPU time by family, class and kind", "[metrics][passes]") {
    const Trace t = SyntheticTraining()
                        .kernels("aten::mm", kNvjet, 3, 200)
                        .kernels("aten::add", kAddKernel, 4, 5)
                        .kernels("aten::zero_", "Memset (Device)", 2, 3, 5, GpuKind::Memset)
                        .kernels("aten::copy_", "Memcpy DtoD (Device -> Device)", 1, 7, 5, GpuKind::Memcpy)
                        .build(1);
    const auto k = runPass(t, kernelPass);
    CHECK(k[0].kernels == 7);
    CHECK(k[0].small_kernels.count == 4);
    CHECK(k[0].gpu_time_ns == (600 + 20 + 6 + 7) * 1000);
    CHECK(k[0].families.at("gemm").ns == 600'000);
    CHECK(k[0].classes.at("Elementwise add").count == 4);
    CHECK(k[0].memset.count == 0); // the memop pass's field
    const auto mo = runPass(t, memopPass);
    CHECK(mo[0].memset.count == 2);
    CHECK(mo[0].memset.ns == 6'000);
    CHECK(mo[0].memcpy.count == 1);
    CHECK(mo[0].dtod.ns == 7'000);
    CHECK(mo[0].kernels == 0);
}

TEST_CASE("the communication pass measures collectives and their exposed part", "[metrics][passes]") {
    const Trace t = SyntheticTraining()
                        .kernels("aten::mm", kNvjet, 2, 300)
                        .kernels("nccl:all_reduce", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 2, 500)
                        .build(1);
    const auto c = runPass(t, commPass);
    CHECK(c[0].collectives == 2);
    CHECK(c[0].comm_ns == 1'000'000);
    CHECK(c[0].comm_exposed_ns == 1'000'000);
}

TEST_CASE("the FLOPs and tokens passes read shapes and batch annotations", "[metrics][passes]") {
    Trace t = SyntheticTraining().batch("real_tokens=300 padded_tokens=400 sequences=2 packed=1").kernels("aten::mm", kNvjet, 2, 100).build(1);
    for (CpuEvent& e : t.cpu)
        if (t.str(e.name) == "aten::mm") e.input_dims = t.strings.intern("[[64, 32], [32, 16]]");
    const auto f = runPass(t, flopsPass);
    CHECK(f[0].flops == 2 * 2.0 * 64 * 32 * 16);
    const auto tok = runPass(t, tokensPass);
    CHECK(tok[0].real_tokens == 300);
    CHECK(tok[0].padded_tokens == 400);
    CHECK(tok[0].sequences == 2);
    CHECK(tok[0].packed);
    CHECK_FALSE(tok[0].boundaries);
}

TEST_CASE("the metric table defines every figure once, and the catalog comes from it", "[metrics][passes]") {
    std::set<std::string> names;
    for (const MetricDef& d : metricDefs()) {
        INFO(d.name);
        CHECK(names.insert(d.name).second);
        CHECK(std::string(d.description).size() > 10);
        CHECK(metricCatalog().count(d.name) == 1);
        CHECK(!(d.per_step && d.derived));
        // Every figure is computed through its entry, but the ranks' (from the analysis of several traces).
        CHECK(bool(d.per_step || d.derived) != std::string(d.name).starts_with("ranks."));
    }
    CHECK(names.size() == metricCatalog().size());
    // Every figure but the ranks' (set by `sightline ranks`) and the hardware counters' (set only
    // where samples were recorded) is computed.
    const Metrics m = metricsOf(healthyStep().build());
    for (const MetricDef& d : metricDefs())
        if (!std::string(d.name).starts_with("ranks.") && !std::string(d.name).starts_with("hw.")) CHECK(m.values.count(d.name) == 1);
}
