// The advisor's catalog, table-driven: for every rule a synthetic trace where it must fire (with the
// saving its file promises, computed here by hand from the trace's construction) and healthy
// traces where nothing fires; then the real fixtures.
#include "sightline/host_outliers.h"
#include "sightline/import.h"
#include "sightline/metrics.h"
#include "sightline/op_tree.h"
#include "sightline/replay.h"
#include "sightline/rules.h"
#include "synthetic_training.h"
#include "test_support.h"

#include <catch2/catch.hpp>

#include <optional>

using namespace sightline;
using namespace sightline::test;

namespace {

const char* const kTrsm = "void batch_trsm_left_kernel<float, 64, 4, 3, false, true, true>(cublasTrsmBatchParams2<float>, float, float const*, int)";
const char* const kFla = "chunk_gated_delta_rule_fwd_kernel_h_blockdim64";
const char* const kDepthwise = "void at::native::(anonymous namespace)::conv_depthwise2d_forward_kernel_generic<c10::BFloat16, int>(...)";
const char* const kCausalConv = "void causal_conv1d_fwd_kernel<Causal_conv1d_fwd_kernel_traits<128, 4, true, c10::BFloat16, c10::BFloat16>>(ConvParamsBase)";
const char* const kSilu = "void at::native::vectorized_elementwise_kernel<8, at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#6}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, ...)";
const char* const kPow = "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::pow_tensor_scalar_kernel_impl<float, float>(at::TensorIteratorBase&, float)::{lambda(float)#1}, std::array<char*, 2ul> >(int, ...)";
const char* const kMean = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4, 4> >(...)";
const char* const kRsqrt = "void at::native::vectorized_elementwise_kernel<4, at::native::rsqrt_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, ...)";

std::string ids(const Evaluated& e) {
    std::string s;
    for (const Finding& f : e.findings) s += f.rule + " ";
    return s;
}

struct Case {
    const char* rule;
    SyntheticTraining trace;
    double expected_saving_ms;
    std::vector<std::string> also; // rules that rightly fire with it
};

} // namespace

TEST_CASE("the catalog loads without errors and has every rule the issue names", "[rules]") {
    const RuleSet rules = RuleSet::builtin();
    for (const RuleError& e : rules.errors()) FAIL(e.message);
    const auto ids = rules.ids();
    for (const char* id : {"elementwise-storm", "gdn-torch-fallback", "causal-conv1d-missing", "unfused-rmsnorm",
                           "attention-not-flash", "padding-waste", "launch-bound", "memop-storm", "host-sync",
                           "non-fused-optimizer", "fp32-gemm", "dataloader-stall", "packed-without-boundaries",
                           "packed-attention-without-boundaries", "exposed-communication", "shape-replan", "drained-step-start"})
        CHECK(std::find(ids.begin(), ids.end(), id) != ids.end());
}

TEST_CASE("nothing fires on a healthy step", "[rules]") {
    const Evaluated e = evaluate(healthyStep().build());
    INFO("fired: " << ids(e));
    CHECK(e.findings.empty());
    // The healthy step is what it claims to be.
    CHECK(e.metrics.values.at("gpu.busy_pct") > 95);
    CHECK(e.metrics.values.at("padding.efficiency") == Approx(7900.0 / 8192.0));
    CHECK(e.metrics.values.at("steps.steady") == 2);
}

