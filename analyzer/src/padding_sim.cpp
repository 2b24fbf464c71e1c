// The batching simulator (docs/padding.md).
#include "sightline/padding_sim.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace sightline {

const char* toString(Batching b) {
    switch (b) {
    case Batching::Recorded: return "as recorded";
    case Batching::PaddedInOrder: return "padded, in order";
    case Batching::PaddedRandom: return "padded, random order";
    case Batching::Bucketed: return "padded, length-bucketed";
    case Batching::Packed: return "packed rows";
    }
    return "?";
}

int64_t SimBatch::real() const { return std::accumulate(lengths.begin(), lengths.end(), int64_t(0)); }

namespace {

// Greedy in order: a sequence joins the open batch while the batch stays within the budget.
std::vector<SimBatch> greedy(const std::vector<int64_t>& lengths, int64_t budget, bool packed) {
    std::vector<SimBatch> out;
    SimBatch open;
    int64_t longest = 0, sum = 0;
    for (int64_t l : lengths) {
        const int64_t rows = int64_t(open.lengths.size()) + 1;
        const bool fits = packed ? sum + l <= budget : rows * std::max(longest, l) <= budget;
        if (!fits && !open.lengths.empty()) {
            open.padded = packed ? sum : int64_t(open.lengths.size()) * longest;
            out.push_back(std::move(open));
            open = {};
            longest = sum = 0;
        }
        open.lengths.push_back(l);
        longest = std::max(longest, l);
        sum += l;
    }
    if (!open.lengths.empty()) {
        open.padded = packed ? sum : int64_t(open.lengths.size()) * longest;
        out.push_back(std::move(open));
    }
    return out;
}

// A length-grouped sampler's order: sorted longest first within windows of about 50 batches'
// worth of sequences (as transformers' LengthGroupedSampler sorts within mega-batches of 50).
std::vector<int64_t> bucketOrder(std::vector<int64_t> lengths, int64_t budget) {
    if (lengths.empty()) return lengths;
    std::vector<int64_t> sorted = lengths;
    std::nth_element(sorted.begin(), sorted.begin() + ptrdiff_t(sorted.size() / 2), sorted.end());
    const int64_t median = std::max<int64_t>(1, sorted[sorted.size() / 2]);
    const size_t window = size_t(std::max<int64_t>(64, 50 * std::max<int64_t>(1, budget / median)));
    for (size_t at = 0; at < lengths.size(); at += window) {
        const auto end = lengths.begin() + ptrdiff_t(std::min(lengths.size(), at + window));
        std::sort(lengths.begin() + ptrdiff_t(at), end, std::greater<>());
    }
    return lengths;
}

} // namespace

std::vector<SimBatch> makeBatches(Batching how, const std::vector<int64_t>& lengths, int64_t budget, uint64_t seed) {
    std::vector<int64_t> order = lengths;
    for (int64_t& l : order) l = std::min(l, budget);
    switch (how) {
    case Batching::PaddedRandom: {
        std::mt19937_64 rng(seed);
        std::shuffle(order.begin(), order.end(), rng);
        return greedy(order, budget, false);
    }
    case Batching::Bucketed: {
        std::mt19937_64 rng(seed);
        std::shuffle(order.begin(), order.end(), rng);
        return greedy(bucketOrder(std::move(order), budget), budget, false);
    }
    case Batching::Packed: return greedy(order, budget, true);
    case Batching::Recorded:
    case Batching::PaddedInOrder: break;
    }
    return greedy(order, budget, false);
}

BatchingResult summarise(Batching how, const std::vector<SimBatch>& batches, size_t truncated) {
    BatchingResult r;
    r.batching = how;
    r.batches = batches.size();
    r.truncated = truncated;
    for (const SimBatch& b : batches) {
        r.sequences += b.lengths.size();
        r.real += b.real();
        r.padded += b.padded;
    }
    return r;
}

double CostModel::seconds(size_t batches, int64_t padded) const {
    const double steps = double(batches) / std::max(1.0, batches_per_step);
    return (double(batches) * per_batch_ms + double(padded) * per_token_ms + steps * per_step_ms) / 1e3;
}

