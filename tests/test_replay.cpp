// The what-if replay (replay.h) on synthetic traces whose critical path is known, and on the
// fixtures: the replay of a trace as it ran reproduces its steps; a change saves only what leaves
// the critical path.
#include "sightline/import.h"
#include "sightline/op_tree.h"
#include "sightline/replay.h"
#include "search.h" // analyzer/src
#include "synthetic_training.h"
#include "test_support.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

using namespace sightline;
using namespace sightline::test;

namespace {

struct Replayed {
    Trace trace;
    OpTree tree;
    Metrics metrics;
    ReplayModel model;
    explicit Replayed(Trace t)
        : trace(std::move(t)), tree(buildOpTree(trace)), metrics(computeMetrics(trace, tree, Taxonomy::builtin())),
          model(trace, tree, Taxonomy::builtin(), metrics) {}
    // The replayed saving of a change, ms a step.
    double saving(const Change& c) const { return model.baselineMs() - model.replay({c}).step_ms; }
};

Change change(ChangeKind kind, double amount, Selector s = {}) {
    Change c;
    c.kind = kind;
    c.amount = amount;
    c.select = std::move(s);
    return c;
}
Selector families(std::vector<std::string> f) {
    Selector s;
    s.families = std::move(f);
    return s;
}
Selector ops(std::vector<std::string> o) {
    Selector s;
    s.ops = std::move(o);
    return s;
}

} // namespace

TEST_CASE("the replay of a trace as it ran reproduces its steps", "[replay]") {
    std::vector<std::pair<const char*, SyntheticTraining>> jobs;
    jobs.emplace_back("healthy", healthyStep());
    jobs.emplace_back("launch-bound", SyntheticTraining().kernels("aten::add", kAddKernel, 500, 2, 20));
    jobs.emplace_back("gpu-bound, host ahead", gpuBoundMlp());
    jobs.emplace_back("mid-step sync", healthyStep([](auto& s) { s.item().host(100); }));
    jobs.emplace_back("data-loader wait", healthyStep({}, HealthyOptions{true, true, true, 3000, "real_tokens=1 padded_tokens=2"}));
    for (auto& [name, job] : jobs) {
        INFO(name);
        const Replayed r(job.build(4));
        REQUIRE(r.model.usable());
        CHECK(r.model.launchesRecorded());
        CHECK(r.model.baselineMs() == Approx(r.model.measuredMs()).epsilon(1e-4));
    }
}

TEST_CASE("the replay reproduces the fixtures' steps", "[replay][fixture]") {
    for (const char* name : {"qwen3next_fallback_small.json.gz", "dense_healthy.json.gz", "dense_healthy_gpu_only.json.gz"}) {
        INFO(name);
        const Replayed r(importTrace(fixture(name)));
        REQUIRE(r.model.usable());
        CHECK(r.model.baselineMs() == Approx(r.model.measuredMs()).epsilon(1e-4));
    }
}

TEST_CASE("GPU time saved in a GPU-bound step comes off the step, host time saved does not", "[replay]") {
    const Replayed r(gpuBoundMlp().build(4));
    CHECK(r.saving(change(ChangeKind::RemoveKernels, 1.0, ops({"aten::gelu", "aten::gelu_backward"}))) == Approx(3.2).epsilon(1e-3));
    CHECK(r.saving(change(ChangeKind::ScaleKernels, 0.5, families({"gemm"}))) == Approx(72.0).epsilon(1e-3));
    CHECK(r.saving(change(ChangeKind::ScaleHost, 0.0, ops({"*"}))) == Approx(0.0).margin(1e-3));
}

TEST_CASE("host time saved in a launch-bound step comes off the step, GPU time saved does not", "[replay]") {
    // 500 kernels of 2 us, each launched by an op of 21 us of host time.
    const Replayed r(SyntheticTraining().kernels("aten::add", kAddKernel, 500, 2, 20).build(4));
    CHECK(r.saving(change(ChangeKind::ScaleKernels, 0.5, families({"elementwise"}))) == Approx(0.0).margin(2e-3));
    // Removing 60% of the kernels removes their ops' host time: 300 x 21 us.
    CHECK(r.saving(change(ChangeKind::RemoveKernels, 0.6, families({"elementwise"}))) == Approx(6.3).epsilon(0.01));
    // Host dispatch cut to 30% (CUDA graphs): 0.7 x the 10.5 ms of host time.
    CHECK(r.saving(change(ChangeKind::ScaleHost, 0.3, ops({"*"}))) == Approx(0.7 * 10.5).epsilon(0.01));
}

TEST_CASE("a dropped synchronisation and a faster data loader save the GPU's wait for them", "[replay]") {
    const Replayed sync(healthyStep([](auto& s) { s.item().host(100); }).build(4));
    Change drop;
    drop.kind = ChangeKind::DropSyncs;
    CHECK(sync.saving(drop) == Approx(sync.metrics.value("idle.sync_ms")).epsilon(0.05));
    const Replayed loader(healthyStep({}, HealthyOptions{true, true, true, 3000, "real_tokens=1 padded_tokens=2"}).build(4));
    CHECK(loader.saving(change(ChangeKind::ScaleHost, 0.0, ops({"enumerate(DataLoader)*"}))) == Approx(3.0).epsilon(0.01));
}