TEST_CASE("each rule fires on its pathology with the saving its fix makes in the replay", "[rules]") {
    // The healthy step is GPU-bound (long kernels queued well ahead of the GPU), so GPU time a fix
    // removes comes off the step; the launch-bound job's is host-bound, so host time does.
    std::vector<Case> cases;
    // 600 extra 8 us elementwise kernels: 640 a step, 5.6 ms; the replay removes 0.6 of them.
    cases.push_back({"elementwise-storm", healthyStep([](auto& t) { t.kernels("aten::mul", kMulKernel, 600, 8); }), 0.6 * 5.6});
    // 200 fp32 bmm of 7 us and 4 solves of 60 us, launched back to back: one stretch of the chunk
    // loop, merged into one kernel of 0.15 x its 1.64 ms.
    cases.push_back({"gdn-torch-fallback", healthyStep([](auto& t) {
                         t.kernels("aten::bmm", kXmmaFp32, 200, 7).kernels("aten::linalg_solve_triangular", kTrsm, 4, 60);
                     }),
                     0.85 * 1.64,
                     {"fp32-gemm"}}); // the fallback's bmm are fp32
    // 3 generic depthwise convs of 50 us, shortened to 0.3 of their time (the SiLU is left alone).
    cases.push_back({"causal-conv1d-missing", healthyStep([](auto& t) {
                         t.kernels("aten::_conv_depthwise2d", kDepthwise, 3, 50).kernels("aten::silu", kSilu, 3, 10);
                     }),
                     0.7 * 0.15});
    // 40 norms of pow 30 + mean 30 + rsqrt 20 us, no fused norm: 0.7 of the 120 kernels go, 7 in
    // every 10 in launch order: 28 pows, 28 means and 28 rsqrts, 2.24 ms.
    cases.push_back({"unfused-rmsnorm", healthyStep([](auto& t) {
                         for (int i = 0; i < 40; ++i)
                             t.kernels("aten::pow", kPow, 1, 30).kernels("aten::mean", kMean, 1, 30).kernels("aten::rsqrt", kRsqrt, 1, 20);
                     },
                                                    HealthyOptions{false, true, true, 20, "real_tokens=7900 padded_tokens=8192"}),
                     28 * 0.08});
    // Math SDPA (4 x 150 us) and softmax backward (4 x 300 us) at half their time: 0.9 ms.
    cases.push_back({"attention-not-flash", healthyStep({}, HealthyOptions{true, false, true, 20, "real_tokens=7900 padded_tokens=8192"}), 0.9});
    // 200 memsets of 2 us behind a GPU backlog: half of them go, 0.2 ms.
    cases.push_back({"memop-storm", healthyStep([](auto& t) { t.kernels("aten::zero_", "Memset (Device)", 200, 2, 5, GpuKind::Memset); }), 0.2});
    // .item() then 100 us of host work before the next launch: the GPU idles 109.5 us after the
    // sync; without the wait the host launches on while the GPU drains its queue.
    cases.push_back({"host-sync", healthyStep([](auto& t) { t.item().host(100); }), 0.1095});
    // Each step ends waiting for the GPU, then spends 2 ms on the host before its first launch
    // (a new shape's setup): the GPU idles 2.0075 ms a step (that, the step's opening and the first
    // launch); running ahead, the host does it while the GPU works through the step before.
    cases.push_back({"drained-step-start", SyntheticTraining().host(2000).kernels("aten::mm", kNvjet, 80, 200), 2.0075});
    // foreach AdamW: five 60 us multi-tensor kernels merged into one of 0.4 x 0.3 ms.
    cases.push_back({"non-fused-optimizer", healthyStep({}, HealthyOptions{true, true, false, 20, "real_tokens=7900 padded_tokens=8192"}), 0.18});
    // 10 fp32 GEMMs of 200 us at half their time: 1 ms.
    cases.push_back({"fp32-gemm", healthyStep([](auto& t) { t.kernels("aten::mm", kXmmaFp32, 10, 200); }), 1.0});
    // A 3 ms DataLoader wait at step start, 5% of it left: 2.85 ms.
    cases.push_back({"dataloader-stall", healthyStep({}, HealthyOptions{true, true, true, 3000, "real_tokens=7900 padded_tokens=8192"}), 0.95 * 3.0});
    // 500 kernels of 2 us launched every 21 us: 10.5 ms of host time a step, 0.3 of it kept; the
    // step stays host-bound.
    cases.push_back({"launch-bound", SyntheticTraining().kernels("aten::add", kAddKernel, 500, 2, 20), 0.7 * 10.5, {"elementwise-storm"}}); // 500 tiny add kernels are a storm too
    // 4 all-reduce buckets of 1 ms after backward on the compute stream: 4 ms exposed, 0.7 x 4 ms
    // by the rule's formula (overlap is not replayed).
    cases.push_back({"exposed-communication", healthyStep([](auto& t) {
                         t.kernels("nccl:all_reduce", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 4, 1000);
                     }),
                     0.7 * 4.0});
    // cuDNN attention setting up a new shape each step: one call of 20 ms among seven of 100 us
    // (their median) on a host-bound step; the replay keeps the median: 19.9 ms.
    cases.push_back({"shape-replan",
                     SyntheticTraining()
                         .kernels("aten::add", kAddKernel, 50, 2, 20)
                         .op("aten::_cudnn_attention_forward", 7, 100)
                         .op("aten::_cudnn_attention_forward", 1, 20000),
                     19.9,
                     {"launch-bound"}});
    for (const Case& c : cases) {
        DYNAMIC_SECTION(c.rule) {
            const Evaluated e = evaluate(c.trace.build());
            INFO("fired: " << ids(e));
            const Finding* f = findingOf(e, c.rule);
            REQUIRE(f != nullptr);
            CHECK(f->saving_ms == Approx(c.expected_saving_ms).epsilon(0.01));
            if (!std::isnan(f->saving_low_ms)) { // a range, where the rule states one, holds the estimate
                CHECK(f->saving_low_ms <= f->saving_ms + 1e-9);
                CHECK(f->saving_ms <= f->saving_high_ms + 1e-9);
            }
            CHECK(f->saving_pct == Approx(100.0 * f->saving_ms / e.metrics.values.at("step.time_ms")));
            CHECK(f->replayed == (std::string(c.rule) != "exposed-communication"));
            CHECK(!f->message.empty());
            CHECK(f->message.find("unknown") == std::string::npos);
            CHECK(!f->fix.empty());
            // No other rule fires on a single pathology, but those that share its cause.
            for (const Finding& other : e.findings)
                if (other.rule != c.rule)
                    CHECK(std::find(c.also.begin(), c.also.end(), other.rule) != c.also.end());
        }
    }
}

TEST_CASE("padding waste fires with the batching simulator's packed-rows saving", "[rules]") {
    const Evaluated e = evaluate(healthyStep({}, HealthyOptions{true, true, true, 20, "real_tokens=4096 padded_tokens=8192 sequences=8"}).build());
    const Finding* f = findingOf(e, "padding-waste");
    REQUIRE(f != nullptr);
    const double step = e.metrics.values.at("step.time_ms");
    CHECK(e.metrics.values.at("optimizer.gpu_ms") == Approx(0.3));
    // Three batches of 8,192 padded tokens (4,096 real) become two packed rows of 8,192 and
    // 4,096 tokens; every batch of the trace has one size, so each costs (step - optimizer) per
    // 8,192 padded tokens, and one optimizer step goes with each row.
    const double per_token = (step - 0.3) / 8192;
    const double ratio = (12288 * per_token + 2 * 0.3) / (3 * 8192 * per_token + 3 * 0.3);
    CHECK(e.metrics.values.at("padding.packed_saving_ms") == Approx(step * (1 - ratio)));
    // The step is GPU-bound: the replay shortens its kernels outside the optimizer step by the
    // simulator's share of the step outside the optimizer.
    const double share = step * (1 - ratio) / (step - 0.3);
    CHECK(f->saving_ms == Approx((e.metrics.values.at("gpu.time_ms") - 0.3) * share).epsilon(0.01));
    CHECK(e.metrics.values.at("tokens.per_s") == Approx(4096 / (step / 1e3)));
    CHECK(e.metrics.values.at("padding.packed_tokens_per_s") == Approx(4096 / (step / 1e3) / ratio));
    CHECK(f->message.find("packed rows of 8192 tokens") != std::string::npos);
    CHECK(f->fix.find("--batching packed") != std::string::npos);  // no stack named: every stack's fix
    CHECK(f->uncertainty.find("recorder's") == std::string::npos); // GPU-bound: the host's cost does not count
}

