// Batch annotations (hand-written and the Python adapter's), the tokens-and-padding figures, and
// the batching simulator (docs/metrics.md "Token annotations", docs/padding.md).
#include "sightline/batches.h"
#include "sightline/metrics.h"
#include "sightline/op_tree.h"
#include "sightline/padding_sim.h"
#include "synthetic_training.h"
#include "token_metrics.h"

#include <catch2/catch.hpp>

using namespace sightline;
using namespace sightline::test;

namespace {

Metrics metricsOf(const Trace& t) { return computeMetrics(t, buildOpTree(t), Taxonomy::builtin()); }

// A healthy three-step job with two batch annotations a step, renamed in order to `names` (an
// empty name makes it a range of another name); `after` adds annotations after the last step.
Trace withBatches(const std::vector<std::string>& names, const std::vector<std::string>& after = {}) {
    Trace t = healthyStep([](SyntheticTraining& s) { s.batch("x=1"); }).build();
    size_t k = 0;
    int64_t last = 0;
    for (CpuEvent& e : t.cpu) {
        last = std::max(last, e.end_ns);
        if (!t.str(e.name).starts_with("sightline.batch")) continue;
        REQUIRE(k < names.size());
        e.name = t.strings.intern(names[k].empty() ? "some.range" : names[k]);
        ++k;
    }
    CHECK(k == names.size());
    for (const std::string& n : after) {
        CpuEvent e{};
        e.name = t.strings.intern(n);
        e.kind = CpuKind::UserAnnotation;
        e.start_ns = last + 1000;
        e.end_ns = last + 2000;
        e.thread = t.cpu.front().thread;
        last += 3000;
        t.cpu.push_back(e);
    }
    return t;
}

std::string early(int id) { return "sightline.batch padded_tokens=1000 auto=1 id=" + std::to_string(id) + " late=1"; }
std::string rest(int id, int real) {
    return "sightline.batch real_tokens=" + std::to_string(real) + " sequences=2 lengths=" + std::to_string(real - 100) +
        ",100 auto=1 id=" + std::to_string(id) + " cont=1";
}

} // namespace

TEST_CASE("a batch annotation's fields", "[batching]") {
    const BatchRecord b = parseBatchAnnotation(
        "sightline.batch real_tokens=10 padded_tokens=16 sequences=2 ignored_tokens=3 packed=1 boundaries=1 seq_idx=1 "
        "lengths=4,6 transformers=1 hf_trainer=1 auto=1 id=7 late=1 junk=x lengths_x=1,2 padded_tokens=abc");
    CHECK(b.real == 10);
    CHECK(b.padded == 16);
    CHECK(b.sequences == 2);
    CHECK(b.ignored == 3);
    CHECK(b.packed);
    CHECK(b.boundaries);
    CHECK_FALSE(b.cu_seqlens);
    CHECK(b.seq_idx);
    CHECK(b.lengths == std::vector<int64_t>{4, 6});
    CHECK(b.stack == (kStackTransformers | kStackHfTrainer));
    CHECK(b.automatic);
    CHECK(b.id == 7);
    CHECK(b.more);
    CHECK_FALSE(b.complete());
    const BatchRecord c = parseBatchAnnotation("sightline.batch cu_seqlens=1 lengths=3,x reference_trainer=1");
    CHECK(c.cu_seqlens);
    CHECK(c.boundaries);      // cu_seqlens carry the boundaries to attention too
    CHECK(c.lengths.empty()); // a list with a word in it is not taken
    CHECK(c.stack == kStackReferenceTrainer);
    CHECK(std::isnan(c.real));
}

