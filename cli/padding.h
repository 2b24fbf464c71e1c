#pragma once
// `sightline padding`: the batching simulator on a trace's recorded batches, a JSONL dataset or a
// file of lengths (docs/padding.md).
#include <cstdint>
#include <string>

namespace sightline {

struct PaddingOptions {
    std::string input;  // trace, .jsonl dataset, or a file of lengths
    std::string costs;  // a trace whose measured costs price a dataset's batchings
    int64_t budget = 0; // tokens a batch; 0: the largest recorded batch
    uint64_t seed = 0;  // for the random order
    std::string format = "text";
};

// The comparison as text or JSON.
std::string paddingReport(const PaddingOptions& options);

} // namespace sightline
