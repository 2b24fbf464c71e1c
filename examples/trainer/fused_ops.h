#pragma once
// The fused path's operations with their gradients (docs/trainer.md, "Fused path"): the trainer's
// own CUDA kernels (kernels/, loaded as a plugin, called through PyTorch's dispatcher as
// `sightline::NAME` operators) and libtorch's varlen flash attention. Each is an autograd function
// whose backward calls the matching backward kernel; bf16 or fp32 tensors on a CUDA device, or
// on the CPU through the operators' reference implementations (for tests).
#include "gdn.h"

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

namespace sightline::trainer::fused {

// Loads libsightline_trainer_kernels.so from beside the executable (once), the operators' CUDA
// implementations (reference_ops.cpp has their CPU ones). Throws std::runtime_error with one line
// when it cannot be loaded.
void loadKernels();

// Zero-centred (y = x/rms * (1 + w)) or plain (y = x/rms * w) RMSNorm over the last dimension,
// which must have unit stride (any leading layout; a strided 2-D view is read in place).
torch::Tensor rmsNorm(const torch::Tensor& x, const torch::Tensor& w, double eps, bool zero_centred = true);
// The residual stream's add and the zero-centred norm after it: (s = x + r, rmsNorm(s, w)), r of
// x's shape. s's gradient from its other use and the norm's dx are added in the norm's backward.
std::tuple<torch::Tensor, torch::Tensor> addRmsNorm(const torch::Tensor& x, const torch::Tensor& r, const torch::Tensor& w, double eps);
// x/rms * w * silu(z) over rows of x.size(-1).
torch::Tensor gatedRmsNorm(const torch::Tensor& x, const torch::Tensor& z, const torch::Tensor& w, double eps);
torch::Tensor swiglu(const torch::Tensor& gate, const torch::Tensor& up);
// x W_i^T for each weight [out_i, in] (no bias), x [..., in]: projections of one input whose
// backward gathers x's gradient in one tensor by the GEMMs' accumulation, with no elementwise adds
// (shared_input_linear.cpp). Any device.
std::vector<torch::Tensor> sharedInputLinear(const torch::Tensor& x, const std::vector<torch::Tensor>& weights);
// x: [tokens, heads, head_dim]; positions int64 [tokens]; inv_freq float [rot / 2].
torch::Tensor rotary(const torch::Tensor& x, const torch::Tensor& positions, const torch::Tensor& inv_freq);
// silu(causal depthwise conv1d) over x [tokens, channels], w [channels, taps], restarting at each
// change of seq_idx (int32 [tokens]).
torch::Tensor causalConv1dSilu(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& seq_idx);
// The mean cross-entropy of h [tokens, dim] x w^T against target (int64 [tokens], -100 ignored),
// `kept` being the number of targets not ignored; the logits made `chunk` tokens at a time.
// sink (optional, an empty tensor of w's options): becomes the loss's weight gradient, for
// tiedEmbedding's backward to add into.
torch::Tensor linearCrossEntropy(const torch::Tensor& h, const torch::Tensor& w, const torch::Tensor& target, int64_t kept,
                                 int64_t chunk = 2048, const torch::Tensor& sink = torch::Tensor());
// The embedding lookup of w [vocab, hidden] at ids, w tied to the LM head of a linearCrossEntropy
// given the same sink: the backward adds the looked-up rows' gradients into the loss's weight
// gradient in place and returns none of its own (no dense gradient, no add of two).
torch::Tensor tiedEmbedding(const torch::Tensor& ids, const torch::Tensor& w, const torch::Tensor& sink);
// Causal attention within each segment: q [tokens, heads, d], k and v [tokens, kv_heads, d] (GQA),
// cu_seqlens int32 [segments + 1], bf16, through libtorch's varlen flash attention (on the CPU,
// segment by segment through SDPA).
torch::Tensor flashAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& cu_seqlens,
                             int64_t max_len, double scale);

// The gated delta rule through the trainer's kernels (kernels/gdn.cu; on the CPU the same kernel
// bodies emulated): q, k [T, Hk, dk], v [T, Hv, dv], g, beta [T, Hv], over the plan's segments
// (chunks of 64). Returns [T, Hv, dv] in v's dtype; the backward recomputes what the forward does not keep.
torch::Tensor gatedDeltaRule(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& g,
                             const torch::Tensor& beta, const ChunkPlan& plan);
// The delta rule's operators themselves, no autograd (ops.h describes them): forward (o, final
// states, and with keep_states every chunk's entering state, T, V', W, P, the normalised q and k,
// and the decays); backward (dq, dk, dv, dg, dbeta) from those, T, V', W and P, or q, k and the
// decays made again where `inverses`, `values`, `wy` and `scores`, or `keys` and `decays` are empty.
using GdnForward = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;
using GdnBackward = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;
GdnForward gdnForwardOp(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g, const at::Tensor& beta,
                        const at::Tensor& cu_seqlens, const at::Tensor& chunk_offsets, int64_t chunks, bool keep_states);
GdnBackward gdnBackwardOp(const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
                          const at::Tensor& beta, const at::Tensor& cu_seqlens, const at::Tensor& chunk_offsets, const at::Tensor& states,
                          const at::Tensor& inverses, const at::Tensor& values, const at::Tensor& wy, const at::Tensor& scores,
                          const at::Tensor& keys, const at::Tensor& decays, int64_t chunks);
// The forward alone, no gradient: (o, every segment's final state [segments, Hv, dk, dv] fp32).
std::tuple<torch::Tensor, torch::Tensor> gatedDeltaRuleWithState(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                                                 const torch::Tensor& g, const torch::Tensor& beta, const ChunkPlan& plan);

// The gradients' global L2 norm and the clipping factor max((norm + 1e-6) / max_norm, 1) through
// the operator `sightline::grad_norm` (kernels/grad_norm.cu on the GPU, _foreach_norm on the CPU),
// both fp32 0-dim tensors.
std::tuple<at::Tensor, at::Tensor> gradNorm(at::TensorList grads, double max_norm);

// AdamW in place through the operator `sightline::adamw_` (kernels/adamw.cu on the GPU, libtorch's
// _fused_adamw_ on the CPU): steps already counted for this step; grad_scale, when given, divides
// every gradient as it is read.
void adamw(at::TensorList params, at::TensorList grads, at::TensorList exp_avg, at::TensorList exp_avg_sq, at::TensorList steps, double lr,
           double beta1, double beta2, double weight_decay, double eps, const std::optional<at::Tensor>& grad_scale);

} // namespace sightline::trainer::fused
