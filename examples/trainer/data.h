#pragma once
// Training data: pre-tokenized chat examples from JSONL or a synthetic generator, and batching
// under a token budget (padded rectangles now; packed rows with sequence boundaries next).
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
    std::vector<int32_t> input_ids;      // rows x columns
    std::vector<int32_t> labels;         // rows x columns
    std::vector<uint8_t> attention_mask; // rows x columns
    std::vector<size_t> example_index;   // the example in each row
    std::vector<int64_t> rowLengths() const; // real tokens in each row
    int64_t realTokens() const;
    int64_t paddedTokens() const { return rows * columns; }
};

// Greedy, in order: examples join a batch while rows x longest length stays within `budget`
// tokens; an example longer than the budget is truncated to it (and counted).
struct BatchingStats {
    size_t truncated = 0;
};
std::vector<PaddedBatch> padBatches(const std::vector<Example>& examples, int64_t budget, int32_t pad_id,
                                    BatchingStats* stats = nullptr);

} // namespace sightline::trainer
