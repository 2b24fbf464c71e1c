#pragma once
// The batching simulator behind `sightline padding` and the padding-waste rule's saving: the same
// sequences batched in other ways at a token budget, each batching's padding efficiency, and its
// time and tokens/s priced with the cost per token and per batch measured on a trace
// (docs/padding.md).
#include "sightline/metrics.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sightline {

enum class Batching {
    Recorded,      // the batches as the job made them (a trace's annotations)
    PaddedInOrder, // padded rectangles, sequences in the given order, greedy under the budget
    PaddedRandom,  // the same after shuffling (seeded)
    Bucketed,      // padded, sequences sorted by length within windows (a length-grouped sampler)
    Packed,        // rows of sequences end to end, greedy in order, at most the budget each
};
const char* toString(Batching b);

// A sequential loop over chunks of a row's positions, as the Gated DeltaNet torch fallback runs
// over 64-token chunks: its steps follow a batch's longest row, not its tokens, so packing a
// batch into one long row lengthens it (docs/padding.md, "Chunk loops").
inline constexpr int64_t kLoopChunk = 64;

// One batch: its sequences' lengths and its padded size (rows x longest, or the row length).
struct SimBatch {
    std::vector<int64_t> lengths;
    int64_t padded = 0;
    bool packed = false; // one row of sequences end to end, else a rectangle of a row per sequence
    int64_t real() const;
    int64_t chunkSteps() const; // chunks of kLoopChunk positions in its longest row
};

struct BatchingResult {
    Batching batching = Batching::Recorded;
    size_t batches = 0, sequences = 0, truncated = 0; // truncated: sequences cut to the budget
    int64_t real = 0, padded = 0, chunk_steps = 0;
    double efficiency() const { return padded > 0 ? double(real) / double(padded) : NAN; }
    double seconds = NAN;      // predicted, with a cost model
    double tokens_per_s = NAN; // real tokens over that time
};

// Batches `lengths` (in order) under `budget` tokens a batch. Sequences longer than the budget
// are truncated to it (as the reference trainer does) and counted.
std::vector<SimBatch> makeBatches(Batching how, const std::vector<int64_t>& lengths, int64_t budget, uint64_t seed = 0);
BatchingResult summarise(Batching how, const std::vector<SimBatch>& batches, size_t truncated = 0);

// Step time = optimizer + per batch + per padded token: fitted over a trace's steady steps. Where
// the steps run a chunk loop (chunkLoop below), per chunk step in place of per batch.
struct CostModel {
    double per_token_ms = NAN;
    double per_batch_ms = 0;
    double per_chunk_ms = 0; // a chunk loop's cost per step of it (chunk_loop)
    bool chunk_loop = false;
    double per_step_ms = 0;        // the optimizer step (its GPU time)
    double batches_per_step = 1;   // micro-batches a step (gradient accumulation)
    size_t steps = 0;              // steps it was fitted on
    bool per_batch_fitted = false; // false: the padded tokens varied too little to separate a batch's (or chunk step's) cost
    double seconds(size_t batches, int64_t padded, int64_t chunk_steps = 0) const;
    double seconds(const BatchingResult& r) const { return seconds(r.batches, r.padded, r.chunk_steps); }
};
// Whether the steady steps run a chunk loop: the Gated DeltaNet torch fallback's fingerprint
// (triangular solves and at least 100 aten::bmm calls a step, no flash-linear-attention kernels),
// as the gdn-torch-fallback rule reads it.
bool chunkLoop(const Metrics& metrics);
// From the steady steps whose batches are all known; nullopt when there are none.
std::optional<CostModel> fitCostModel(const Metrics& metrics);

// The batches a trace recorded, in order, from its steps (complete ones only). `approximate` is
// set when some annotation gave counts but no lengths.
std::vector<SimBatch> recordedBatches(const Metrics& metrics, bool* approximate = nullptr);

// Every batching of the recorded (or given) sequences at `budget`, priced with `cost` when given.
// The first row is the recorded batching when `recorded` is not empty.
std::vector<BatchingResult> compareBatchings(const std::vector<SimBatch>& recorded, const std::vector<int64_t>& lengths,
                                             int64_t budget, const std::optional<CostModel>& cost, uint64_t seed = 0);

// The largest padded size among the batches (the budget a trace's job ran at, as near as it shows).
int64_t largestBatch(const std::vector<SimBatch>& batches);

} // namespace sightline