TEST_CASE("merging a group of kernels replaces them by one, launched by the first call", "[replay]") {
    // foreach AdamW: five 60 us kernels inside Optimizer.step#, merged into one of 0.4 x 300 us.
    const Replayed r(healthyStep({}, HealthyOptions{true, true, false, 20, "real_tokens=7900 padded_tokens=8192"}).build(4));
    Change merge = change(ChangeKind::MergeKernels, 0.4, families({"optimizer"}));
    merge.select.within = {"Optimizer.step#*"};
    merge.group = MergeGroup::Within;
    const ReplayResult res = r.model.replay({merge});
    CHECK(res.gpu_changed == 5 * 4);
    CHECK(r.model.baselineMs() - res.step_ms == Approx(0.18).epsilon(0.02));
}

TEST_CASE("a deflated replay takes the recorder's cost per op and API call off the host's time", "[replay]") {
    // 500 kernels of 2 us, each launched by an op of 21 us: 1 us of host time before the launch
    // call (the op's start in it) and the call's 20 us (its own start in it).
    Trace launch_bound = SyntheticTraining().kernels("aten::add", kAddKernel, 500, 2, 20).build(4);
    launch_bound.recorder = "torch.profiler";
    const Replayed r(std::move(launch_bound));
    REQUIRE(r.model.recorderCostUs() == ReplayModel::kTorchProfilerCostUs);
    // Without 5.5 us an event: the 1 us before the call keeps its floor, 0.4 us; the call keeps
    // 14.5 us: 6.1 us less a launch, and the step stays host-bound.
    CHECK(r.model.baselineMs() - r.model.deflatedBaselineMs() == Approx(500 * 6.1e-3).epsilon(0.01));
    CHECK(r.model.replay({}, true).step_ms == Approx(r.model.deflatedBaselineMs()));
    // Host time cut to 0.3, deflated: the cost comes off what the cut leaves, down to the floors
    // (0.3 us -> 0.12, 6 us -> 2.4 us): 2.52 us a launch, and the GPU becomes the limit, 3 us a
    // kernel (its 2 us and the 1 us from its launch's end to its start, kept as its slack).
    const ReplayResult cut = r.model.replay({change(ChangeKind::ScaleHost, 0.3, ops({"*"}))}, true);
    CHECK(r.model.deflatedBaselineMs() - cut.step_ms == Approx(500 * (14.9 - 3.0) * 1e-3).epsilon(0.01));

    // A GPU-bound step loses nothing: its host runs ahead.
    Trace gpu_bound = gpuBoundMlp().build(4);
    gpu_bound.recorder = "torch.profiler";
    const Replayed g(std::move(gpu_bound));
    CHECK(g.model.deflatedBaselineMs() == Approx(g.model.baselineMs()).epsilon(1e-4));

    // Without a known recorder there is no deflated replay.
    const Replayed unknown(SyntheticTraining().kernels("aten::add", kAddKernel, 500, 2, 20).build(4));
    CHECK(unknown.model.recorderCostUs() == 0);
    CHECK(std::isnan(unknown.model.deflatedBaselineMs()));
}

TEST_CASE("traces name their recorder, Sightline's costing less an event than torch.profiler's", "[replay][fixture]") {
    const Replayed kineto(importTrace(fixture("qwen3next_fallback_small.json.gz")));
    CHECK(kineto.model.recorder() == "torch.profiler");
    CHECK(kineto.model.recorderCostUs() == ReplayModel::kTorchProfilerCostUs);
    CHECK(ReplayModel::kSightlineCostUs < ReplayModel::kTorchProfilerCostUs);
    // A trace of GPU activity alone has no recorded ops to take the cost off.
    const Replayed gpu_only(importTrace(fixture("dense_healthy_gpu_only.json.gz")));
    CHECK(gpu_only.model.recorderCostUs() == 0);
}

TEST_CASE("the replay's galloping search agrees with upper_bound in any order of queries", "[replay]") {
    std::mt19937_64 rng(7);
    for (const size_t n : {size_t(0), size_t(1), size_t(2), size_t(17), size_t(1000)}) {
        std::vector<int64_t> x(n);
        for (int64_t& v : x) v = int64_t(rng() % 500); // with repeats
        std::sort(x.begin(), x.end());
        size_t hint = 0;
        int64_t t = 0;
        for (int q = 0; q < 4000; ++q) {
            // Mostly small steps either way (as the replay asks), sometimes a jump anywhere.
            t = q % 50 == 0 ? int64_t(rng() % 600) - 50 : t + int64_t(rng() % 21) - 8;
            const size_t expected = size_t(std::upper_bound(x.begin(), x.end(), t) - x.begin());
            REQUIRE(upperBoundFrom(x, t, hint) == expected);
            REQUIRE(hint == expected);
        }
        hint = n + 5; // a hint past the end is taken as the end
        CHECK(upperBoundFrom(x, -1000, hint) == 0);
    }
}
