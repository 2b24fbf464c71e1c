#pragma once
// The gated delta rule of the Gated DeltaNet layers (docs/trainer.md): per head a [dk, dv] state
// S_t = exp(g_t) S_{t-1} (I - beta_t k_t k_t^T) + beta_t k_t v_t^T read as o_t = S_t^T q_t, with
// q and k L2-normalised and q scaled by dk^-1/2, computed over chunks of 64 tokens in the WY form.
// Two libtorch formulations: the naive one (a loop over chunks, as transformers' torch fallback)
// and the chunk-parallel one of the fused path (every chunk's intra-chunk work at once, only the
// state pass sequential, over varlen segments).
#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace sightline::trainer {

// The naive rule over chunks of `chunk` tokens (q, k: [B, T, H, dk], already expanded to the value
// heads; v: [B, T, H, dv]; g (log decay <= 0), beta: [B, T, H]). Returns [B, T, H, dv] in the
// input's dtype; computed in fp32. Each row is one sequence.
torch::Tensor chunkGatedDeltaRule(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor g, torch::Tensor beta,
                                  int64_t chunk = 64);

// How a batch's segments are cut into chunks for the chunk-parallel rule. No chunk crosses a
// segment boundary. Chunks are ordered by their place in their segment (every segment's first
// chunk, then every second chunk, ...), and within that by segment, longest first; so step j of
// the state pass reads the contiguous chunks [step_offset[j], + step_count[j]) and the states of
// the first step_count[j] segments (in that order).
struct ChunkPlan {
    int64_t chunk = 64, tokens = 0, chunks = 0, segments = 0;
    std::vector<int64_t> step_offset, step_count;
    torch::Tensor gather;  // int64 [chunks * chunk]: each chunk slot's token, or `tokens` (a zero row) past its segment's end
    torch::Tensor scatter; // int64 [tokens]: each token's chunk slot
    // For the rule's CUDA kernels: int32 [segments + 1] token offsets and chunk offsets of the
    // segments (segment s has chunks [chunk_offsets[s], chunk_offsets[s + 1]), numbered segment by segment).
    torch::Tensor cu_seqlens, chunk_offsets;
};
// A plan kept in an autograd context for the backward: its sizes and steps in saved_data, its
// gather and scatter tensors among the saved variables (passed back to loadPlan).
void savePlan(torch::autograd::AutogradContext* ctx, const ChunkPlan& plan);
ChunkPlan loadPlan(torch::autograd::AutogradContext* ctx, const torch::Tensor& gather, const torch::Tensor& scatter);
// From the segments' cumulative offsets over the flattened tokens (host).
ChunkPlan planChunks(const std::vector<int32_t>& cu_seqlens, int64_t chunk, const torch::Device& device);

// The chunk-parallel rule over the flattened tokens of a batch: q, k [T, Hk, dk], v [T, Hv, dv],
// g and beta [T, Hv], value heads a multiple of key heads (value head h reads key head
// h / (Hv / Hk)). Returns [T, Hv, dv] in v's dtype; fp32 inside; the state restarts at every segment.
torch::Tensor chunkParallelGatedDeltaRule(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                          const torch::Tensor& g, const torch::Tensor& beta, const ChunkPlan& plan);
// The same with its intermediates recomputed in the backward instead of kept (they are fp32 and
// several times the inputs' size): less memory for about one more forward of the rule.
torch::Tensor recomputedGatedDeltaRule(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& g,
                                       const torch::Tensor& beta, const ChunkPlan& plan);

// The same with its backward written out (gdn_explicit.cpp): the intra-chunk terms recomputed,
// the state pass run forward then backward without autograd, every other gradient for all chunks
// at once. Fewer, larger operations than autograd's; the arithmetic of the rule's CUDA kernel.
torch::Tensor explicitGatedDeltaRule(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& g,
                                     const torch::Tensor& beta, const ChunkPlan& plan);

// Which delta rule the fused path runs (the model's option TextModelImpl::gdn_rule, the
// trainer's --gdn): the trainer's CUDA kernels (fused::gatedDeltaRule; on the CPU the same
// kernels emulated, slowly) or the chunk-parallel libtorch rule above (recomputedGatedDeltaRule),
// the reference. The default is the kernels.
enum class GdnRule { Kernels,
                     Libtorch };
const char* toString(GdnRule rule);

} // namespace sightline::trainer