TEST_CASE("padding waste gives the fix for the stack the batches came from", "[rules]") {
    auto fixFor = [](const std::string& flags) {
        const Evaluated e = evaluate(healthyStep({}, HealthyOptions{true, true, true, 20, "real_tokens=4096 padded_tokens=8192 sequences=8 " + flags}).build());
        const Finding* f = findingOf(e, "padding-waste");
        return f ? f->fix : std::string("(no finding)");
    };
    CHECK(fixFor("reference_trainer=1").starts_with("Run the reference trainer with --batching packed"));
    CHECK(fixFor("transformers=1 hf_trainer=1 trl=1").starts_with("SFTConfig(padding_free=True)"));
    CHECK(fixFor("transformers=1 hf_trainer=1").starts_with("Trainer(..., data_collator=DataCollatorWithFlattening("));
    CHECK(fixFor("transformers=1").starts_with("Trainer(..., data_collator=DataCollatorWithFlattening("));
    CHECK(RuleSet::builtin().explain("padding-waste").find("fix when stack.trl > 0: SFTConfig") != std::string::npos);
}

TEST_CASE("padding waste prices the reference trainer's packing by the simulator, others by the replay", "[rules]") {
    auto finding = [](const std::string& flags) {
        const Evaluated e = evaluate(healthyStep({}, HealthyOptions{true, true, true, 20, "real_tokens=4096 padded_tokens=8192 sequences=8 " + flags}).build());
        const Finding* f = findingOf(e, "padding-waste");
        REQUIRE(f != nullptr);
        return std::pair{*f, e.metrics.values.at("padding.packed_saving_ms")};
    };
    // --batching packed fills rows to the same budget: the simulator's figure, not replayed.
    const auto [reference, reference_formula] = finding("reference_trainer=1");
    CHECK_FALSE(reference.replayed);
    CHECK(reference.saving_ms == Approx(reference_formula));
    CHECK(reference.uncertainty.find("rule's formula for the fix named here") != std::string::npos);
    // Flattening each batch (transformers' collator): the replay of the shorter kernels.
    const auto [flattened, flattened_formula] = finding("transformers=1");
    CHECK(flattened.replayed);
    CHECK(flattened.saving_ms < flattened_formula);
    CHECK(RuleSet::builtin().explain("padding-waste").find("and where stack.reference_trainer > 0") != std::string::npos);
}

TEST_CASE("packed rows without any boundary are flagged at attention", "[rules]") {
    auto fired = [](const char* batch) {
        return findingOf(evaluate(healthyStep({}, HealthyOptions{true, true, true, 20, batch}).build()),
                         "packed-attention-without-boundaries") != nullptr;
    };
    CHECK(fired("real_tokens=8192 padded_tokens=8192 sequences=6 packed=1"));
    CHECK_FALSE(fired("real_tokens=8192 padded_tokens=8192 sequences=6 packed=1 boundaries=1"));
    CHECK_FALSE(fired("real_tokens=8192 padded_tokens=8192 sequences=6 packed=1 cu_seqlens=1"));
    CHECK_FALSE(fired("real_tokens=7900 padded_tokens=8192 sequences=4"));
}

TEST_CASE("padding waste fires on a sixth of padding, not on a thirtieth", "[rules]") {
    auto finding = [](const char* batch) {
        const Evaluated e = evaluate(healthyStep({}, HealthyOptions{true, true, true, 20, batch}).build());
        const Finding* f = findingOf(e, "padding-waste");
        return f ? std::optional<Finding>(*f) : std::nullopt;
    };
    // 85% real tokens (the peer stack's padded batches on the benchmark data): a saving worth a warning.
    const auto sixth = finding("real_tokens=6963 padded_tokens=8192 sequences=8");
    REQUIRE(sixth.has_value());
    CHECK(sixth->saving_ms > 0);
    CHECK_FALSE(sixth->minor);
    CHECK_FALSE(finding("real_tokens=7920 padded_tokens=8192 sequences=8").has_value()); // 96.7% real
}

TEST_CASE("padding is not claimed without annotations", "[rules]") {
    const Evaluated e = evaluate(healthyStep({}, HealthyOptions{true, true, true, 20, "sequences=4"}).build());
    CHECK(std::isnan(e.metrics.values.at("padding.efficiency")));
    CHECK(findingOf(e, "padding-waste") == nullptr);
}

TEST_CASE("the GDN rule stays silent when flash-linear-attention kernels run", "[rules]") {
    const Evaluated e = evaluate(healthyStep([](auto& t) {
                                     t.kernels("aten::bmm", kXmmaFp32, 200, 7).kernels("aten::linalg_solve_triangular", kTrsm, 4, 60).kernels("chunk_gated_delta_rule", kFla, 4, 50);
                                 }).build());
    CHECK(findingOf(e, "gdn-torch-fallback") == nullptr);
}

TEST_CASE("host syncs at the end of a step do not fire", "[rules]") {
    SyntheticTraining t = healthyStep();
    t.item();
    const Evaluated e = evaluate(t.build());
    CHECK(e.metrics.values.at("sync.mid_step") == 0);
    CHECK(findingOf(e, "host-sync") == nullptr);
}