std::optional<CostModel> fitCostModel(const Metrics& metrics) {
    // Per steady step with known batches: y = step time - optimizer = per_batch x k + per_token x P.
    struct Row {
        double k, p, y;
    };
    std::vector<Row> rows;
    double optimizer = 0;
    for (size_t i : metrics.steady) {
        const StepMetrics& m = metrics.steps[i];
        if (m.batches.empty() || m.incomplete_batches || std::isnan(m.padded_tokens)) continue;
        const double opt_ms = double(m.optimizer_gpu_ns) / 1e6;
        rows.push_back({double(m.batches.size()), m.padded_tokens, double(m.time_ns) / 1e6 - opt_ms});
        optimizer += opt_ms;
    }
    if (rows.empty()) return std::nullopt;
    CostModel c;
    c.steps = rows.size();
    c.per_step_ms = optimizer / double(rows.size());
    double skk = 0, skp = 0, spp = 0, sky = 0, spy = 0, sy = 0, sp = 0, sk = 0;
    for (const Row& r : rows) {
        skk += r.k * r.k, skp += r.k * r.p, spp += r.p * r.p, sky += r.k * r.y, spy += r.p * r.y;
        sy += r.y, sp += r.p, sk += r.k;
    }
    c.batches_per_step = sk / double(rows.size());
    // Tokens per batch must vary (by 5% or more) to tell a batch's fixed cost from its tokens'.
    const double n = double(rows.size()), mean_pk = sp / sk;
    double var = 0;
    for (const Row& r : rows) var += (r.p / r.k - mean_pk) * (r.p / r.k - mean_pk);
    const double det = skk * spp - skp * skp;
    if (n >= 3 && std::sqrt(var / n) >= 0.05 * mean_pk && det > 1e-9 * skk * spp) {
        const double a = (spp * sky - skp * spy) / det, b = (skk * spy - skp * sky) / det;
        if (a >= 0 && b > 0) {
            c.per_batch_ms = a;
            c.per_token_ms = b;
            c.per_batch_fitted = true;
            return c;
        }
    }
    if (sp <= 0 || sy <= 0) return std::nullopt;
    c.per_token_ms = sy / sp; // every cost counted per padded token
    return c;
}

std::vector<SimBatch> recordedBatches(const Metrics& metrics, bool* approximate) {
    if (approximate) *approximate = false;
    std::vector<SimBatch> out;
    for (const StepMetrics& m : metrics.steps)
        for (const BatchRecord& b : m.batches) {
            bool approx = false;
            SimBatch s{lengthsOrApproximation(b, &approx), std::isnan(b.padded) ? 0 : int64_t(b.padded)};
            if (s.lengths.empty() || s.padded <= 0) continue;
            if (approximate) *approximate |= approx;
            out.push_back(std::move(s));
        }
    return out;
}

int64_t largestBatch(const std::vector<SimBatch>& batches) {
    int64_t most = 0;
    for (const SimBatch& b : batches) most = std::max(most, b.padded);
    return most;
}

std::vector<BatchingResult> compareBatchings(const std::vector<SimBatch>& recorded, const std::vector<int64_t>& lengths,
                                             int64_t budget, const std::optional<CostModel>& cost, uint64_t seed) {
    std::vector<BatchingResult> out;
    if (!recorded.empty()) out.push_back(summarise(Batching::Recorded, recorded));
    size_t truncated = 0;
    for (int64_t l : lengths) truncated += l > budget;
    for (Batching how : {Batching::PaddedInOrder, Batching::PaddedRandom, Batching::Bucketed, Batching::Packed})
        out.push_back(summarise(how, makeBatches(how, lengths, budget, seed), truncated));
    if (cost)
        for (BatchingResult& r : out) {
            r.seconds = cost->seconds(r.batches, r.padded);
            r.tokens_per_s = r.seconds > 0 ? double(r.real) / r.seconds : NAN;
        }
    return out;
}

} // namespace sightline
