// The `sightline::` operators: their schemas, and their reference implementations on the CPU in
// plain libtorch arithmetic (fp32 inside). The CUDA kernels (kernels/, a plugin) register the same
// operators for CUDA tensors; with these, the fused path also runs on the CPU, where the tests
// compare it with the naive path exactly (tests/trainer/*_checks.cpp).
#include <torch/library.h>
#include <torch/torch.h>

#include <optional>
#include <tuple>

namespace sightline::trainer {

namespace {

using torch::Tensor;
namespace F = torch::nn::functional;

std::tuple<Tensor, Tensor> rmsNormFwd(const Tensor& x, const Tensor& w, double eps, bool zero_centred) {
    const Tensor xf = x.to(torch::kFloat32), r = torch::rsqrt(xf.pow(2).mean(-1, true) + eps);
    const Tensor y = xf * r * (w.to(torch::kFloat32) + (zero_centred ? 1.0 : 0.0));
    return {y.to(x.scalar_type()), r.squeeze(-1)};
}

// dx of y = x_hat * scale given d(x_hat) = g: r (g - x_hat mean(g x_hat)).
Tensor normInputGrad(const Tensor& g, const Tensor& xh, const Tensor& r) { return r.unsqueeze(-1) * (g - xh * (g * xh).mean(-1, true)); }

// (dx in fp32, dw).
std::tuple<Tensor, Tensor> rmsNormBwdFp32(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd, bool zero_centred) {
    const Tensor xh = x.to(torch::kFloat32) * rstd.unsqueeze(-1), d = dy.to(torch::kFloat32);
    const Tensor g = d * (w.to(torch::kFloat32) + (zero_centred ? 1.0 : 0.0));
    return {normInputGrad(g, xh, rstd), (d * xh).sum(0).to(w.scalar_type())};
}

std::tuple<Tensor, Tensor> rmsNormBwd(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd, bool zero_centred) {
    auto [dx, dw] = rmsNormBwdFp32(dy, x, w, rstd, zero_centred);
    return {dx.to(x.scalar_type()), dw};
}

// s = x + res rounded to x's dtype (as a separate add rounds it), then its norm.
std::tuple<Tensor, Tensor, Tensor> addRmsNormFwd(const Tensor& x, const Tensor& res, const Tensor& w, double eps, bool zero_centred) {
    const Tensor s = (x.to(torch::kFloat32) + res.to(torch::kFloat32)).to(x.scalar_type());
    auto [y, r] = rmsNormFwd(s, w, eps, zero_centred);
    return {s, y, r};
}

std::tuple<Tensor, Tensor> addRmsNormBwd(const Tensor& dy, const std::optional<Tensor>& dsum, const Tensor& sum, const Tensor& w,
                                         const Tensor& rstd, bool zero_centred) {
    auto [dx, dw] = rmsNormBwdFp32(dy, sum, w, rstd, zero_centred);
    if (dsum) dx = dx + dsum->to(torch::kFloat32);
    return {dx.to(sum.scalar_type()), dw};
}

std::tuple<Tensor, Tensor> gatedFwd(const Tensor& x, const Tensor& z, const Tensor& w, double eps) {
    auto [y, r] = rmsNormFwd(x, w, eps, false);
    return {(y.to(torch::kFloat32) * F::silu(z.to(torch::kFloat32))).to(x.scalar_type()), r};
}

std::tuple<Tensor, Tensor, Tensor> gatedBwd(const Tensor& dy, const Tensor& x, const Tensor& z, const Tensor& w, const Tensor& rstd) {
    const Tensor xh = x.to(torch::kFloat32) * rstd.unsqueeze(-1), d = dy.to(torch::kFloat32), zf = z.to(torch::kFloat32);
    const Tensor wf = w.to(torch::kFloat32), s = F::silu(zf), sig = torch::sigmoid(zf);
    const Tensor dz = d * wf * xh * sig * (1 + zf * (1 - sig));
    return {normInputGrad(d * wf * s, xh, rstd).to(x.scalar_type()), dz.to(z.scalar_type()), (d * xh * s).sum(0).to(w.scalar_type())};
}

Tensor swigluFwd(const Tensor& gate, const Tensor& up) {
    return (F::silu(gate.to(torch::kFloat32)) * up.to(torch::kFloat32)).to(gate.scalar_type());
}

std::tuple<Tensor, Tensor> swigluBwd(const Tensor& dout, const Tensor& gate, const Tensor& up) {
    const Tensor d = dout.to(torch::kFloat32), g = gate.to(torch::kFloat32), u = up.to(torch::kFloat32), sig = torch::sigmoid(g);
    return {(d * u * sig * (1 + g * (1 - sig))).to(gate.scalar_type()), (d * F::silu(g)).to(up.scalar_type())};
}

Tensor rotaryRef(const Tensor& x, const Tensor& positions, const Tensor& inv_freq, bool inverse) {
    const int64_t half = inv_freq.size(0), dim = x.size(2);
    const Tensor angle = positions.to(torch::kFloat32).unsqueeze(-1) * inv_freq; // [tokens, half]
    const Tensor c = angle.cos().unsqueeze(1), s = angle.sin().unsqueeze(1) * (inverse ? -1.0 : 1.0);
    const Tensor xf = x.to(torch::kFloat32), a = xf.narrow(2, 0, half), b = xf.narrow(2, half, half);
    return torch::cat({a * c - b * s, b * c + a * s, xf.narrow(2, 2 * half, dim - 2 * half)}, 2).to(x.scalar_type());
}

// x moved down by `shift` tokens (zeros on top), and where each tap's token is in the output
// token's sequence.
Tensor shiftDown(const Tensor& x, int64_t shift) { return shift ? F::pad(x, F::PadFuncOptions({0, 0, shift, 0})).narrow(0, 0, x.size(0)) : x; }
Tensor tapValid(const Tensor& seq, int64_t shift) {
    const Tensor same = shiftDown(seq.unsqueeze(-1), shift).squeeze(-1) == seq;
    const Tensor inside = torch::arange(seq.size(0), seq.options().dtype(torch::kInt64)) >= shift;
    return (same & inside).unsqueeze(-1).to(torch::kFloat32);
}

Tensor convPre(const Tensor& x, const Tensor& w, const Tensor& seq) {
    const int64_t taps = w.size(1);
    const Tensor xf = x.to(torch::kFloat32), wf = w.to(torch::kFloat32);
    Tensor pre = torch::zeros_like(xf);
    for (int64_t i = 0; i < taps; ++i) pre += wf.select(1, i) * shiftDown(xf, taps - 1 - i) * tapValid(seq, taps - 1 - i);
    return pre;
}

Tensor convFwd(const Tensor& x, const Tensor& w, const Tensor& seq) { return F::silu(convPre(x, w, seq)).to(x.scalar_type()); }

std::tuple<Tensor, Tensor> convBwd(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& seq) {
    const int64_t taps = w.size(1), n = x.size(0);
    const Tensor pre = convPre(x, w, seq), sig = torch::sigmoid(pre);
    const Tensor dpre = dy.to(torch::kFloat32) * sig * (1 + pre * (1 - sig));
    const Tensor xf = x.to(torch::kFloat32), wf = w.to(torch::kFloat32);
    Tensor dx = torch::zeros_like(xf), dw = torch::zeros({w.size(0), taps}, xf.options());
    for (int64_t i = 0; i < taps; ++i) {
        const int64_t shift = taps - 1 - i;
        const Tensor contrib = dpre * tapValid(seq, shift); // output t read x[t - shift] through tap i
        dw.select(1, i).copy_((contrib * shiftDown(xf, shift)).sum(0));
        dx.narrow(0, 0, n - shift) += (contrib * wf.select(1, i)).narrow(0, shift, n - shift);
    }
    return {dx.to(x.scalar_type()), dw.to(w.scalar_type())};
}

std::tuple<Tensor, Tensor, Tensor> linearCe(const Tensor& h, const Tensor& w, const Tensor& target, double scale, int64_t) {
    const Tensor logits = h.to(torch::kFloat32).matmul(w.to(torch::kFloat32).t());
    const Tensor keep = (target >= 0).to(torch::kFloat32).unsqueeze(-1), safe = target.clamp_min(0);
    const Tensor lse = logits.logsumexp(-1, true);
    const Tensor loss = ((lse - logits.gather(1, safe.unsqueeze(-1))) * keep).sum() * scale;
    const Tensor grad = ((logits - lse).exp() - F::one_hot(safe, logits.size(1)).to(torch::kFloat32)) * keep * scale;
    return {loss, grad.matmul(w.to(torch::kFloat32)).to(h.scalar_type()), grad.t().matmul(h.to(torch::kFloat32)).to(w.scalar_type())};
}

// AdamW: libtorch's fused kernel itself, which the CUDA kernel follows in fp32 arithmetic.
void adamwRef(at::TensorList p, at::TensorList g, at::TensorList m, at::TensorList v, at::TensorList s, double lr, double beta1,
              double beta2, double weight_decay, double eps, const std::optional<Tensor>& grad_scale) {
    at::_fused_adamw_(p, g, m, v, {}, s, lr, beta1, beta2, weight_decay, eps, /*amsgrad=*/false, /*maximize=*/false, grad_scale);
}

// The gradients' global norm and clipping factor as torch.nn.utils.clip_grad_norm_ makes them.
std::tuple<Tensor, Tensor> gradNormRef(at::TensorList grads, double max_norm) {
    TORCH_CHECK(!grads.empty(), "grad_norm: no gradients");
    const Tensor total = torch::stack(at::_foreach_norm(grads, 2, torch::kFloat32)).norm();
    return {total, torch::clamp_min((total + 1e-6) / max_norm, 1.0)};
}

} // namespace

// Called from fused_ops.cpp, so that a program linking the model library keeps this file (and the
// registrations below) even where nothing else names it.
void linkReferenceOps() {}

} // namespace sightline::trainer

