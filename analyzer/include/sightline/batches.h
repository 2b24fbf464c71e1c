#pragma once
// The batches a job declares with `sightline.batch` annotations (docs/metrics.md, "Token
// annotations"): written by hand in a training loop, by the reference trainer, or by the Python
// adapter that `sightline run` injects (docs/adapter.md). One reader for all of them.
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

namespace sightline {

// What the job runs on, as the batch annotations say (bit flags).
enum StackFlag : uint32_t {
    kStackTransformers = 1,     // transformers=1: the model is a transformers PreTrainedModel
    kStackHfTrainer = 2,        // hf_trainer=1: driven by transformers' Trainer
    kStackTrl = 4,              // trl=1: by one of TRL's trainers
    kStackReferenceTrainer = 8, // reference_trainer=1: Sightline's own trainer (examples/trainer)
};

struct BatchRecord {
    double real = NAN, padded = NAN, sequences = NAN, ignored = NAN; // NaN: not given
    bool packed = false;                                             // several sequences share a row
    bool boundaries = false;                                         // their boundaries reach attention (position_ids restarts, cu_seqlens)
    bool cu_seqlens = false;                                         // ... passed as cu_seqlens, which varlen and linear-attention kernels need
    bool seq_idx = false;                                            // a per-token sequence index (the causal conv's boundaries) was passed
    std::vector<int64_t> lengths;                                    // each sequence's tokens, when given (lengths=3,5,2)
    int64_t id = -1;                                                 // the adapter's batch number: the parts of one batch share it
    bool automatic = false;                                          // written by the Python adapter (auto=1)
    bool more = false;                                               // the rest of this batch comes in a later part (late=1)
    bool continuation = false;                                       // this part is that rest (cont=1)
    uint32_t stack = 0;                                              // StackFlag bits

    bool complete() const { return !more && !std::isnan(real) && !std::isnan(padded); }
    // Adds a later part of the same batch (its fields fill or add to this one's).
    void merge(const BatchRecord& part);
};

// "sightline.batch real_tokens=3000 padded_tokens=4096 sequences=3 packed=1 cu_seqlens=1 ..."
// Unknown keys and values that are not numbers are skipped.
BatchRecord parseBatchAnnotation(std::string_view text);

// Sequence lengths for simulating a batch: its own, or, when the annotation gave none, an
// approximation from its counts (packed: equal lengths; padded: one sequence of the row length
// and the others sharing the rest). Empty when the batch has no token counts.
std::vector<int64_t> lengthsOrApproximation(const BatchRecord& b, bool* approximate = nullptr);

} // namespace sightline
