#pragma once
// The trainer's own CUDA kernels, as host functions on tensors (docs/trainer.md, "Fused path").
// register.cpp makes each one a PyTorch operator `sightline::NAME`, so a profile shows it by name
// and the model library (which links no CUDA) calls it through the dispatcher.
#include <ATen/ATen.h>

#include <optional>
#include <tuple>

namespace sightline::kernels {

// x: [rows, dim] (unit stride along dim, any row stride); returns (y [rows, dim], 1/rms [rows] fp32).
// zero_centred: y = x/rms * (1 + w); else y = x/rms * w.
std::tuple<at::Tensor, at::Tensor> rmsNormForward(const at::Tensor& x, const at::Tensor& w, double eps, bool zero_centred);
// Returns (dx, dw).
std::tuple<at::Tensor, at::Tensor> rmsNormBackward(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& w,
                                                   const at::Tensor& rstd, bool zero_centred);
// The residual add before the norm: s = x + res (res [rows, dim], contiguous); returns (s, the
// norm of s as rmsNormForward's y, 1/rms).
std::tuple<at::Tensor, at::Tensor, at::Tensor> addRmsNormForward(const at::Tensor& x, const at::Tensor& res, const at::Tensor& w,
                                                                 double eps, bool zero_centred);
// Its backward from the norm's dy and s's gradient from its other use (dsum, absent where s has
// none): returns (ds = the norm's dx + dsum, which is x's and res's gradient alike; dw).
std::tuple<at::Tensor, at::Tensor> addRmsNormBackward(const at::Tensor& dy, const std::optional<at::Tensor>& dsum, const at::Tensor& sum,
                                                      const at::Tensor& w, const at::Tensor& rstd, bool zero_centred);
// y = x/rms * w * silu(z), rows of one value head; returns (y, 1/rms).
std::tuple<at::Tensor, at::Tensor> gatedRmsNormForward(const at::Tensor& x, const at::Tensor& z, const at::Tensor& w, double eps);
// Returns (dx, dz, dw).
std::tuple<at::Tensor, at::Tensor, at::Tensor> gatedRmsNormBackward(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& z,
                                                                    const at::Tensor& w, const at::Tensor& rstd);

at::Tensor swigluForward(const at::Tensor& gate, const at::Tensor& up);
// Returns (dgate, dup).
std::tuple<at::Tensor, at::Tensor> swigluBackward(const at::Tensor& dout, const at::Tensor& gate, const at::Tensor& up);

// x: [tokens, heads, head_dim]; positions int64 [tokens]; inv_freq float [rot / 2]. inverse = the
// backward (the transposed rotation).
at::Tensor rotary(const at::Tensor& x, const at::Tensor& positions, const at::Tensor& inv_freq, bool inverse);

// x: [tokens, channels]; w: [channels, taps]; seq_idx int32 [tokens]. Returns silu(conv(x)).
at::Tensor causalConv1dSiluForward(const at::Tensor& x, const at::Tensor& w, const at::Tensor& seq_idx);
// Returns (dx, dw).
std::tuple<at::Tensor, at::Tensor> causalConv1dSiluBackward(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& w,
                                                            const at::Tensor& seq_idx);

// h: [tokens, dim]; w: [vocab, dim]; target int64 [tokens] (negative = ignored). Returns (the loss
// summed over the kept tokens times `scale`, its gradient for h, its gradient for w), the logits
// made `chunk` tokens at a time.
std::tuple<at::Tensor, at::Tensor, at::Tensor> linearCrossEntropy(const at::Tensor& h, const at::Tensor& w, const at::Tensor& target,
                                                                  double scale, int64_t chunk);

// AdamW in place over lists of parameters, gradients, both moments and step counts (float scalars,
// already counted for this step), libtorch's `_fused_adamw_` in fp32 arithmetic (adamw.cu);
// grad_scale, when given, divides every gradient as it is read.
void adamwStep(at::TensorList params, at::TensorList grads, at::TensorList exp_avg, at::TensorList exp_avg_sq, at::TensorList steps,
               double lr, double beta1, double beta2, double weight_decay, double eps, const std::optional<at::Tensor>& grad_scale);

// The L2 norm of all the gradients together and the clipping factor max((norm + 1e-6) / max_norm, 1)
// that the AdamW kernel divides them by, both fp32 0-dim tensors, without a host sync (grad_norm.cu).
std::tuple<at::Tensor, at::Tensor> gradNorm(at::TensorList grads, double max_norm);

// The gated delta rule's results: (o, final states, entering states, T, V', W, P, normalised q and
// k, decays) and (dq, dk, dv, dg, dbeta); gdn_op.h runs both on any runner, gdn.cu and
// gdn_kernel_cpu.cpp register them.
using GdnForwardResult =
    std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;
using GdnBackwardResult = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

// The gated delta rule (gdn.cu): q, k [tokens, key heads, dk], v [tokens, value heads, dv], g (log
// decay), beta [tokens, value heads]; cu_seqlens and chunk_offsets int32 [segments + 1] on the
// device (segment s has the 64-token chunks [chunk_offsets[s], chunk_offsets[s + 1])). Returns
// (o [tokens, value heads, dv], each segment's final state [segments, value heads, dk, dv] fp32,
// with keep_states each chunk's entering state [value heads, chunks, dk, dv] (bf16 where the inputs
// are and the tensor cores' path runs, else fp32) and its T = (I + A)^-1 [value heads, chunks, 64, 64] fp32 and V' [value heads, chunks * 64, dv] in v's dtype, else three
// empty tensors; then, with keep_states and SIGHTLINE_GDN_RECOMPUTE unset, W [value heads, chunks
// * 64, dk] and P [value heads, chunks, 64, 64] in the entering states' type, the normalised q and
// k [2, key heads, chunks * 64, dk] in that type too and gamma and beta [2, value heads, chunks *
// 64] fp32, else four empty ones).
GdnForwardResult gdnForward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& g, const at::Tensor& beta,
                            const at::Tensor& cu_seqlens, const at::Tensor& chunk_offsets,
                            int64_t chunks, bool keep_states);
// From the entering states, the T, the V', the W, the P, the normalised q and k and the decays the
// forward kept (inverses or values empty: made again; wy and scores both empty: made again; keys
// and decays both empty: made again): (dq, dk, dv, dg, dbeta).
GdnBackwardResult gdnBackward(const at::Tensor& dout, const at::Tensor& q,
                              const at::Tensor& k, const at::Tensor& v,
                              const at::Tensor& g, const at::Tensor& beta,
                              const at::Tensor& cu_seqlens,
                              const at::Tensor& chunk_offsets,
                              const at::Tensor& states, const at::Tensor& inverses,
                              const at::Tensor& values, const at::Tensor& wy,
                              const at::Tensor& scores, const at::Tensor& keys,
                              const at::Tensor& decays, int64_t chunks);

} // namespace sightline::kernels
