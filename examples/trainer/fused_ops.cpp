#include "fused_ops.h"
#include "device.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <dlfcn.h>
#include <mutex>
#include <stdexcept>
#include <tuple>

namespace sightline::trainer::fused {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;
using T2 = std::tuple<at::Tensor, at::Tensor>;
using T3 = std::tuple<at::Tensor, at::Tensor, at::Tensor>;
using CT = const at::Tensor&;

} // namespace sightline::trainer::fused

namespace sightline::trainer {
void linkReferenceOps(); // reference_ops.cpp
void linkGdnKernelCpu(); // gdn_kernel_cpu.cpp
}

namespace sightline::trainer::fused {

void loadKernels() {
    linkReferenceOps();
    linkGdnKernelCpu();
    static std::once_flag once;
    static std::string error;
    std::call_once(once, [] {
        const std::string path = besideExecutable("libsightline_trainer_kernels.so");
        if (!dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL))
            error = std::string("--kernels fused: cannot load the trainer's CUDA kernels (") + dlerror() + ")";
    });
    if (!error.empty()) throw std::runtime_error(error);
}

namespace {

// The dispatcher's handle of operator NAME with C++ signature SIG, looked up once per call site
// (each lambda is a type of its own, so each has its own static).
#define SIGHTLINE_OP(NAME, ...)                                                                                   \
    ([]() -> const c10::TypedOperatorHandle<__VA_ARGS__>& {                                                       \
        static const auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(NAME, "").typed<__VA_ARGS__>(); \
        return handle;                                                                                            \
    }())

struct RmsNormFn : torch::autograd::Function<RmsNormFn> {
    static at::Tensor forward(AutogradContext* ctx, CT x, CT w, double eps, bool zero_centred) {
        auto [y, rstd] = SIGHTLINE_OP("sightline::rms_norm_fwd", T2(CT, CT, double, bool)).call(x, w, eps, zero_centred);
        ctx->save_for_backward({x, w, rstd});
        ctx->saved_data["zero_centred"] = zero_centred;
        return y;
    }
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        const auto s = ctx->get_saved_variables();
        auto [dx, dw] = SIGHTLINE_OP("sightline::rms_norm_bwd", T2(CT, CT, CT, CT, bool))
                            .call(grads[0], s[0], s[1], s[2], ctx->saved_data["zero_centred"].toBool());
        return {dx, dw, at::Tensor(), at::Tensor()};
    }
};

// (x + r, its zero-centred norm): the backward adds the sum's gradient from the residual stream to
// the norm's dx in the same kernel, and that is x's and r's gradient alike, so autograd adds no
// gradients of the residual stream itself.
struct AddRmsNormFn : torch::autograd::Function<AddRmsNormFn> {
    static tensor_list forward(AutogradContext* ctx, CT x, CT r, CT w, double eps) {
        auto [sum, y, rstd] = SIGHTLINE_OP("sightline::add_rms_norm_fwd", T3(CT, CT, CT, double, bool)).call(x, r, w, eps, true);
        ctx->save_for_backward({sum, w, rstd});
        ctx->set_materialize_grads(false); // an unused output's gradient stays undefined, not a tensor of zeros
        return {sum, y};
    }
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        if (!grads[1].defined()) return {grads[0], grads[0], at::Tensor(), at::Tensor()}; // the norm unused
        const auto s = ctx->get_saved_variables();
        const std::optional<at::Tensor> dsum = grads[0].defined() ? std::optional<at::Tensor>(grads[0].contiguous()) : std::nullopt;
        auto [dx, dw] = SIGHTLINE_OP("sightline::add_rms_norm_bwd", T2(CT, const std::optional<at::Tensor>&, CT, CT, CT, bool))
                            .call(grads[1], dsum, s[0], s[1], s[2], true);
        return {dx, dx, dw, at::Tensor()};
    }
};

struct GatedRmsNormFn : torch::autograd::Function<GatedRmsNormFn> {
    static at::Tensor forward(AutogradContext* ctx, CT x, CT z, CT w, double eps) {
        auto [y, rstd] = SIGHTLINE_OP("sightline::gated_rms_norm_fwd", T2(CT, CT, CT, double)).call(x, z, w, eps);
        ctx->save_for_backward({x, z, w, rstd});
        return y;
    }
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        const auto s = ctx->get_saved_variables();
        auto [dx, dz, dw] = SIGHTLINE_OP("sightline::gated_rms_norm_bwd", T3(CT, CT, CT, CT, CT)).call(grads[0], s[0], s[1], s[2], s[3]);
        return {dx, dz, dw, at::Tensor()};
    }
};