TEST_CASE("sequence lengths for the simulator: given, or approximated from the counts", "[batching]") {
    bool approx = true;
    BatchRecord b = parseBatchAnnotation("sightline.batch real_tokens=10 padded_tokens=16 lengths=4,6");
    CHECK(lengthsOrApproximation(b, &approx) == std::vector<int64_t>{4, 6});
    CHECK_FALSE(approx);
    // Padded: the longest row sets the width (16 / 4 = 4 tokens), the others share the rest.
    b = parseBatchAnnotation("sightline.batch real_tokens=11 padded_tokens=16 sequences=4");
    CHECK(lengthsOrApproximation(b, &approx) == std::vector<int64_t>{4, 3, 2, 2});
    CHECK(approx);
    b = parseBatchAnnotation("sightline.batch real_tokens=10 padded_tokens=10 sequences=3 packed=1");
    CHECK(lengthsOrApproximation(b) == std::vector<int64_t>{4, 3, 3});
    CHECK(lengthsOrApproximation(parseBatchAnnotation("sightline.batch sequences=3")).empty());
}

TEST_CASE("the adapter's batches reported a step late count in the step they entered", "[batching][metrics]") {
    // Step 1: batch 1 enters, and the rest of a batch whose first part was never recorded
    // (id 0: left out). Steps 2 and 3: a batch enters and the previous one's counts arrive.
    // Batch 3's counts arrive after the last step.
    const Metrics m = metricsOf(withBatches({early(1), rest(0, 999), early(2), rest(1, 700), early(3), rest(2, 600)},
                                            {rest(3, 500)}));
    REQUIRE(m.steps.size() == 3);
    CHECK(m.steps[0].real_tokens == 700);
    CHECK(m.steps[1].real_tokens == 600);
    CHECK(m.steps[2].real_tokens == 500);
    CHECK(m.steps[2].padded_tokens == 1000);
    CHECK(m.steps[2].batches.size() == 1);
    CHECK(m.steps[2].batches[0].lengths == std::vector<int64_t>{400, 100});
    CHECK(m.values.at("tokens.real") == 550); // steady steps 2 and 3
    CHECK(m.values.at("padding.efficiency") == Approx(0.55));

    // A window that closed before batch 3's counts came: step 3 is left out of the token figures.
    const Metrics cut = metricsOf(withBatches({early(1), rest(0, 999), early(2), rest(1, 700), early(3), rest(2, 600)}));
    CHECK(cut.steps[2].incomplete_batches == 1);
    CHECK(cut.steps[2].batches.empty());
    CHECK(cut.values.at("tokens.real") == 600);
    CHECK(cut.values.at("tokens.per_s") == Approx(600 / (double(cut.steps[1].time_ns) / 1e9)));
}

TEST_CASE("adapter batch numbers are per process: two ranks' batch 1 in one trace stay two batches", "[batching][metrics]") {
    Trace t = withBatches({early(1), early(1), rest(1, 700), rest(1, 600), early(2), early(2)}, {rest(2, 500), rest(2, 400)});
    t.threads.push_back(Thread{2, 2, t.strings.intern("rank 1")});
    const uint32_t second = uint32_t(t.threads.size() - 1);
    size_t k = 0;
    for (CpuEvent& e : t.cpu)
        if (t.str(e.name).starts_with("sightline.batch") && k++ % 2 == 1) e.thread = second;
    const Metrics m = metricsOf(t);
    CHECK(m.steps[0].batches.size() == 2);
    CHECK(m.steps[0].real_tokens == 1300);
    CHECK(m.steps[0].padded_tokens == 2000);
    CHECK(m.steps[2].real_tokens == 900);
}

TEST_CASE("a job's own batch annotations win over the adapter's", "[batching][metrics]") {
    const std::string hand = "sightline.batch real_tokens=300 padded_tokens=400 sequences=2";
    const std::string adapter = "sightline.batch real_tokens=310 padded_tokens=400 sequences=2 auto=1 id=";
    const Metrics m = metricsOf(withBatches({hand, adapter + "1", hand, adapter + "2", hand, adapter + "3"}));
    CHECK(m.values.at("tokens.real") == 300);
    CHECK(m.steps[1].batches.size() == 1);
    const Metrics only = metricsOf(withBatches({adapter + "1", "", adapter + "2", "", adapter + "3", ""}));
    CHECK(only.steps[1].batches.size() == 1);
    CHECK(only.values.at("tokens.real") == 310);
}