TEST_CASE("a step begun on an idle GPU fires only when the wait before it drained the queue", "[rules]") {
    auto job = [] { return SyntheticTraining().host(2000).kernels("aten::mm", kNvjet, 80, 200); };
    const Evaluated drained = evaluate(job().build());
    CHECK(drained.metrics.values.at("sync.drained") == 1);
    CHECK(drained.metrics.values.at("idle.drained_ms") == Approx(drained.metrics.values.at("idle.launch_ms")));
    CHECK(drained.metrics.values.at("host.ahead_ms") == 0);
    // The host a step ahead (no wait between steps): the same host work, nothing drained, nothing fires.
    const Evaluated ahead = evaluate(job().hostRunsAhead().build());
    CHECK(ahead.metrics.values.at("sync.drained") == 0);
    CHECK(ahead.metrics.values.at("idle.drained_ms") == 0);
    CHECK(ahead.metrics.values.at("host.ahead_ms") > 0);
    CHECK(findingOf(ahead, "drained-step-start") == nullptr);
    // A wait mid-step is host-sync's, not this rule's: the step after it did not begin drained.
    const Evaluated mid = evaluate(job().item().kernels("aten::mm", kNvjet, 2, 200).hostRunsAhead().build());
    CHECK(mid.metrics.values.at("sync.mid_step") == 1);
    CHECK(mid.metrics.values.at("sync.drained") == 0);
    CHECK(findingOf(mid, "drained-step-start") == nullptr);
    // A host that needs longer than the GPU gains nothing from running ahead: launch-bound's, not this rule's.
    const Evaluated bound = evaluate(SyntheticTraining().kernels("aten::add", kAddKernel, 500, 2, 20).build());
    CHECK(bound.metrics.values.at("sync.drained") == 1);
    CHECK(bound.metrics.values.at("cpu.dispatch_ms") - bound.metrics.values.at("sync.wait_ms") > bound.metrics.values.at("gpu.busy_ms"));
    CHECK(findingOf(bound, "drained-step-start") == nullptr);
}

TEST_CASE("packed batches without boundaries reaching linear-attention layers are an error", "[rules]") {
    auto with = [](const char* batch, bool fallback) {
        return healthyStep([=](auto& t) {
                   if (fallback) t.kernels("aten::_conv_depthwise2d", kDepthwise, 3, 50);
                   else t.kernels("chunk_gated_delta_rule", kFla, 4, 50).kernels("causal_conv1d_fn", kCausalConv, 4, 20);
               },
                           HealthyOptions{true, true, true, 20, batch})
            .build();
    };
    const Evaluated no_boundaries = evaluate(with("real_tokens=8100 padded_tokens=8192 sequences=5 packed=1", false));
    const Finding* f = findingOf(no_boundaries, "packed-without-boundaries");
    REQUIRE(f != nullptr);
    CHECK(f->severity == Severity::Error);
    CHECK(f->saving_ms == 0);
    CHECK(findingOf(evaluate(with("real_tokens=8100 padded_tokens=8192 sequences=5 packed=1 cu_seqlens=1", false)),
                    "packed-without-boundaries") == nullptr);
    // Restarting position_ids reach attention, not the delta rule's kernels.
    CHECK(findingOf(evaluate(with("real_tokens=8100 padded_tokens=8192 sequences=5 packed=1 boundaries=1", false)),
                    "packed-without-boundaries") != nullptr);
    // The torch conv fallback ignores boundaries even when they are passed.
    CHECK(findingOf(evaluate(with("real_tokens=8100 padded_tokens=8192 sequences=5 packed=1 cu_seqlens=1", true)),
                    "packed-without-boundaries") != nullptr);
    // ... but the reference trainer's own libtorch delta rule and conv take the boundaries.
    CHECK(findingOf(evaluate(with("real_tokens=8100 padded_tokens=8192 sequences=5 packed=1 cu_seqlens=1 reference_trainer=1", true)),
                    "packed-without-boundaries") == nullptr);
}

TEST_CASE("on the GDN fallback fixture the report flags the storm, GDN and conv with evidence", "[rules][fixture]") {
    const Trace t = importTrace(fixture("qwen3next_fallback_small.json.gz"));
    const Evaluated e = evaluate(t);
    INFO("fired: " << ids(e));
    for (const char* rule : {"elementwise-storm", "gdn-torch-fallback", "causal-conv1d-missing"}) {
        const Finding* f = findingOf(e, rule);
        REQUIRE(f != nullptr);
        CHECK(f->replayed);
        CHECK(!f->evidence.empty());
    }
    const Finding* gdn = findingOf(e, "gdn-torch-fallback");
    CHECK(gdn->message.find("601 aten::bmm") != std::string::npos);
    CHECK(gdn->message.find("24 triangular solves") != std::string::npos);
    // The step is launch-bound (the GPU busy 13% of it): the fixes that take host work off the
    // step save much of it; those that only shorten GPU work save next to nothing, are minor, and
    // say why.
    CHECK(findingOf(e, "launch-bound")->saving_pct > 50);
    CHECK(gdn->saving_pct > 25);
    CHECK(findingOf(e, "elementwise-storm")->saving_pct > 10);
    for (const char* rule : {"causal-conv1d-missing", "fp32-gemm"}) {
        const Finding* f = findingOf(e, rule);
        REQUIRE(f != nullptr);
        CHECK(f->saving_pct < 1);
        CHECK(f->minor);
        CHECK(f->severity == Severity::Info);
        CHECK(f->critical_path.find("critical path") != std::string::npos);
    }
    // The step waits for the host, whose recorded time includes the profiler's own cost per op:
    // every replayed finding gives the saving replayed without it as the other end of its range.
    for (const Finding& f : e.findings) {
        if (!f.replayed) continue;
        INFO(f.rule);
        CHECK(f.uncertainty.find("includes the recorder's cost (torch.profiler: about 5.5 us an op or API call)") != std::string::npos);
        if (f.saving_ms < 0.005) continue;
        REQUIRE(!std::isnan(f.saving_low_ms));
        CHECK(f.saving_low_ms <= f.saving_ms + 1e-9);
        CHECK(f.saving_ms <= f.saving_high_ms + 1e-9);
    }
    // Fix texts name only fixes for what the trace shows: its Gated DeltaNet and conv layers.
    CHECK(findingOf(e, "elementwise-storm")->fix.find("flash-linear-attention") != std::string::npos);
    CHECK(findingOf(e, "elementwise-storm")->fix.find("Liger") == std::string::npos); // no module names: family unknown
    CHECK(findingOf(e, "padding-waste") == nullptr);                                  // no token annotations: no padding figure
    CHECK(std::isnan(e.metrics.values.at("padding.efficiency")));
}