struct SwigluFn : torch::autograd::Function<SwigluFn> {
    static at::Tensor forward(AutogradContext* ctx, CT gate, CT up) {
        ctx->save_for_backward({gate, up});
        return SIGHTLINE_OP("sightline::swiglu_fwd", at::Tensor(CT, CT)).call(gate, up);
    }
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        const auto s = ctx->get_saved_variables();
        auto [dg, du] = SIGHTLINE_OP("sightline::swiglu_bwd", T2(CT, CT, CT)).call(grads[0], s[0], s[1]);
        return {dg, du};
    }
};

at::Tensor rotaryOp(CT x, CT positions, CT inv_freq, bool inverse) {
    return SIGHTLINE_OP("sightline::rotary", at::Tensor(CT, CT, CT, bool)).call(x, positions, inv_freq, inverse);
}

struct RotaryFn : torch::autograd::Function<RotaryFn> {
    static at::Tensor forward(AutogradContext* ctx, CT x, CT positions, CT inv_freq) {
        ctx->save_for_backward({positions, inv_freq});
        return rotaryOp(x, positions, inv_freq, false);
    }
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        const auto s = ctx->get_saved_variables();
        return {rotaryOp(grads[0], s[0], s[1], true), at::Tensor(), at::Tensor()};
    }
};

struct ConvFn : torch::autograd::Function<ConvFn> {
    static at::Tensor forward(AutogradContext* ctx, CT x, CT w, CT seq_idx) {
        ctx->save_for_backward({x, w, seq_idx});
        return SIGHTLINE_OP("sightline::causal_conv1d_silu_fwd", at::Tensor(CT, CT, CT)).call(x, w, seq_idx);
    }
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        const auto s = ctx->get_saved_variables();
        auto [dx, dw] = SIGHTLINE_OP("sightline::causal_conv1d_silu_bwd", T2(CT, CT, CT, CT)).call(grads[0], s[0], s[1], s[2]);
        return {dx, dw, at::Tensor()};
    }
};

// The gradients are made in the forward (the logits exist only a chunk at a time); the backward
// scales them by the incoming gradient (1 / accumulation steps, typically).
struct LinearCrossEntropyFn : torch::autograd::Function<LinearCrossEntropyFn> {
    static at::Tensor forward(AutogradContext* ctx, CT h, CT w, CT target, double scale, int64_t chunk, at::Tensor sink, bool fill) {
        auto [loss, gh, gw] = SIGHTLINE_OP("sightline::linear_cross_entropy", T3(CT, CT, CT, double, int64_t)).call(h, w, target, scale, chunk);
        ctx->save_for_backward({gh, gw});
        if (fill) sink.set_(gw); // the tied embedding's backward adds its rows here (TiedEmbeddingFn)
        return loss;
    }
    // Scales the kept gradients by the loss's in place: a product of the LM head's would be a second
    // copy of it (1.27 GB in bf16 at the benchmark's vocabulary) at the step's peak. So it runs once.
    // One multi-tensor launch that reads the factor on the device: mul_ by a 0-dim CUDA tensor took
    // libtorch's unvectorised broadcast kernel, 1.78 ms a step over the LM head's gradient (1.4 TB/s).
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        TORCH_CHECK(ctx->saved_data.count("scaled") == 0, "the fused loss's backward runs once (it scales its kept gradients in place)");
        ctx->saved_data["scaled"] = true;
        auto s = ctx->get_saved_variables();
        const at::Tensor g = grads[0].to(s[0].scalar_type());
        at::_foreach_mul_(at::TensorList(s.data(), 2), g);
        return {s[0], s[1], at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    }
};

// The embedding lookup of weights tied to the LM head: its backward adds its rows' gradients into
// the fused loss's weight gradient (which `sink` has become, LinearCrossEntropyFn) with a sorted,
// deterministic index_put_, and returns none of its own, so the step neither fills a dense
// [vocab, hidden] gradient nor adds it to the loss's (1.27 GB each at the benchmark's vocabulary).
// The loss's backward runs first (the embedding feeds everything before it). Without a loss that
// filled the sink, the dense gradient as usual.
struct TiedEmbeddingFn : torch::autograd::Function<TiedEmbeddingFn> {
    static at::Tensor forward(AutogradContext* ctx, CT ids, CT w, at::Tensor sink) {
        ctx->saved_data["ids"] = ids;
        ctx->saved_data["sink"] = sink;
        ctx->saved_data["rows"] = w.size(0);
        return at::embedding(w, ids);
    }
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        const at::Tensor ids = ctx->saved_data["ids"].toTensor();
        at::Tensor sink = ctx->saved_data["sink"].toTensor();
        if (sink.numel() == 0)
            return {at::Tensor(), at::embedding_backward(grads[0], ids, ctx->saved_data["rows"].toInt(), -1, false, false), at::Tensor()};
        sink.index_put_({ids}, grads[0].to(sink.scalar_type()), /*accumulate=*/true);
        return {at::Tensor(), at::Tensor(), at::Tensor()};
    }
};

