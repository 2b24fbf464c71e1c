// Steps and metrics (docs/metrics.md) on synthetic traces whose figures are known.
#include "sightline/metrics.h"
#include "sightline/import.h"
#include "sightline/op_tree.h"
#include "sightline/rules.h"
#include "synthetic_training.h"
#include "test_support.h"

#include <catch2/catch.hpp>

using namespace sightline;
using namespace sightline::test;

namespace {
Metrics metricsOf(const Trace& t) { return computeMetrics(t, buildOpTree(t), Taxonomy::builtin()); }
} // namespace

TEST_CASE("steps come from ProfilerStep#N, then step ranges, then optimizer steps, then the whole trace", "[metrics]") {
    {
        Trace t = TraceBuilder().op("ProfilerStep#4", 0, 10, 1, 1, CpuKind::UserAnnotation).op("train_step", 20, 10, 2, 1, CpuKind::UserAnnotation).op("ProfilerStep#5", 40, 10, 3, 1, CpuKind::UserAnnotation).build();
        const auto s = detectSteps(t);
        REQUIRE(s.size() == 2);
        CHECK(s[0].source == StepSource::ProfilerStep);
        CHECK(s[1].name == "ProfilerStep#5");
    }
    {
        Trace t = TraceBuilder().op("train_step", 0, 10, 1, 1, CpuKind::UserAnnotation).op("step", 2, 5, 2, 1, CpuKind::UserAnnotation) // nested: counted once
                      .op("sightline.step 2", 20, 10, 3, 1, CpuKind::UserAnnotation)
                      .build();
        const auto s = detectSteps(t);
        REQUIRE(s.size() == 2);
        CHECK(s[0].source == StepSource::UserRange);
        CHECK(s[0].end_ns == 10'000);
    }
    {
        Trace t = TraceBuilder().op("aten::mm", 0, 10, 1).op("Optimizer.step#AdamW.step", 50, 10, 2, 1, CpuKind::UserAnnotation).op("aten::mm", 70, 10, 3).op("Optimizer.step#AdamW.step", 100, 10, 4, 1, CpuKind::UserAnnotation).build();
        const auto s = detectSteps(t);
        REQUIRE(s.size() == 2);
        CHECK(s[0].source == StepSource::Optimizer);
        CHECK(s[0].start_ns == 0);
        CHECK(s[0].end_ns == 60'000);
        CHECK(s[1].start_ns == 60'000);
        CHECK(s[1].end_ns == 110'000);
    }
    {
        Trace t = TraceBuilder().op("aten::mm", 5, 10, 1).op("aten::add", 30, 10, 2).build();
        const auto s = detectSteps(t);
        REQUIRE(s.size() == 1);
        CHECK(s[0].source == StepSource::WholeTrace);
        CHECK(s[0].end_ns - s[0].start_ns == 35'000);
    }
}

TEST_CASE("warm-up steps are left out of the steady state", "[metrics]") {
    const std::vector<Step> steps(4);
    CHECK(steadySteps(steps, {100, 10, 11, 10}) == std::vector<size_t>{1, 2, 3});
    CHECK(steadySteps(steps, {100, 10, 50, 10}) == std::vector<size_t>{1, 3}); // more than twice the median
    CHECK(steadySteps(std::vector<Step>(2), {100, 10}) == std::vector<size_t>{1});
    CHECK(steadySteps(std::vector<Step>(1), {100}) == std::vector<size_t>{0});
}

TEST_CASE("busy time, small kernels, launches and idle causes of a launch-bound step", "[metrics]") {
    // 500 kernels of 2 us launched every 21 us (each launch call takes 20 us).
    const Metrics m = metricsOf(SyntheticTraining().kernels("aten::add", kAddKernel, 500, 2, 20).build());
    const auto& v = m.values;
    CHECK(v.at("kernels.count") == 500);
    CHECK(v.at("kernels.small_count") == 500);
    CHECK(v.at("kernels.small_share") == 1.0);
    CHECK(v.at("launches.count") == 500);
    CHECK(v.at("gpu.busy_ms") == Approx(1.0));
    CHECK(v.at("step.time_ms") == Approx(10.5055));
    CHECK(v.at("gpu.busy_pct") == Approx(100.0 / 10.5055));
    CHECK(v.at("idle.launch_ms") == Approx(9.5035)); // 22.5 us before the first kernel, 499 gaps of 19 us
    CHECK(v.at("idle.tail_ms") == Approx(0.002));    // the step's final synchronize
    CHECK(v.at("idle.sync_ms") == 0);
    CHECK(v.at("gpu.idle_ms") + v.at("gpu.busy_ms") == Approx(v.at("step.time_ms")));
}

TEST_CASE("a data-loader wait and a mid-step sync are told apart", "[metrics]") {
    SyntheticTraining t = healthyStep([](auto& s) { s.item().host(100); }, HealthyOptions{true, true, true, 3000, "real_tokens=1 padded_tokens=2"});
    const Metrics m = metricsOf(t.build());
    CHECK(m.values.at("idle.dataloader_ms") == Approx(3.0095));
    CHECK(m.values.at("idle.sync_ms") == Approx(0.1095));
    CHECK(m.values.at("sync.mid_step") == 1);
    CHECK(m.values.at("sync.calls") == 2); // the .item() and the step's final synchronize
    CHECK(m.values.at("memcpy.dtoh_count") == 1);
    CHECK(m.values.at("dataloader.ms") == Approx(3.0));
}

TEST_CASE("without CUDA runtime calls (the light mode) host synchronisations are unknown, not zero", "[metrics]") {
    // The same step with a mid-step sync, its runtime calls turned into the driver launches the
    // collector counts in the light mode (no synchronisation among them).
    SyntheticTraining t = healthyStep([](auto& s) { s.item().host(100); }, HealthyOptions{true, true, true, 3000, "real_tokens=1 padded_tokens=2"});
    Trace trace = t.build();
    const Metrics with = metricsOf(trace);
    const std::vector<CpuEvent> all = trace.cpu;
    CHECK(with.syncs_recorded);
    CHECK(with.values.at("sync.calls") == 2);
    std::vector<CpuEvent> kept;
    for (CpuEvent e : trace.cpu) {
        if (e.kind == CpuKind::Runtime) {
            if (!trace.str(e.name).starts_with("cudaLaunchKernel")) continue;
            e.kind = CpuKind::Driver;
            e.name = trace.strings.intern("cuLaunchKernel");
        }
        kept.push_back(e);
    }
    trace.cpu = kept;
    const Metrics light = metricsOf(trace);
    CHECK_FALSE(light.syncs_recorded);
    CHECK(std::isnan(light.values.at("sync.calls")));
    CHECK(std::isnan(light.values.at("sync.mid_step")));
    CHECK(std::isnan(light.values.at("idle.sync_ms")));
    CHECK(light.values.at("launches.count") == with.values.at("launches.count")); // the counted launches still count

    // The collector's launch hooks record the synchronisations too (driver calls, the trace marked
    // by kHostSyncsKey): the same figures as from runtime calls.
    std::vector<CpuEvent> hooked;
    for (CpuEvent e : all) {
        if (e.kind == CpuKind::Runtime) {
            const std::string_view n = trace.str(e.name);
            if (n.starts_with("cudaLaunchKernel")) e.name = trace.strings.intern("cuLaunchKernel");
            else if (n == "cudaStreamSynchronize") e.name = trace.strings.intern("cuStreamSynchronize");
            else if (n == "cudaDeviceSynchronize") e.name = trace.strings.intern("cuCtxSynchronize");
            else continue;
            e.kind = CpuKind::Driver;
        }
        hooked.push_back(e);
    }
    trace.cpu = hooked;
    CHECK_FALSE(metricsOf(trace).syncs_recorded); // not marked: a format-3 capture's calls, which held no syncs
    trace.metadata[std::string(kHostSyncsKey)] = "counted launch hooks";
    const Metrics marked = metricsOf(trace);
    CHECK(marked.syncs_recorded);
    for (const char* key : {"sync.calls", "sync.mid_step", "idle.sync_ms"}) CHECK(marked.values.at(key) == Approx(with.values.at(key)));
}

TEST_CASE("GEMM and attention FLOPs from recorded shapes", "[metrics]") {
    CHECK(opFlops("aten::mm", "[[4096, 1024], [1024, 3072]]") == 2.0 * 4096 * 1024 * 3072);
    CHECK(opFlops("aten::addmm", "[[3072], [4096, 1024], [1024, 3072], [], []]") == 2.0 * 4096 * 1024 * 3072);
    CHECK(opFlops("aten::bmm", "[[16, 64, 128], [16, 128, 64]]") == 2.0 * 16 * 64 * 128 * 64);
    CHECK(opFlops("aten::_scaled_dot_product_cudnn_attention", "[[4, 8, 1024, 128], [4, 8, 1024, 128], [4, 8, 1024, 128], [], [], [], []]") ==
          2.0 * 4 * 8 * 1024 * 1024 * 256);
    CHECK(std::isnan(opFlops("aten::mm", "")));
    CHECK(std::isnan(opFlops("aten::add", "[[4, 4], [4, 4]]")));
    CHECK(std::isnan(opFlops("aten::mm", "[[4, 5], [6, 7]]"))); // inner dimensions disagree
}

TEST_CASE("MFU against the device's peak, and tokens and padding from annotations", "[metrics]") {
    CHECK(peakTflops("NVIDIA H200") == Approx(989.4));
    CHECK(peakTflops("NVIDIA H100 80GB HBM3") == Approx(989.4));
    CHECK(peakTflops("NVIDIA H100 PCIe") == Approx(756.0));
    CHECK(peakTflops("NVIDIA A100-SXM4-80GB") == Approx(312.0));
    CHECK(std::isnan(peakTflops("Some Future GPU")));

    Trace t = healthyStep({}, HealthyOptions{true, true, true, 20, "real_tokens=6000 padded_tokens=8000 sequences=3"}).build();
    for (CpuEvent& e : t.cpu)
        if (t.str(e.name) == "aten::mm")
            e.input_dims = t.strings.intern("[[8192, 4096], [4096, 4096]]");
    const Metrics m = metricsOf(t);
    const double flops = 60.0 * 2 * 8192 * 4096 * 4096; // 60 mm a step
    CHECK(m.values.at("flops.per_step") == Approx(flops));
    const double step_s = m.values.at("step.time_ms") / 1e3;
    CHECK(m.values.at("flops.tflops_per_s") == Approx(flops / step_s / 1e12));
    CHECK(m.values.at("mfu.pct") == Approx(100.0 * flops / step_s / 1e12 / 989.4));
    CHECK(m.values.at("tokens.real") == 6000);
    CHECK(m.values.at("padding.efficiency") == Approx(0.75));
    CHECK(m.values.at("tokens.per_s") == Approx(6000 / step_s));
    CHECK(m.values.at("batch.sequences") == 3);
    CHECK(m.values.at("batch.packed") == 0);
}

TEST_CASE("a batch annotation recorded twice (RecordFunction and NVTX) counts once, and two batches count twice", "[metrics]") {
    Trace t = healthyStep({}, HealthyOptions{true, true, true, 20, "real_tokens=6000 padded_tokens=8000 sequences=3"}).build();
    const size_t n = t.cpu.size();
    for (size_t i = 0; i < n; ++i)
        if (t.str(t.cpu[i].name).starts_with("sightline.batch")) {
            CpuEvent nvtx = t.cpu[i]; // the NVTX range, pushed just inside the RecordFunction range
            nvtx.start_ns += 10;
            nvtx.end_ns -= 10;
            nvtx.external_id = 0;
            t.cpu.push_back(nvtx);
        }
    Metrics m = metricsOf(t);
    CHECK(m.values.at("tokens.real") == 6000);
    CHECK(m.values.at("tokens.padded") == 8000);
    CHECK(m.values.at("batch.sequences") == 3);

    // Two micro-batches a step (gradient accumulation): two annotations one after the other.
    Trace two = healthyStep([](SyntheticTraining& s) { s.batch("real_tokens=1000 padded_tokens=2000 sequences=1"); },
                            HealthyOptions{true, true, true, 20, "real_tokens=6000 padded_tokens=8000 sequences=3"})
                    .build();
    m = metricsOf(two);
    CHECK(m.values.at("tokens.real") == 7000);
    CHECK(m.values.at("tokens.padded") == 10000);
}

TEST_CASE("the fixtures' steps and steady state", "[metrics][fixture]") {
    const Trace dense = importTrace(fixture("dense_healthy.json.gz"));
    const Metrics m = metricsOf(dense);
    REQUIRE(m.steps.size() == 3);
    CHECK(m.steps[0].step.name == "ProfilerStep#1");
    CHECK(m.steady == std::vector<size_t>{1, 2});
    for (const StepMetrics& s : m.steps) {
        CHECK(s.kernels == 1392); // the same work every step
        CHECK(s.gpu_busy_ns <= s.time_ns);
    }
    CHECK(m.values.at("kernels.count") == 1392);
    CHECK(m.values.at("mfu.pct") > 0);
    const Trace gdn = importTrace(fixture("qwen3next_fallback_small.json.gz"));
    const Metrics g = metricsOf(gdn);
    REQUIRE(g.steps.size() == 1);
    CHECK(g.steps[0].step.name == "train_step");
    CHECK(g.values.at("kernels.count") == 4428);
    CHECK(g.values.at("memcpy.dtod_count") == 147);
}

TEST_CASE("communication beside compute is not exposed, and communication alone is", "[metrics]") {
    const char* kAllReduce = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
    // Serial: two 500 us all-reduces on the compute stream after the GEMMs.
    SyntheticTraining job;
    job.kernels("aten::mm", "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", 4, 300).kernels("nccl:all_reduce", kAllReduce, 2, 500);
    Trace serial = job.build();
    Metrics s = metricsOf(serial);
    CHECK(s.values.at("comm.collectives") == 2);
    CHECK(s.values.at("comm.ms") == Approx(1.0));
    CHECK(s.values.at("comm.exposed_ms") == Approx(1.0));
    // The same all-reduces moved onto their own stream, shortened to 100 us and run inside the
    // 300 us GEMM before them: nothing exposed, and the compute stream stays the GEMMs' one.
    Trace overlapped = job.build();
    const StringId ar = overlapped.strings.intern(kAllReduce);
    const GpuEvent* last_gemm = nullptr;
    int in_step = 0, moved = 0;
    for (GpuEvent& g : overlapped.gpu) {
        if (g.name != ar) {
            last_gemm = &g;
            in_step = 0;
            continue;
        }
        REQUIRE(last_gemm != nullptr);
        g.stream = 99;
        g.start_ns = last_gemm->start_ns + 50'000 + 110'000 * in_step++;
        g.end_ns = g.start_ns + 100'000;
        ++moved;
    }
    CHECK(moved == 2 * 3);
    Metrics o = metricsOf(overlapped);
    CHECK(o.values.at("comm.collectives") == 2);
    CHECK(o.values.at("comm.ms") == Approx(0.2));
    CHECK(o.values.at("comm.exposed_ms") == Approx(0.0));
    CHECK(o.steps[1].compute_stream == s.steps[1].compute_stream);
}

TEST_CASE("a trace of GPU activity alone is analysed on the GPU side", "[metrics][fixture]") {
    // The dense fixture with its CPU ops and annotations stripped (fixtures/kineto/make_gpu_only.py).
    const Metrics full = metricsOf(importTrace(fixture("dense_healthy.json.gz")));
    const Metrics m = metricsOf(importTrace(fixture("dense_healthy_gpu_only.json.gz")));
    CHECK_FALSE(m.host_recorded);
    CHECK(m.launches_recorded);
    REQUIRE(m.steps.size() == 3); // each ends with the fused AdamW kernel
    CHECK(m.steps[0].step.source == StepSource::OptimizerKernels);
    CHECK(m.steady == std::vector<size_t>{1, 2});
    for (const StepMetrics& s : m.steps) CHECK(s.kernels == 1392);
    // The GPU-side figures agree with the full trace's.
    for (const char* key : {"step.time_ms", "gpu.busy_ms", "gpu.time_ms", "launches.count", "idle.launch_ms", "memset.count"}) {
        INFO(key);
        CHECK(m.values.at(key) == Approx(full.values.at(key)).epsilon(0.02));
    }
    // What needs the host's ops is unknown, not zero.
    for (const char* key : {"cpu.dispatch_ms", "launches.host_ms_each", "dataloader.ms", "optimizer.gpu_ms", "flops.per_step"})
        CHECK(std::isnan(m.values.at(key)));
}

TEST_CASE("a trace with no step after warm-up says so, and its findings are unreliable", "[metrics]") {
    // One step that compiles (torch.compile's dynamo_timed ranges) and is launch-bound.
    SyntheticTraining compiling;
    compiling.op("compile_fx.<locals>.fw_compiler_base (dynamo_timed)", 1, 2000).kernels("aten::add", kAddKernel, 500, 2, 20);
    const Metrics m = metricsOf(compiling.build(1));
    CHECK(m.warmup_only.find("every step compiles") != std::string::npos);
    CHECK(m.steady == std::vector<size_t>{0}); // the figures still average what there is
    const auto findings = RuleSet::builtin().evaluate(m);
    REQUIRE(!findings.empty());
    for (const Finding& f : findings) CHECK(f.unreliable.find("measured on warm-up") != std::string::npos);

    // Three steps of which the second compiles again (a recompilation): the third alone is steady.
    SyntheticTraining recompiling;
    recompiling.kernels("aten::mm", kNvjet, 3, 200);
    Trace t = recompiling.build(3);
    int64_t second = 0;
    for (const CpuEvent& e : t.cpu)
        if (t.str(e.name) == "ProfilerStep#2") second = e.start_ns;
    t.cpu.push_back(CpuEvent{second + 5, second + 10, t.strings.intern("_compile.compile_inner (dynamo_timed)")});
    const Metrics r = metricsOf(t);
    CHECK(r.steady == std::vector<size_t>{2});
    CHECK(r.warmup_only.empty());

    // A lone step that still allocates device memory is warm-up too; one that does not is steady.
    SyntheticTraining allocating;
    allocating.op("cudaMalloc", 3, 50).kernels("aten::mm", kNvjet, 3, 200);
    CHECK(metricsOf(allocating.build(1)).warmup_only.find("allocates device memory (3 allocation calls") != std::string::npos);
    CHECK(metricsOf(SyntheticTraining().kernels("aten::mm", kNvjet, 3, 200).build(1)).warmup_only.empty());
    CHECK(metricsOf(importTrace(fixture("qwen3next_fallback_small.json.gz"))).warmup_only.empty());
}