TEST_CASE("batchings of known lengths under a budget", "[batching]") {
    const std::vector<int64_t> lengths = {5, 3, 8, 2, 7, 1};
    auto summary = [&](Batching how) { return summarise(how, makeBatches(how, lengths, 10)); };
    const BatchingResult in_order = summary(Batching::PaddedInOrder); // [5,3] [8] [2] [7] [1]
    CHECK(in_order.batches == 5);
    CHECK(in_order.real == 26);
    CHECK(in_order.padded == 10 + 8 + 2 + 7 + 1);
    const BatchingResult packed = summary(Batching::Packed); // [5,3] [8,2] [7,1]
    CHECK(packed.batches == 3);
    CHECK(packed.padded == 26);
    CHECK(packed.efficiency() == 1);
    const BatchingResult bucketed = summary(Batching::Bucketed); // longest first: [8] [7] [5,3] [2,1]
    CHECK(bucketed.batches == 4);
    CHECK(bucketed.padded == 8 + 7 + 10 + 4);
    const std::vector<SimBatch> random = makeBatches(Batching::PaddedRandom, lengths, 10, 1);
    CHECK(summarise(Batching::PaddedRandom, random).real == 26);
    CHECK(makeBatches(Batching::PaddedRandom, lengths, 10, 1).size() == random.size()); // seeded
    // Longer than the budget: cut to it and counted.
    const auto rows = compareBatchings({}, {12, 3}, 10, std::nullopt);
    REQUIRE(rows.size() == 4);
    CHECK(rows[0].truncated == 1);
    CHECK(rows[0].real == 13);
    CHECK(std::isnan(rows[0].tokens_per_s)); // no cost model: no time
}

TEST_CASE("the cost model is fitted on the steady steps: per batch and per token", "[batching]") {
    // Three steady steps of one batch each: 5 ms optimizer + 2 ms a batch + 1 us a padded token.
    Metrics m;
    const double padded[] = {1000, 2000, 4000, 3000};
    for (int i = 0; i < 4; ++i) {
        StepMetrics s;
        s.optimizer_gpu_ns = 5'000'000;
        s.time_ns = int64_t((5 + 2 + padded[i] * 1e-3) * 1e6);
        s.padded_tokens = padded[i];
        s.batches.push_back(parseBatchAnnotation("sightline.batch real_tokens=900 padded_tokens=" + std::to_string(int(padded[i]))));
        m.steps.push_back(s);
    }
    m.steady = {1, 2, 3};
    std::optional<CostModel> c = fitCostModel(m);
    REQUIRE(c);
    CHECK(c->per_batch_fitted);
    CHECK(c->per_batch_ms == Approx(2));
    CHECK(c->per_token_ms == Approx(1e-3));
    CHECK(c->per_step_ms == Approx(5));
    CHECK(c->steps == 3);
    CHECK(c->seconds(2, 3000) == Approx((2 * 2 + 3 + 2 * 5) / 1e3));
    // Batches of one size: a batch's own cost cannot be told apart; every cost goes per token.
    for (StepMetrics& s : m.steps) {
        s.padded_tokens = 2000;
        s.time_ns = 9'000'000;
    }
    c = fitCostModel(m);
    REQUIRE(c);
    CHECK_FALSE(c->per_batch_fitted);
    CHECK(c->per_batch_ms == 0);
    CHECK(c->per_token_ms == Approx(4.0 / 2000));
    m.steady.clear();
    CHECK_FALSE(fitCostModel(m));
}