TEST_CASE("on the healthy dense fixture the kernel, optimizer, precision, sync and data rules stay silent", "[rules][fixture]") {
    const Evaluated e = evaluate(importTrace(fixture("dense_healthy.json.gz")));
    INFO("fired: " << ids(e));
    for (const char* rule : {"gdn-torch-fallback", "causal-conv1d-missing", "unfused-rmsnorm", "attention-not-flash",
                             "non-fused-optimizer", "fp32-gemm", "host-sync", "dataloader-stall", "packed-without-boundaries",
                             "padding-waste", "memop-storm", "exposed-communication"})
        CHECK(findingOf(e, rule) == nullptr);
    CHECK(e.metrics.steps.size() == 3);
    CHECK(e.metrics.steady.size() == 2);
    // No fix text names what this dense model does not run: no Gated DeltaNet, no depthwise conv;
    // and no kernel library, whose support for its family the trace cannot show.
    for (const Finding& f : e.findings)
        for (const char* name : {"flash-linear-attention", "causal-conv1d", "causal_conv1d", "Liger", "FusedRMSNormGated"}) {
            INFO(f.rule << " names " << name);
            CHECK(f.fix.find(name) == std::string::npos);
        }
}

TEST_CASE("a kernel library is named only for a model family it supports, seen in the trace", "[rules]") {
    // The storm of a dense step, with and without the module ranges with_modules=True records.
    auto storm = [](const char* module) {
        SyntheticTraining t = healthyStep([](auto& s) { s.kernels("aten::mul", kMulKernel, 600, 8); });
        if (module) t.op(module, 4, 50);
        const Evaluated e = evaluate(t.build());
        const Finding* f = findingOf(e, "elementwise-storm");
        REQUIRE(f != nullptr);
        return f->fix;
    };
    CHECK(storm(nullptr).find("Liger") == std::string::npos);
    CHECK(storm("nn.Module: Qwen3DecoderLayer_0").find("Liger") != std::string::npos);
    CHECK(storm("nn.Module: LlamaDecoderLayer_3").find("Liger") != std::string::npos);
    CHECK(storm("nn.Module: Qwen3NextDecoderLayer_0").find("Liger") == std::string::npos); // not a supported family
    CHECK(storm(nullptr).find("flash-linear-attention") == std::string::npos);
}

TEST_CASE("a finding worth under 1% of the step is at most info and minor, a correctness error stays an error", "[rules]") {
    // Two foreach kernels of 10 us after 15 ms of GEMMs: the fused optimizer saves 0.1%.
    SyntheticTraining job;
    job.kernels("aten::mm", kNvjet, 50, 300).begin("Optimizer.step#AdamW.step").kernels("aten::_foreach_mul_", kForeachKernel, 2, 10).end();
    const Evaluated e = evaluate(job.build());
    const Finding* f = findingOf(e, "non-fused-optimizer");
    REQUIRE(f != nullptr);
    CHECK(f->saving_pct < 1);
    CHECK(f->minor);
    CHECK(f->severity == Severity::Info);
    const Evaluated packed = evaluate(healthyStep([](auto& t) { t.kernels("aten::_conv_depthwise2d", kDepthwise, 3, 50); },
                                                  HealthyOptions{true, true, true, 20, "real_tokens=8100 padded_tokens=8192 sequences=5 packed=1"})
                                          .build());
    const Finding* wrong = findingOf(packed, "packed-without-boundaries");
    REQUIRE(wrong != nullptr);
    CHECK(wrong->saving_ms == 0);
    CHECK_FALSE(wrong->minor);
    CHECK(wrong->severity == Severity::Error);
}

TEST_CASE("a rule file with an error is refused with its file and line, and the others still run", "[rules]") {
    const auto dir = tempDir();
    writeFile(dir / "good.toml", R"TOML(id = "my-rule"
title = "Many kernels"
severity = "info"
when = "kernels.count > 10"
message = "{kernels.count:.0f} kernels"
fix = "fewer kernels"
saving_ms = "0"
saving_explained = "none"
)TOML");
    writeFile(dir / "unknown-metric.toml", R"TOML(id = "bad-metric"
title = "x"
severity = "info"
when = "kernels.count > 10 && gpu.bussy_pct < 50"
message = "x"
fix = "x"
saving_ms = "0"
saving_explained = "x"
)TOML");
    writeFile(dir / "syntax.toml", "id = \"broken\"\ntitle = \"x\nseverity = \"info\"\n");
    writeFile(dir / "bad-expr.toml", R"TOML(id = "bad-expr"
title = "x"
severity = "info"
when = "1 +"
message = "x"
fix = "x"
saving_ms = "0"
saving_explained = "x"
)TOML");
    writeFile(dir / "bad-severity.toml", R"TOML(id = "bad-sev"
title = "x"
severity = "fatal"
when = "1"
message = "x"
fix = "x"
saving_ms = "0"
saving_explained = "x"
)TOML");
    RuleSet rules = RuleSet::builtin();
    const size_t builtin = rules.size();
    rules.addPath(dir);
    REQUIRE(rules.errors().size() == 4);
    std::string all;
    for (const RuleError& e : rules.errors()) all += e.message + "\n";
    INFO(all);
    CHECK_THAT(all, Catch::Contains("unknown-metric.toml:4:") && Catch::Contains("unknown metric 'gpu.bussy_pct'"));
    CHECK_THAT(all, Catch::Contains("syntax.toml:2:"));
    CHECK_THAT(all, Catch::Contains("bad-expr.toml:4:"));
    CHECK_THAT(all, Catch::Contains("bad-severity.toml:3:"));
    CHECK(rules.size() == builtin + 1);
    const Evaluated e = evaluate(healthyStep().build());
    const auto findings = rules.evaluate(e.metrics);
    REQUIRE(findings.size() == 1);
    CHECK(findings[0].rule == "my-rule");
    CHECK(findings[0].message == "113 kernels");
}

