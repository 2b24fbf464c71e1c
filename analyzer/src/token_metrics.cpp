// Tokens and padding per step from batch annotations, and the packed-rows prediction.
#include "token_metrics.h"

#include "sightline/padding_sim.h"

#include <algorithm>
#include <map>

namespace sightline {

namespace {

void addTo(double& sum, double v) {
    if (!std::isnan(v)) sum = (std::isnan(sum) ? 0.0 : sum) + v;
}

void count(StepMetrics& m, BatchRecord b) {
    addTo(m.real_tokens, b.real);
    addTo(m.padded_tokens, b.padded);
    addTo(m.sequences, b.sequences);
    addTo(m.ignored_tokens, b.ignored);
    m.packed |= b.packed;
    m.boundaries |= b.boundaries;
    m.cu_seqlens |= b.cu_seqlens;
    m.seq_idx |= b.seq_idx;
    m.batches.push_back(std::move(b));
}

} // namespace

void assignBatches(const std::vector<BatchMark>& marks, std::vector<StepMetrics>& steps) {
    const bool hand_written = std::any_of(marks.begin(), marks.end(), [](const BatchMark& m) { return !m.record.automatic; });
    std::map<std::pair<int64_t, int64_t>, std::vector<const BatchMark*>> parts; // adapter batches by process and id
    for (const BatchMark& m : marks) {
        if (m.record.automatic && hand_written) continue;
        if (m.record.id >= 0) {
            parts[{m.pid, m.record.id}].push_back(&m);
        } else if (m.step >= 0) {
            count(steps[size_t(m.step)], m.record);
        }
    }
    for (const auto& [key, list] : parts) {
        // The first part (not a continuation) places the batch; a continuation alone (its first
        // part fell before the recording began) cannot be placed and is left out.
        auto first = std::find_if(list.begin(), list.end(), [](const BatchMark* m) { return !m->record.continuation; });
        if (first == list.end() || (*first)->step < 0) continue;
        BatchRecord b = (*first)->record;
        for (const BatchMark* m : list)
            if (m != *first) b.merge(m->record);
        StepMetrics& s = steps[size_t((*first)->step)];
        if (b.more) ++s.incomplete_batches;
        else count(s, std::move(b));
    }
}

TokenSummary summarizeTokens(const Metrics& out) {
    TokenSummary t;
    std::vector<size_t> known; // steady steps with batches, all of them complete
    for (size_t i : out.steady)
        if (!out.steps[i].batches.empty() && out.steps[i].incomplete_batches == 0) known.push_back(i);
    auto mean = [&](auto field) {
        if (known.empty()) return double(NAN);
        double sum = 0;
        for (size_t i : known) sum += field(out.steps[i]); // NaN anywhere: unknown
        return sum / double(known.size());
    };
    double time_ms = 0;
    uint32_t stack = 0;
    for (size_t i : known) {
        time_ms += double(out.steps[i].time_ns) / 1e6;
        for (const BatchRecord& b : out.steps[i].batches) stack |= b.stack;
    }
    time_ms = known.empty() ? NAN : time_ms / double(known.size());
    t.known = !known.empty();
    t.stack = stack;
    t.real = mean([](const StepMetrics& m) { return m.real_tokens; });
    t.padded = mean([](const StepMetrics& m) { return m.padded_tokens; });
    t.ignored = mean([](const StepMetrics& m) { return m.ignored_tokens; });
    t.per_s = t.real / (time_ms / 1e3);
    t.sequences = mean([](const StepMetrics& m) { return m.sequences; });
    t.packed = mean([](const StepMetrics& m) { return m.packed ? 1.0 : 0.0; });
    t.boundaries = mean([](const StepMetrics& m) { return m.boundaries ? 1.0 : 0.0; });
    t.cu_seqlens = mean([](const StepMetrics& m) { return m.cu_seqlens ? 1.0 : 0.0; });
    t.seq_idx = mean([](const StepMetrics& m) { return m.seq_idx ? 1.0 : 0.0; });

    // The recorded sequences in packed rows at the budget the job ran at, priced with the step's
    // measured cost per token and per batch: the time per real token against the recorded batching's.
    const std::vector<SimBatch> recorded = recordedBatches(out);
    const std::optional<CostModel> cost = fitCostModel(out);
    const int64_t budget = largestBatch(recorded);
    if (!cost || budget <= 0 || std::isnan(t.per_s)) return t;
    std::vector<int64_t> lengths;
    for (const SimBatch& b : recorded) lengths.insert(lengths.end(), b.lengths.begin(), b.lengths.end());
    const BatchingResult now = summarise(Batching::Recorded, recorded);
    const BatchingResult packed = summarise(Batching::Packed, makeBatches(Batching::Packed, lengths, budget));
    const double ratio = (cost->seconds(packed) / double(packed.real)) / (cost->seconds(now) / double(now.real));
    t.budget = double(budget);
    t.token_cost_us = cost->per_token_ms * 1e3;
    t.batch_cost_ms = cost->per_batch_ms;
    if (cost->chunk_loop) {
        t.chunk_cost_ms = cost->per_chunk_ms;
        CostModel unlooped = *cost;
        unlooped.per_chunk_ms = 0;
        t.packed_after_loop_pct = 100 * (1 - (unlooped.seconds(packed) / double(packed.real)) / (unlooped.seconds(now) / double(now.real)));
    }
    t.packed_tokens_per_s = t.per_s / ratio;
    t.packed_saving_ms = std::max(0.0, time_ms * (1 - ratio));
    return t;
}

} // namespace sightline
