#pragma once
// A micro-batch as the model reads it, on the device: tokens, positions, labels and the segments
// (examples, and runs of padding) of the flattened batch, made on the host from a padded or packed
// batch and copied without waiting for the device.
#include "data.h"

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sightline::trainer {

enum class KernelPath { Naive,
                        Fused };
enum class Batching { Padded,
                      Packed };

const char* toString(KernelPath k);
const char* toString(Batching b);

// Fixes the naive path takes one at a time (the trainer's --fix), so that each finding's cure is
// measured alone against the advisor's prediction for it; the fused path has them all.
struct Fixes {
    bool gdn = false;         // the delta rule's and the causal conv's kernels (gdn-torch-fallback, causal-conv1d-missing)
    bool elementwise = false; // fused RMSNorms, SwiGLU and loss (elementwise-storm)
    bool optimizer = false;   // the fused multi-tensor AdamW (non-fused-optimizer)
    bool attention = false;   // attention without cuDNN's backend, which sets up every new shape (shape-replan)
    bool any() const { return kernels() || attention; }
    bool kernels() const { return gdn || elementwise || optimizer; } // fixes that take the trainer's kernels
};
// The fixes' process-wide settings while it lives: --fix attention has SDPA take the
// memory-efficient (or flash) kernels, which need no per-shape plan, instead of cuDNN's.
class FixScope {
public:
    explicit FixScope(const Fixes& f);
    ~FixScope();
    FixScope(const FixScope&) = delete;
    FixScope& operator=(const FixScope&) = delete;

private:
    bool m_cudnn_sdp;
};
// "gdn,elementwise,optimizer,attention" or a part of it (empty: none); throws on a name it does not know.
Fixes parseFixes(const std::string& list);
std::string toString(const Fixes& f);

struct ModelInput {
    torch::Tensor input_ids;       // [B, T] int64
    torch::Tensor position_ids;    // [B, T] int64
    torch::Tensor labels;          // [B, T] int64, -100 where no loss is taken
    torch::Tensor attention_mask;  // [B, T] int64, 1 real / 0 padding, on padded batches; undefined on packed rows
    std::vector<int32_t> segments; // host: cumulative offsets of the segments over the B x T tokens
    torch::Tensor cu_seqlens;      // int32 [S + 1], the same offsets on the device
    torch::Tensor seq_idx;         // int32 [B x T]: each token's segment
    int64_t max_segment = 0;       // the longest segment's tokens
    int64_t loss_tokens = 0;       // positions whose next-token label is kept (host count)
    bool packed = false;           // one row of several examples, kept apart by `segments`
};

ModelInput modelInput(const PaddedBatch& b, const torch::Device& device);
ModelInput modelInput(const PackedBatch& b, const torch::Device& device);
// A right-padded batch given as tensors (the parity tool): positions 0..T-1 on every row.
ModelInput modelInput(const torch::Tensor& input_ids, const torch::Tensor& attention_mask);

// The next-token targets of `labels` ([B, T]): each position's following label, -100 at a row's end.
torch::Tensor shiftedTargets(const torch::Tensor& labels);

} // namespace sightline::trainer