TEST_CASE("a [[fixes]] entry needs a condition and a fix", "[rules]") {
    const std::string head = "id = \"r\"\ntitle = \"x\"\nseverity = \"info\"\nwhen = \"1\"\nmessage = \"x\"\nfix = \"x\"\n"
                             "saving_ms = \"0\"\nsaving_explained = \"x\"\n";
    RuleSet rules;
    rules.addText(head + "[[fixes]]\nfix = \"y\"\n", "no-when.toml");
    rules.addText(head + "[[fixes]]\nwhen = \"kernels.cout > 1\"\nfix = \"y\"\n", "bad-when.toml");
    rules.addText(head + "fixes = [\"y\"]\n", "not-tables.toml");
    rules.addText(head + "[[fixes]]\nwhen = \"1\"\nfix = \"y\"\nfx = \"z\"\n", "typo.toml");
    REQUIRE(rules.errors().size() == 4);
    CHECK_THAT(rules.errors()[0].message, Catch::Contains("no-when.toml:1: missing key 'when'"));
    CHECK_THAT(rules.errors()[1].message, Catch::Contains("bad-when.toml:10: in 'when': unknown metric 'kernels.cout'"));
    CHECK_THAT(rules.errors()[2].message, Catch::Contains("not-tables.toml:9: [[fixes]] must be tables"));
    CHECK_THAT(rules.errors()[3].message, Catch::Contains("typo.toml:12: unknown key 'fx' in [[fixes]]"));
}

TEST_CASE("a user rule with a built-in id replaces it", "[rules]") {
    const auto dir = tempDir();
    writeFile(dir / "storm.toml", R"TOML(id = "elementwise-storm"
title = "Stricter storm"
severity = "error"
when = "family_count('elementwise') >= 10"
message = "{family_count('elementwise'):.0f} elementwise kernels"
fix = "fuse"
saving_ms = "family_ms('elementwise')"
saving_explained = "all of it"
)TOML");
    RuleSet rules = RuleSet::builtin();
    const size_t n = rules.size();
    rules.addPath(dir / "storm.toml");
    CHECK(rules.size() == n);
    const Evaluated e = evaluate(healthyStep().build());
    const auto findings = rules.evaluate(e.metrics);
    REQUIRE(findings.size() == 1);
    CHECK(findings[0].title == "Stricter storm");
    CHECK(findings[0].saving_ms == Approx(0.8));
    CHECK(findings[0].message == "40 elementwise kernels");
}

TEST_CASE("on a host-bound step recorded with ops, replayed savings reach to the step without the recorder's cost", "[rules]") {
    // 10 fp32 GEMMs of 300 us, then 500 small adds whose ops take 13 us of host time each: the
    // GPU idles for launches (host-bound), so halving the GEMMs saves nothing on the step as
    // recorded. Without torch.profiler's 5.5 us an op or API call each launch takes 6.9 us of host
    // time, the host runs ahead of the GPU (3.45 ms of launches against 4 ms of GPU work), and
    // the GEMMs' 1.5 ms saved lies on the critical path.
    auto job = [] { return SyntheticTraining().kernels("aten::mm", kXmmaFp32, 10, 300).kernels("aten::add", kAddKernel, 500, 2, 12); };
    Trace recorded = job().build(4);
    recorded.recorder = "torch.profiler";
    const Evaluated e = evaluate(recorded);
    INFO("fired: " << ids(e));
    REQUIRE(e.metrics.values.at("step.host_bound") == 1.0);
    CHECK(findingOf(e, "launch-bound") != nullptr);
    const Finding* gemm = findingOf(e, "fp32-gemm");
    REQUIRE(gemm != nullptr);
    CHECK(gemm->saving_ms == Approx(0).margin(0.05));
    // The other end, as a share of the step: the GEMMs' 1.5 ms saved, partly drained into the
    // host's launches that follow, of a step of at least the 4 ms of GPU work.
    const double step = e.metrics.values.at("step.time_ms");
    CHECK(gemm->saving_high_ms / step > 0.1);
    CHECK(gemm->saving_high_ms / step < 1.5 / 4.0);
    CHECK(gemm->saving_low_ms <= gemm->saving_ms);
    CHECK(gemm->uncertainty.find("unprofiled the step may be GPU-bound") != std::string::npos);
    for (const Finding& f : e.findings)
        if (f.replayed) CHECK(f.uncertainty.find("replayed without it the step takes") != std::string::npos);

    // The same job recorded by an unknown recorder: no deflated end, a general word instead.
    const Evaluated unknown = evaluate(job().build(4));
    const Finding* plain = findingOf(unknown, "fp32-gemm");
    REQUIRE(plain != nullptr);
    CHECK(std::isnan(plain->saving_high_ms));
    CHECK(plain->uncertainty.find("its size unknown for this trace's recorder") != std::string::npos);
}