TEST_CASE("the packed-rows prediction on recorded batches", "[batching][metrics]") {
    // Each step one padded batch of 2 rows x 500 (900 real tokens). Every batch has the same size,
    // so the cost model is a cost per padded token (and the optimizer step's).
    const std::string batch = "sightline.batch real_tokens=900 padded_tokens=1000 lengths=500,400 auto=1 id=";
    const Metrics m = metricsOf(withBatches({batch + "1", "", batch + "2", "", batch + "3", ""}));
    CHECK(m.values.at("padding.budget") == 1000);
    const double step = m.values.at("step.time_ms"), opt = m.values.at("optimizer.gpu_ms");
    // Packed rows of at most 1,000 tokens in order: [500,400] [500,400] [500,400]: 3 rows of 900.
    const double per_token = (step - opt) / 1000;
    const double recorded = 3 * 1000 * per_token + 3 * opt, packed_time = 3 * 900 * per_token + 3 * opt;
    CHECK(m.values.at("padding.packed_saving_ms") == Approx(step * (1 - packed_time / recorded)));
    CHECK(m.values.at("padding.packed_tokens_per_s") == Approx(m.values.at("tokens.per_s") * recorded / packed_time));
}

TEST_CASE("a chunk loop is priced per step of it, so packing into longer rows costs", "[batching]") {
    // The Gated DeltaNet torch fallback's fingerprint in the steady tables; each step one padded
    // batch of two sequences, 1,000 kernels plus 1,500 a loop step (a step per 64 positions of the
    // longest row), 0.02 ms a kernel (launch-bound).
    Metrics m;
    m.steady_tables.ops = {OpRow{"aten::bmm", CpuKind::Op, 3000}, OpRow{"aten::linalg_solve_triangular", CpuKind::Op, 72}};
    const double padded[] = {1280, 2560, 3840};
    for (const double p : padded) {
        StepMetrics s;
        s.padded_tokens = p;
        s.kernels = uint64_t(1000 + 1500 * (p / 2 / 64));
        s.time_ns = int64_t(0.02 * double(s.kernels) * 1e6);
        s.real_tokens = 0.75 * p;
        s.batches.push_back(parseBatchAnnotation("sightline.batch real_tokens=" + std::to_string(int(0.75 * p)) +
                                                 " padded_tokens=" + std::to_string(int(p)) + " sequences=2"));
        m.steps.push_back(s);
    }
    m.steady = {0, 1, 2};
    REQUIRE(chunkLoop(m));
    std::optional<CostModel> c = fitCostModel(m);
    REQUIRE(c);
    CHECK(c->chunk_loop);
    CHECK(c->per_chunk_ms == Approx(0.02 * 1500));
    CHECK(c->per_token_ms == Approx(0.02 * 1000 * 3 / (1280 + 2560 + 3840)));
    // A padded rectangle's loop follows its rows; a packed row is one long row.
    const SimBatch rect{{600, 640}, 1280, false}, row{{600, 640}, 1240, true};
    CHECK(rect.chunkSteps() == 10);
    CHECK(row.chunkSteps() == 20);
    CHECK(c->seconds(summarise(Batching::Packed, {row})) > c->seconds(summarise(Batching::Recorded, {rect})));
    // The padding-waste figures: the recorded sequences (widths 640, 1280, 1920 and the rest of
    // each batch's real tokens) in packed rows of 3,840 take 90 loop steps where the batches took
    // 60, so packing saves nothing; without the loop they would save the padding, 25% a real token.
    const TokenSummary t = summarizeTokens(m);
    CHECK(t.chunk_cost_ms == Approx(30));
    CHECK(t.packed_saving_ms == 0);
    CHECK(t.packed_tokens_per_s < t.per_s);
    CHECK(t.packed_after_loop_pct == Approx(25));
    // Without the fingerprint (flash-linear-attention's kernels there): per batch and per token.
    m.steady_tables.kernel_classes = {GpuRow{"Triton (fla) chunk_gated_delta_rule_fwd"}};
    CHECK_FALSE(chunkLoop(m));
    c = fitCostModel(m);
    REQUIRE(c);
    CHECK_FALSE(c->chunk_loop);
    CHECK(c->per_chunk_ms == 0);
}
