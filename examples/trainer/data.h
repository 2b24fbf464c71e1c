#pragma once
// Training data: pre-tokenized chat examples from JSONL or a synthetic generator, and batching
// under a token budget: padded rectangles, or packed rows with their sequence boundaries.
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace sightline::trainer {

struct Example {
    std::vector<int32_t> input_ids;
    std::vector<int32_t> labels; // -100 where no loss is taken
};

// JSONL, one example a line: {"input_ids": [...]} with "labels" (-100 = ignored) or "loss_mask"
// (0/1); without either every token is trained on. Throws std::runtime_error naming file and line.
std::vector<Example> loadJsonl(const std::filesystem::path& path);
// Writes examples in the form loadJsonl reads ({"input_ids": [...], "labels": [...]} a line).
void writeJsonl(const std::filesystem::path& path, const std::vector<Example>& examples);

// Chat-like examples: lengths log-normal (median `median_len`, shape `sigma`), clipped to
// [min_len, max_len]; the first ~20% of each example (the prompt) carries no loss. Deterministic
// for a seed. The defaults are the benchmark data of shared/configs (median 1,100, sigma 0.6,
// clipped to [64, 8192], seed 0).
struct SyntheticSpec {
    size_t examples = 1000;
    int64_t vocab_size = 32000;
    double median_len = 1100;
    double sigma = 0.6;
    int64_t min_len = 64;
    int64_t max_len = 8192;
    uint64_t seed = 0;
};
std::vector<Example> syntheticExamples(const SyntheticSpec& spec);

// A padded rectangular batch: rows of the longest example's length, pad tokens with label -100.
struct PaddedBatch {
    int64_t rows = 0, columns = 0;
    std::vector<int32_t> input_ids;          // rows x columns
    std::vector<int32_t> labels;             // rows x columns
    std::vector<uint8_t> attention_mask;     // rows x columns
    std::vector<size_t> example_index;       // the example in each row
    std::vector<int64_t> rowLengths() const; // real tokens in each row
    int64_t realTokens() const;
    int64_t paddedTokens() const { return rows * columns; }
    // The batch's segments over its flattened rows x columns tokens, as cumulative offsets: each
    // row's example, then that row's padding when it has any.
    std::vector<int32_t> segmentOffsets() const;
};

// A packed micro-batch: examples concatenated into one row, each keeping its own positions, and
// the row optionally padded at its end to a fixed length.
struct PackedBatch {
    int64_t columns = 0;               // tokens in the row, its padding tail included
    std::vector<int32_t> input_ids;    // columns
    std::vector<int32_t> labels;       // columns; -100 at every example's first token (no prediction
                                       // across a boundary) and on the padding tail
    std::vector<int32_t> position_ids; // columns; 0 at every example's first token (and the tail's)
    std::vector<int32_t> cu_seqlens;   // segment offsets: each example, then the padding tail if any
    std::vector<size_t> example_index; // the examples, in row order
    int64_t real_tokens = 0;           // the examples' tokens (the row less its padding tail)
    int64_t realTokens() const { return real_tokens; }
    int64_t paddedTokens() const { return columns; }
    int64_t sequences() const { return int64_t(example_index.size()); }
    std::vector<int64_t> exampleLengths() const;
};

// Greedy, in order: examples join a batch while rows x longest length stays within `budget`
// tokens; an example longer than the budget is truncated to it (and counted).
struct BatchingStats {
    size_t truncated = 0;
};
std::vector<PaddedBatch> padBatches(const std::vector<Example>& examples, int64_t budget, int32_t pad_id,
                                    BatchingStats* stats = nullptr);

// Greedy, in order: examples join a row while its tokens stay within `budget`; an example longer
// than the budget is truncated to it (and counted). With `fixed_length` every row is padded at its
// end to exactly `budget` tokens (the same shapes every step).
std::vector<PackedBatch> packBatches(const std::vector<Example>& examples, int64_t budget, int32_t pad_id, bool fixed_length,
                                     BatchingStats* stats = nullptr);

// The segment of each token, from cumulative segment offsets.
std::vector<int32_t> segmentIndex(const std::vector<int32_t>& cu_seqlens);

} // namespace sightline::trainer