TEST_CASE("on a GPU-bound step the recorder's cost leaves the savings' ranges alone", "[rules]") {
    Trace recorded = healthyStep([](auto& t) { t.kernels("aten::mm", kXmmaFp32, 10, 200); }).build();
    recorded.recorder = "torch.profiler";
    const Evaluated e = evaluate(recorded);
    REQUIRE(e.metrics.values.at("step.host_bound") == 0.0);
    const Finding* gemm = findingOf(e, "fp32-gemm");
    REQUIRE(gemm != nullptr);
    CHECK(gemm->saving_ms == Approx(1.0).epsilon(0.01));
    CHECK(gemm->uncertainty.find("recorder's") == std::string::npos);
    // Its range is the rule's own (0.2 to 0.8 of the GEMMs' time left): 0.4 to 1.6 ms.
    CHECK(gemm->saving_low_ms == Approx(0.4).epsilon(0.02));
    CHECK(gemm->saving_high_ms == Approx(1.6).epsilon(0.02));
}

TEST_CASE("per-shape setup: calls far beyond their op's median, and only those", "[rules]") {
    auto job = [](double slow_us, int fast_calls) {
        return evaluate(SyntheticTraining()
                            .kernels("aten::add", kAddKernel, 50, 2, 20)
                            .op("aten::_cudnn_attention_backward", fast_calls, 100)
                            .op("aten::_cudnn_attention_backward", 1, slow_us)
                            .build());
    };
    SECTION("one setup a step: counted per step and by op") {
        const Evaluated e = job(8000, 3);
        CHECK(e.metrics.values.at("host.outlier_calls") == 1);
        CHECK(e.metrics.values.at("host.outlier_ms") == Approx(7.9));
        REQUIRE(e.metrics.host_outliers.count("aten::_cudnn_attention_backward"));
        CHECK(e.metrics.host_outliers.at("aten::_cudnn_attention_backward").count == 2); // the two steady steps
        const Finding* f = findingOf(e, "shape-replan");
        REQUIRE(f != nullptr);
        CHECK(f->fix.find("enable_cudnn_sdp(False)") != std::string::npos); // attention's own fix
        CHECK(f->fix.find("cudnn.benchmark") == std::string::npos);         // no convolution here
    }
    SECTION("on the reference trainer's trace, its own fixes") {
        const Evaluated e = evaluate(SyntheticTraining()
                                         .kernels("aten::add", kAddKernel, 50, 2, 20)
                                         .op("aten::_cudnn_attention_backward", 3, 100)
                                         .op("aten::_cudnn_attention_backward", 1, 8000)
                                         .batch("real_tokens=3000 padded_tokens=4096 sequences=2 reference_trainer=1")
                                         .build());
        const Finding* f = findingOf(e, "shape-replan");
        REQUIRE(f != nullptr);
        CHECK(f->fix.find("--fix attention") != std::string::npos);
        CHECK(f->fix.find("enable_cudnn_sdp") == std::string::npos);
    }
    SECTION("where the SDPA op itself builds the plan (torch versions without the _cudnn_attention ops)") {
        const Evaluated e = evaluate(SyntheticTraining()
                                         .kernels("aten::add", kAddKernel, 50, 2, 20)
                                         .op("aten::_scaled_dot_product_cudnn_attention", 3, 100)
                                         .op("aten::_scaled_dot_product_cudnn_attention", 1, 8000)
                                         .build());
        const Finding* f = findingOf(e, "shape-replan");
        REQUIRE(f != nullptr);
        CHECK(f->saving_ms == Approx(7.9).epsilon(0.01));
    }
    SECTION("under 20 times the median, or under 5 ms beyond it, is no outlier") {
        for (const double slow : {1900.0, 4000.0}) { // 19 x the median; 3.9 ms beyond it
            const Evaluated e = job(slow, 3);
            CHECK(e.metrics.values.at("host.outlier_calls") == 0);
            CHECK(findingOf(e, "shape-replan") == nullptr);
        }
    }
    SECTION("an op with too few calls has no usual time") {
        const Evaluated e = job(8000, 0); // three calls in three steps, each 8 ms
        CHECK(e.metrics.values.at("host.outlier_calls") == 0);
        CHECK(findingOf(e, "shape-replan") == nullptr);
    }
}

TEST_CASE("an outlier inside another counts once in the step's figure", "[rules]") {
    TraceBuilder b;
    b.op("ProfilerStep#1", 0, 100000, 0, 1, CpuKind::UserAnnotation);
    for (int i = 0; i < 6; ++i) { // six calls of 50 us, then one of 30 ms with its 29 ms child
        b.op("aten::scaled_dot_product_attention", 100 + 100 * i, 50).op("aten::_cudnn_attention_forward", 110 + 100 * i, 30);
    }
    b.op("aten::scaled_dot_product_attention", 1000, 30000).op("aten::_cudnn_attention_forward", 1010, 29000);
    const Trace t = b.build();
    const Metrics m = computeMetrics(t, buildOpTree(t), Taxonomy::builtin());
    REQUIRE(m.steps.size() == 1);
    CHECK(m.steps[0].host_outliers.count == 1);
    CHECK(double(m.steps[0].host_outliers.ns) / 1e6 == Approx(29.95));
    CHECK(m.host_outliers.at("aten::_cudnn_attention_forward").count == 1);
    CHECK(double(m.host_outliers.at("aten::_cudnn_attention_forward").ns) / 1e6 == Approx(28.97));
    CHECK(m.host_outliers.count("aten::scaled_dot_product_attention") == 0); // by op, the innermost names it
}