struct FlashAttentionFn : torch::autograd::Function<FlashAttentionFn> {
    static at::Tensor forward(AutogradContext* ctx, CT q, CT k, CT v, CT cu, int64_t max_len, double scale) {
        auto [out, lse, rng, unused, debug] = at::_flash_attention_forward(q, k, v, cu, cu, max_len, max_len, 0.0, true, false, scale);
        ctx->save_for_backward({q, k, v, out, lse, cu, rng, unused});
        ctx->saved_data["max_len"] = max_len;
        ctx->saved_data["scale"] = scale;
        return out;
    }
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        const auto s = ctx->get_saved_variables();
        const int64_t max_len = ctx->saved_data["max_len"].toInt();
        auto [dq, dk, dv] = at::_flash_attention_backward(grads[0].contiguous(), s[0], s[1], s[2], s[3], s[4], s[5], s[5], max_len,
                                                          max_len, 0.0, true, s[6], s[7], ctx->saved_data["scale"].toDouble());
        return {dq, dk, dv, at::Tensor(), at::Tensor(), at::Tensor()};
    }
};

} // namespace

GdnForward gdnForwardOp(CT q, CT k, CT v, CT g, CT beta, CT cu, CT off, int64_t chunks, bool keep_states) {
    return SIGHTLINE_OP("sightline::gdn_fwd", GdnForward(CT, CT, CT, CT, CT, CT, CT, int64_t, bool))
        .call(q, k, v, g, beta, cu, off, chunks, keep_states);
}

GdnBackward gdnBackwardOp(CT dout, CT q, CT k, CT v, CT g, CT beta, CT cu, CT off, CT states, CT inverses, CT values, CT wy, CT scores,
                          CT keys, CT decays, int64_t chunks) {
    return SIGHTLINE_OP("sightline::gdn_bwd", GdnBackward(CT, CT, CT, CT, CT, CT, CT, CT, CT, CT, CT, CT, CT, CT, CT, int64_t))
        .call(dout, q, k, v, g, beta, cu, off, states, inverses, values, wy, scores, keys, decays, chunks);
}

std::tuple<at::Tensor, at::Tensor> gradNorm(at::TensorList grads, double max_norm) {
    return SIGHTLINE_OP("sightline::grad_norm", T2(at::TensorList, double)).call(grads, max_norm);
}

void adamw(at::TensorList params, at::TensorList grads, at::TensorList exp_avg, at::TensorList exp_avg_sq, at::TensorList steps, double lr,
           double beta1, double beta2, double weight_decay, double eps, const std::optional<at::Tensor>& grad_scale) {
    using L = at::TensorList;
    SIGHTLINE_OP("sightline::adamw_", void(L, L, L, L, L, double, double, double, double, double, const std::optional<at::Tensor>&))
        .call(params, grads, exp_avg, exp_avg_sq, steps, lr, beta1, beta2, weight_decay, eps, grad_scale);
}

namespace {

// Keeps the inputs, the segments, every chunk's entering state (dk x dv a chunk and value head, bf16
// with bf16 inputs on the tensor cores' path, else fp32), its T (64 x 64 fp32), V' (64 x dv in
// v's dtype), W (64 x dk), P (64 x 64), the normalised q and k (64 x dk a chunk and key head; all
// three in the states' type) and the decays gamma and beta (64 fp32 a chunk and value head; the
// last four not with SIGHTLINE_GDN_RECOMPUTE=1): memory for speed, the backward runs no state
// pass, and its prep no product (the triangular inverse, U, W, Q K^T) and no norm: it copies v's
// rows alone.
struct GatedDeltaRuleFn : torch::autograd::Function<GatedDeltaRuleFn> {
    static at::Tensor forward(AutogradContext* ctx, CT q, CT k, CT v, CT g, CT beta, CT cu, CT off, int64_t chunks) {
        const bool grads = q.requires_grad() || k.requires_grad() || v.requires_grad() || g.requires_grad() || beta.requires_grad();
        auto [o, final_state, states, inverses, values, wy, scores, keys, decays] = gdnForwardOp(q, k, v, g, beta, cu, off, chunks, grads); // no backward: nothing kept
        ctx->save_for_backward({q, k, v, g, beta, cu, off, states, inverses, values, wy, scores, keys, decays});
        ctx->saved_data["chunks"] = chunks;
        return o;
    }
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        const auto s = ctx->get_saved_variables();
        auto [dq, dk, dv, dg, db] = gdnBackwardOp(grads[0], s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11],
                                                  s[12], s[13], ctx->saved_data["chunks"].toInt());
        return {dq, dk, dv, dg, db, at::Tensor(), at::Tensor(), at::Tensor()};
    }
};

