// The batching simulator (docs/padding.md).
#include "sightline/padding_sim.h"

#include "sightline/steady_sums.h"

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

int64_t SimBatch::chunkSteps() const {
    const int64_t row = packed ? padded : padded / std::max<int64_t>(1, int64_t(lengths.size()));
    return (row + kLoopChunk - 1) / kLoopChunk;
}

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
            open.packed = packed;
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
        open.packed = packed;
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

SimBatch simBatch(const BatchRecord& b, bool* approximate) {
    SimBatch s{lengthsOrApproximation(b, approximate), std::isnan(b.padded) ? 0 : int64_t(b.padded)};
    s.packed = b.packed;
    return s;
}

// Per steady step with known batches: y = step time - optimizer, against k (its batches, or its
// chunk loop's steps) and p (its padded tokens).
struct FitRow {
    double k, p, y, kernels;
};

// y = a k + b p by least squares, where p / k varies by 5% or more (else the two cannot be told
// apart); a >= 0 and b > 0, or nothing.
std::optional<std::pair<double, double>> fitTwo(const std::vector<FitRow>& rows) {
    double skk = 0, skp = 0, spp = 0, sky = 0, spy = 0, sp = 0, sk = 0;
    for (const FitRow& r : rows) {
        skk += r.k * r.k, skp += r.k * r.p, spp += r.p * r.p, sky += r.k * r.y, spy += r.p * r.y;
        sp += r.p, sk += r.k;
    }
    const double n = double(rows.size()), mean_pk = sp / sk;
    double var = 0;
    for (const FitRow& r : rows) var += (r.p / r.k - mean_pk) * (r.p / r.k - mean_pk);
    const double det = skk * spp - skp * skp;
    if (n < 3 || std::sqrt(var / n) < 0.05 * mean_pk || det <= 1e-9 * skk * spp) return std::nullopt;
    const double a = (spp * sky - skp * spy) / det, b = (skk * spy - skp * sky) / det;
    if (a < 0 || b <= 0) return std::nullopt;
    return std::pair{a, b};
}

// A chunk loop's cost per step of it and the rest per padded token, from the steps' kernel counts
// (exact, where their times are noisy): kernels = fixed + per chunk step x chunk steps by least
// squares; the loop takes the share of each step's time that its kernels take of the step's (its
// launches are its cost where the host sets the pace, its many small kernels where the device does).
bool splitByKernels(const std::vector<FitRow>& rows, CostModel& c) {
    const double n = double(rows.size());
    double sc = 0, sk = 0;
    for (const FitRow& r : rows) sc += r.k, sk += r.kernels;
    double scc = 0, sck = 0;
    for (const FitRow& r : rows) scc += (r.k - sc / n) * (r.k - sc / n), sck += (r.k - sc / n) * (r.kernels - sk / n);
    if (rows.size() < 2 || scc <= 0 || sck <= 0) return false;
    const double per_step = sck / scc;
    double loop_ms = 0, rest_ms = 0, tokens = 0;
    for (const FitRow& r : rows) {
        const double share = r.kernels > 0 ? std::min(1.0, per_step * r.k / r.kernels) : 0.0;
        loop_ms += share * r.y;
        rest_ms += (1 - share) * r.y;
        tokens += r.p;
    }
    if (rest_ms <= 0 || tokens <= 0) return false;
    c.per_chunk_ms = loop_ms / sc;
    c.per_token_ms = rest_ms / tokens;
    c.per_batch_fitted = true;
    return true;
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
        r.chunk_steps += b.chunkSteps();
    }
    return r;
}

double CostModel::seconds(size_t batches, int64_t padded, int64_t chunk_steps) const {
    const double steps = double(batches) / std::max(1.0, batches_per_step);
    return (double(batches) * per_batch_ms + double(chunk_steps) * per_chunk_ms + double(padded) * per_token_ms + steps * per_step_ms) / 1e3;
}

bool chunkLoop(const Metrics& metrics) {
    const auto calls = [](const OpRow& r) { return double(r.calls); };
    const auto rows = [](const GpuRow&) { return 1.0; };
    return steadyClassSum(metrics, false, "Triton (fla)*", rows) == 0 &&
        steadyOpSum(metrics, "aten::linalg_solve_triangular", calls) > 0 && steadyOpSum(metrics, "aten::bmm", calls) >= 100;
}

std::optional<CostModel> fitCostModel(const Metrics& metrics) {
    CostModel c;
    c.chunk_loop = chunkLoop(metrics);
    std::vector<FitRow> rows;
    double optimizer = 0, batches = 0;
    for (size_t i : metrics.steady) {
        const StepMetrics& m = metrics.steps[i];
        if (m.batches.empty() || m.incomplete_batches || std::isnan(m.padded_tokens)) continue;
        const double opt_ms = double(m.optimizer_gpu_ns) / 1e6;
        double k = double(m.batches.size()); // or, with a chunk loop, its steps
        if (c.chunk_loop) {
            k = 0;
            for (const BatchRecord& b : m.batches) k += double(simBatch(b, nullptr).chunkSteps());
        }
        rows.push_back({k, m.padded_tokens, double(m.time_ns) / 1e6 - opt_ms, double(m.kernels)});
        optimizer += opt_ms;
        batches += double(m.batches.size());
    }
    if (rows.empty()) return std::nullopt;
    c.steps = rows.size();
    c.per_step_ms = optimizer / double(rows.size());
    c.batches_per_step = batches / double(rows.size());
    if (c.chunk_loop && splitByKernels(rows, c)) return c;
    if (const auto fit = fitTwo(rows)) {
        (c.chunk_loop ? c.per_chunk_ms : c.per_batch_ms) = fit->first;
        c.per_token_ms = fit->second;
        c.per_batch_fitted = true;
        return c;
    }
    double sy = 0, sp = 0;
    for (const FitRow& r : rows) sy += r.y, sp += r.p;
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
            SimBatch s = simBatch(b, &approx);
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
            r.seconds = cost->seconds(r);
            r.tokens_per_s = r.seconds > 0 ? double(r.real) / r.seconds : NAN;
        }
    return out;
}

} // namespace sightline