TEST_CASE("time an op waits for the device is not setup", "[rules]") {
    // A GPU-bound step: the host runs ahead until the launch queue is full, then a launch inside
    // aten::mm blocks for 30 ms. Six usual calls of 50 us each with a 10 us launch.
    const auto trace = [](double setup_us) {
        TraceBuilder b;
        b.op("ProfilerStep#1", 0, 100000, 0, 1, CpuKind::UserAnnotation);
        for (int i = 0; i < 6; ++i) b.op("aten::mm", 100 + 100 * i, 50).api("cuLaunchKernel", 130 + 100 * i, 10, 0);
        b.op("aten::mm", 1000, 30050 + setup_us).api("cuLaunchKernel", 1020 + setup_us, 30010, 0);
        b.op("aten::mm", 40000, 20000).api("cudaStreamSynchronize", 40010, 19980, 0); // a wait of another kind
        b.op("aten::mm", 70000, 9000).api("cuLaunchKernel", 78000, 900, 0, 2);        // a launch on another thread
        return b.build();
    };
    SECTION("a blocked launch alone") {
        const Trace t = trace(0);
        const std::vector<HostOutlier> o = hostOutliers(t);
        REQUIRE(o.size() == 1); // only the call whose own time is long: the one beside another thread's launch
        CHECK(t.str(t.cpu[o[0].event].name) == "aten::mm");
        CHECK(t.cpu[o[0].event].start_ns == 70'000'000);
        CHECK(o[0].waiting_ns == 0);
    }
    SECTION("setup beside a blocked launch: the setup alone") {
        const Trace t = trace(8000);
        const std::vector<HostOutlier> o = hostOutliers(t);
        REQUIRE(o.size() == 2);
        CHECK(t.cpu[o[0].event].start_ns == 1'000'000);
        CHECK(o[0].waiting_ns == 30'010'000);
        CHECK(double(o[0].excess_ns) / 1e3 == Approx(8000 + 50 - 50 - 10)); // 8,040 us of own time less the usual 50
    }
}

TEST_CASE("an op that waits for work queued ahead of it is no outlier, though nothing recorded blocked", "[rules]") {
    // The host ran ahead of the device: a 29.9 ms kernel queued before the call at 1 ms; the call
    // blocks (in the allocator, say) until it is done, then works for `after_us` more.
    const auto outliers = [](double after_us) {
        TraceBuilder b;
        b.op("ProfilerStep#1", 0, 100000, 0, 1, CpuKind::UserAnnotation);
        for (int i = 0; i < 6; ++i) b.op("aten::mm", 100 + 100 * i, 50);
        b.kernel("nvjet_gemm", 950, 29950, 0);
        b.op("aten::mm", 1000, 29900 + after_us);
        const Trace t = b.build();
        return hostOutliers(t);
    };
    CHECK(outliers(100).empty());
    const std::vector<HostOutlier> o = outliers(8100); // 8.1 ms of its own after the device was done
    REQUIRE(o.size() == 1);
    CHECK(double(o[0].waiting_ns) / 1e3 == Approx(29900));
    CHECK(double(o[0].excess_ns) / 1e3 == Approx(8100 - 50));
}

TEST_CASE("the elementwise storm leaves the chunk loop's and the optimizer's kernels to their own findings", "[rules]") {
    // The storm of the pathology case (640 elementwise kernels a step, 5.6 ms), plus a chunk loop of
    // 100 fp32 bmm with two 8 us muls after each and 100 muls inside the optimizer step: neither
    // adds to the storm's saving, 0.6 of the 5.6 ms as before.
    const Evaluated e = evaluate(healthyStep([](auto& t) {
                                     t.kernels("aten::mul", kMulKernel, 600, 8);
                                     for (int i = 0; i < 100; ++i) t.kernels("aten::bmm", kXmmaFp32, 1, 7).kernels("aten::mul", kMulKernel, 2, 8);
                                     t.begin("Optimizer.step#AdamW.step").kernels("aten::mul", kMulKernel, 100, 8).end();
                                 }).build());
    const Finding* f = findingOf(e, "elementwise-storm");
    REQUIRE(f != nullptr);
    CHECK(f->message.find("940 elementwise kernels") != std::string::npos); // all of them are counted
    CHECK(f->saving_ms == Approx(0.6 * 5.6).epsilon(0.01));                 // but not priced here
}

TEST_CASE("several fixes replayed together", "[rules]") {
    // The launch-bound job is an elementwise storm too: its two fixes overlap (both take host time).
    const Trace t = SyntheticTraining().kernels("aten::add", kAddKernel, 500, 2, 20).build();
    const OpTree tree = buildOpTree(t);
    const Metrics m = computeMetrics(t, tree, Taxonomy::builtin());
    const ReplayModel replay(t, tree, Taxonomy::builtin(), m);
    const RuleSet rules = RuleSet::builtin();
    const std::vector<Finding> findings = rules.evaluate(m, &replay);
    auto saving = [&](const char* id) {
        for (const Finding& f : findings)
            if (f.rule == id) return f.saving_ms;
        return double(NAN);
    };
    const CombinedSaving one = rules.combined(m, replay, {"launch-bound"});
    CHECK(one.rules == std::vector<std::string>{"launch-bound"});
    CHECK(one.saving_ms == Approx(saving("launch-bound")));
    const CombinedSaving both = rules.combined(m, replay, {"launch-bound", "elementwise-storm", "host-sync", "no-such-rule"});
    CHECK(both.rules == std::vector<std::string>{"launch-bound", "elementwise-storm"});
    CHECK(both.left_out == std::vector<std::string>{"host-sync", "no-such-rule"}); // not firing; unknown
    CHECK(both.saving_ms > std::max(saving("launch-bound"), saving("elementwise-storm")));
    CHECK(both.saving_ms < saving("launch-bound") + saving("elementwise-storm")); // they overlap
    CHECK(both.saving_pct == Approx(100.0 * both.saving_ms / m.values.at("step.time_ms")));
    const CombinedSaving none = rules.combined(m, replay, {"host-sync"});
    CHECK(none.rules.empty());
    CHECK(std::isnan(none.saving_ms));
}