void checkPlan(const ChunkPlan& plan) {
    TORCH_CHECK(plan.chunk == 64 && plan.cu_seqlens.defined(), "gated delta rule kernels: the plan must be of 64-token chunks");
}

} // namespace

torch::Tensor gatedDeltaRule(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& g,
                             const torch::Tensor& beta, const ChunkPlan& plan) {
    checkPlan(plan);
    return GatedDeltaRuleFn::apply(q, k, v, g, beta, plan.cu_seqlens, plan.chunk_offsets, plan.chunks);
}

std::tuple<torch::Tensor, torch::Tensor> gatedDeltaRuleWithState(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                                                 const torch::Tensor& g, const torch::Tensor& beta, const ChunkPlan& plan) {
    checkPlan(plan);
    torch::NoGradGuard no_grad;
    auto result = gdnForwardOp(q, k, v, g, beta, plan.cu_seqlens, plan.chunk_offsets, plan.chunks, false);
    return {std::get<0>(result), std::get<1>(result)};
}

torch::Tensor rmsNorm(const torch::Tensor& x, const torch::Tensor& w, double eps, bool zero_centred) {
    const int64_t d = x.size(-1);
    const torch::Tensor rows = x.dim() == 2 ? x : x.reshape({-1, d});
    auto sizes = x.sizes().vec();
    return RmsNormFn::apply(rows, w, eps, zero_centred).view(sizes);
}

std::tuple<torch::Tensor, torch::Tensor> addRmsNorm(const torch::Tensor& x, const torch::Tensor& r, const torch::Tensor& w, double eps) {
    const int64_t d = x.size(-1);
    auto sizes = x.sizes().vec();
    const tensor_list out = AddRmsNormFn::apply(x.reshape({-1, d}), r.reshape({-1, d}).contiguous(), w, eps);
    return {out[0].view(sizes), out[1].view(sizes)};
}

torch::Tensor gatedRmsNorm(const torch::Tensor& x, const torch::Tensor& z, const torch::Tensor& w, double eps) {
    const int64_t d = x.size(-1);
    auto sizes = x.sizes().vec();
    return GatedRmsNormFn::apply(x.reshape({-1, d}), z.reshape({-1, d}), w, eps).view(sizes);
}

torch::Tensor swiglu(const torch::Tensor& gate, const torch::Tensor& up) { return SwigluFn::apply(gate, up); }

torch::Tensor rotary(const torch::Tensor& x, const torch::Tensor& positions, const torch::Tensor& inv_freq) {
    return RotaryFn::apply(x, positions, inv_freq);
}

torch::Tensor causalConv1dSilu(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& seq_idx) {
    return ConvFn::apply(x, w, seq_idx);
}

torch::Tensor linearCrossEntropy(const torch::Tensor& h, const torch::Tensor& w, const torch::Tensor& target, int64_t kept,
                                 int64_t chunk, const torch::Tensor& sink) {
    // an undefined tensor is no argument for apply(): a tensor of nothing stands in for no sink
    const bool fill = sink.defined();
    return LinearCrossEntropyFn::apply(h, w, target, kept > 0 ? 1.0 / double(kept) : 0.0, chunk, fill ? sink : w.new_empty({0}), fill);
}

torch::Tensor tiedEmbedding(const torch::Tensor& ids, const torch::Tensor& w, const torch::Tensor& sink) {
    return TiedEmbeddingFn::apply(ids, w, sink);
}

torch::Tensor flashAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& cu_seqlens,
                             int64_t max_len, double scale) {
    if (q.is_cuda()) return FlashAttentionFn::apply(q, k, v, cu_seqlens, max_len, scale);
    // The CPU has no flash attention: the same causal attention segment by segment (the reference).
    const torch::Tensor cu = cu_seqlens.cpu();
    const int64_t groups = q.size(1) / k.size(1);
    std::vector<torch::Tensor> parts;
    for (int64_t s = 0; s + 1 < cu.size(0); ++s) {
        const int64_t at = cu[s].item<int64_t>(), len = cu[s + 1].item<int64_t>() - at;
        auto heads = [&](const torch::Tensor& x, int64_t rep) { return x.narrow(0, at, len).transpose(0, 1).repeat_interleave(rep, 0); };
        parts.push_back(at::scaled_dot_product_attention(heads(q, 1), heads(k, groups), heads(v, groups), {}, 0.0, true, scale).transpose(0, 1));
    }
    return torch::cat(parts, 0);
}

} // namespace sightline::trainer::fused