TORCH_LIBRARY(sightline, m) {
    m.def("rms_norm_fwd(Tensor x, Tensor w, float eps, bool zero_centred) -> (Tensor, Tensor)");
    m.def("rms_norm_bwd(Tensor dy, Tensor x, Tensor w, Tensor rstd, bool zero_centred) -> (Tensor, Tensor)");
    // The residual add and the norm after it: (x + r, its norm, 1/rms); the backward's dsum is the
    // sum's gradient from its other use (the residual stream), added to the norm's dx.
    m.def("add_rms_norm_fwd(Tensor x, Tensor r, Tensor w, float eps, bool zero_centred) -> (Tensor, Tensor, Tensor)");
    m.def("add_rms_norm_bwd(Tensor dy, Tensor? dsum, Tensor sum, Tensor w, Tensor rstd, bool zero_centred) -> (Tensor, Tensor)");
    m.def("gated_rms_norm_fwd(Tensor x, Tensor z, Tensor w, float eps) -> (Tensor, Tensor)");
    m.def("gated_rms_norm_bwd(Tensor dy, Tensor x, Tensor z, Tensor w, Tensor rstd) -> (Tensor, Tensor, Tensor)");
    m.def("swiglu_fwd(Tensor gate, Tensor up) -> Tensor");
    m.def("swiglu_bwd(Tensor dout, Tensor gate, Tensor up) -> (Tensor, Tensor)");
    m.def("rotary(Tensor x, Tensor positions, Tensor inv_freq, bool inverse) -> Tensor");
    m.def("causal_conv1d_silu_fwd(Tensor x, Tensor w, Tensor seq_idx) -> Tensor");
    m.def("causal_conv1d_silu_bwd(Tensor dy, Tensor x, Tensor w, Tensor seq_idx) -> (Tensor, Tensor)");
    m.def("linear_cross_entropy(Tensor h, Tensor w, Tensor target, float scale, int chunk) -> (Tensor, Tensor, Tensor)");
    // The gated delta rule's kernels; the CPU implementation runs the kernels' own bodies (gdn_kernel_cpu.cpp).
    // The forward keeps every chunk's entering state, T, V', W, P, normalised q and k and decays for
    // the backward when asked (memory for speed: the backward then runs no state pass, and its prep
    // no product and no norm; W, P, q, k and the decays not with SIGHTLINE_GDN_RECOMPUTE=1, where
    // the backward's prep makes them again).
    m.def("gdn_fwd(Tensor q, Tensor k, Tensor v, Tensor g, Tensor beta, Tensor cu_seqlens, Tensor chunk_offsets, int chunks, bool keep_states) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");
    // AdamW in place (the CUDA kernel: adamw.cu); steps already counted for this step.
    m.def("adamw_(Tensor(a!)[] params, Tensor[] grads, Tensor(b!)[] exp_avg, Tensor(c!)[] exp_avg_sq, Tensor[] steps, float lr, float beta1, float beta2, float weight_decay, float eps, Tensor? grad_scale) -> ()");
    // The gradients' global L2 norm and the clipping factor max((norm + 1e-6) / max_norm, 1), on the
    // device (the CUDA kernel: grad_norm.cu).
    m.def("grad_norm(Tensor[] grads, float max_norm) -> (Tensor, Tensor)");
    m.def("gdn_bwd(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor g, Tensor beta, Tensor cu_seqlens, Tensor chunk_offsets, Tensor states, Tensor inverses, Tensor values, Tensor wy, Tensor scores, Tensor keys, Tensor decays, int chunks) -> (Tensor, Tensor, Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(sightline, CPU, m) {
    using namespace sightline::trainer;
    m.impl("rms_norm_fwd", &rmsNormFwd);
    m.impl("rms_norm_bwd", &rmsNormBwd);
    m.impl("add_rms_norm_fwd", &addRmsNormFwd);
    m.impl("add_rms_norm_bwd", &addRmsNormBwd);
    m.impl("gated_rms_norm_fwd", &gatedFwd);
    m.impl("gated_rms_norm_bwd", &gatedBwd);
    m.impl("swiglu_fwd", &swigluFwd);
    m.impl("swiglu_bwd", &swigluBwd);
    m.impl("rotary", &rotaryRef);
    m.impl("causal_conv1d_silu_fwd", &convFwd);
    m.impl("causal_conv1d_silu_bwd", &convBwd);
    m.impl("linear_cross_entropy", &linearCe);
    m.impl("adamw_", &adamwRef);
    m.impl("grad_norm", &gradNormRef);
}
