#include "model.h"
#include "fused_ops.h"
#include "part_ranges.h"

#include <cmath>

namespace sightline::trainer {

namespace F = torch::nn::functional;
using torch::indexing::Slice;

namespace {

torch::nn::Linear linear(int64_t in, int64_t out) { return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)); }

torch::Tensor rotateHalf(const torch::Tensor& x) {
    const int64_t half = x.size(-1) / 2;
    return torch::cat({-x.index({"...", Slice(half)}), x.index({"...", Slice(0, half)})}, -1);
}

// Rotary embedding on the first cos.size(-1) features of each head, the rest passed through.
torch::Tensor rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
    const int64_t rot = cos.size(-1);
    const torch::Tensor c = cos.unsqueeze(1), s = sin.unsqueeze(1);
    const torch::Tensor head = x.index({"...", Slice(0, rot)}), rest = x.index({"...", Slice(rot)});
    return torch::cat({head * c + rotateHalf(head) * s, rest}, -1);
}

// Runs f(start, length) for each segment of a packed row and joins the results along `dim`.
template <typename Fn>
torch::Tensor perSegment(int64_t dim, const std::vector<int32_t>& segments, Fn&& f) {
    std::vector<torch::Tensor> parts;
    for (size_t s = 0; s + 1 < segments.size(); ++s) parts.push_back(f(segments[s], segments[s + 1] - segments[s]));
    return torch::cat(parts, dim);
}

const std::string kRule = "layer.gdn.rule"; // the delta rule alone, inside "layer.gdn"

} // namespace

RMSNormImpl::RMSNormImpl(int64_t dim, double eps_) : eps(eps_) { weight = register_parameter("weight", torch::zeros({dim})); }

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x, KernelPath path) {
    if (path == KernelPath::Fused) return fused::rmsNorm(x, weight, eps);
    const torch::Tensor xf = x.to(torch::kFloat32);
    const torch::Tensor y = xf * torch::rsqrt(xf.pow(2).mean(-1, true) + eps);
    return (y * (1.0 + weight.to(torch::kFloat32))).to(x.scalar_type());
}

std::pair<torch::Tensor, torch::Tensor> RMSNormImpl::addForward(const torch::Tensor& res, const torch::Tensor& branch) {
    if (!branch.defined()) return {res, part("layer.norm", res, [&](const torch::Tensor& t) { return forward(t, KernelPath::Fused); })};
    auto [sum, y] = fused::addRmsNorm(res, enterPart(branch, "layer.norm"), weight, eps);
    return {sum, leavePart(y, "layer.norm")};
}

GatedRMSNormImpl::GatedRMSNormImpl(int64_t dim, double eps_) : eps(eps_) { weight = register_parameter("weight", torch::ones({dim})); }

torch::Tensor GatedRMSNormImpl::forward(const torch::Tensor& x, const torch::Tensor& z, KernelPath path) {
    if (path == KernelPath::Fused) return fused::gatedRmsNorm(x, z, weight, eps);
    const torch::Tensor xf = x.to(torch::kFloat32);
    torch::Tensor y = weight * (xf * torch::rsqrt(xf.pow(2).mean(-1, true) + eps)).to(x.scalar_type());
    return (y * F::silu(z.to(torch::kFloat32))).to(x.scalar_type());
}

MlpImpl::MlpImpl(int64_t hidden, int64_t intermediate) {
    gate_proj = register_module("gate_proj", linear(hidden, intermediate));
    up_proj = register_module("up_proj", linear(hidden, intermediate));
    down_proj = register_module("down_proj", linear(intermediate, hidden));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x, KernelPath path) {
    if (path == KernelPath::Fused) {
        const auto gate_up = fused::sharedInputLinear(x, {gate_proj->weight, up_proj->weight});
        return down_proj(fused::swiglu(gate_up[0], gate_up[1]));
    }
    return down_proj(F::silu(gate_proj(x)) * up_proj(x));
}

AttentionImpl::AttentionImpl(const ModelConfig& c)
    : heads(c.num_attention_heads), kv_heads(c.num_key_value_heads), head_dim(c.head_dim) {
    // q_proj makes the queries and the output gate, head by head: [q_h | gate_h].
    q_proj = register_module("q_proj", linear(c.hidden_size, heads * head_dim * 2));
    k_proj = register_module("k_proj", linear(c.hidden_size, kv_heads * head_dim));
    v_proj = register_module("v_proj", linear(c.hidden_size, kv_heads * head_dim));
    o_proj = register_module("o_proj", linear(heads * head_dim, c.hidden_size));
    q_norm = register_module("q_norm", RMSNorm(head_dim, c.rms_norm_eps));
    k_norm = register_module("k_norm", RMSNorm(head_dim, c.rms_norm_eps));
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const Pass& pass) {
    return pass.path == KernelPath::Fused ? fused(x, pass) : naive(x, pass);
}

torch::Tensor AttentionImpl::naive(const torch::Tensor& x, const Pass& pass) {
    const int64_t b = x.size(0), t = x.size(1);
    const auto qg = q_proj(x).view({b, t, heads, 2 * head_dim}).chunk(2, -1);
    const torch::Tensor gate = qg[1].reshape({b, t, heads * head_dim});
    torch::Tensor q = q_norm(qg[0]).transpose(1, 2);
    torch::Tensor k = k_norm(k_proj(x).view({b, t, kv_heads, head_dim})).transpose(1, 2);
    torch::Tensor v = v_proj(x).view({b, t, kv_heads, head_dim}).transpose(1, 2);
    q = rotary(q, pass.cos, pass.sin);
    k = rotary(k, pass.cos, pass.sin);
    if (kv_heads != heads) { // grouped-query attention: each key/value head serves heads / kv_heads queries
        k = k.repeat_interleave(heads / kv_heads, 1);
        v = v.repeat_interleave(heads / kv_heads, 1);
    }
    const torch::Tensor out =
        at::scaled_dot_product_attention(q, k, v, pass.mask, 0.0, false, 1.0 / std::sqrt(double(head_dim)));
    return o_proj(out.transpose(1, 2).reshape({b, t, heads * head_dim}) * torch::sigmoid(gate));
}

// x: [N, hidden], the batch's tokens flattened; the norms read q in place from q_proj's output.
torch::Tensor AttentionImpl::fused(const torch::Tensor& x, const Pass& pass) {
    const int64_t n = x.size(0);
    const auto qkv = fused::sharedInputLinear(x, {q_proj->weight, k_proj->weight, v_proj->weight});
    const auto qg = qkv[0].view({n, heads, 2 * head_dim}).split(head_dim, 2); // one split: see GatedDeltaNetImpl::fused
    const torch::Tensor q = fused::rotary(q_norm(qg[0], KernelPath::Fused), pass.positions, pass.inv_freq);
    const torch::Tensor k = fused::rotary(k_norm(qkv[1].view({n, kv_heads, head_dim}), KernelPath::Fused), pass.positions, pass.inv_freq);
    const torch::Tensor v = qkv[2].view({n, kv_heads, head_dim});
    const torch::Tensor out = fused::flashAttention(q, k, v, pass.in.cu_seqlens, pass.in.max_segment, 1.0 / std::sqrt(double(head_dim)));
    return o_proj((out * torch::sigmoid(qg[1])).view({n, heads * head_dim}));
}

GatedDeltaNetImpl::GatedDeltaNetImpl(const ModelConfig& c)
    : k_heads(c.linear_num_key_heads), v_heads(c.linear_num_value_heads), k_dim(c.linear_key_head_dim),
      v_dim(c.linear_value_head_dim) {
    const int64_t key = k_heads * k_dim, value = v_heads * v_dim, channels = 2 * key + value;
    in_proj_qkv = register_module("in_proj_qkv", linear(c.hidden_size, channels));
    in_proj_z = register_module("in_proj_z", linear(c.hidden_size, value));
    in_proj_b = register_module("in_proj_b", linear(c.hidden_size, v_heads));
    in_proj_a = register_module("in_proj_a", linear(c.hidden_size, v_heads));
    // Depthwise and causal: padded by kernel - 1 on both sides, the tail cut off after.
    conv1d = register_module("conv1d", torch::nn::Conv1d(torch::nn::Conv1dOptions(channels, channels, c.linear_conv_kernel_dim).groups(channels).padding(c.linear_conv_kernel_dim - 1).bias(false)));
    dt_bias = register_parameter("dt_bias", torch::ones({v_heads}));
    A_log = register_parameter("A_log", torch::log(torch::empty({v_heads}).uniform_(0.01, 16)));
    norm = register_module("norm", GatedRMSNorm(v_dim, c.rms_norm_eps));
    out_proj = register_module("out_proj", linear(value, c.hidden_size));
}

torch::Tensor GatedDeltaNetImpl::forward(const torch::Tensor& x, const Pass& pass) {
    return pass.path == KernelPath::Fused ? fused(x, pass) : naive(x, pass);
}

torch::Tensor GatedDeltaNetImpl::decay(const torch::Tensor& a) {
    return -A_log.to(torch::kFloat32).exp() * F::softplus(a.to(torch::kFloat32) + dt_bias);
}

// x: [B, T, hidden]. A packed row (B = 1) runs the conv and the rule segment by segment, so that
// neither the conv window nor the recurrent state crosses an example's boundary.
torch::Tensor GatedDeltaNetImpl::naive(const torch::Tensor& x_in, const Pass& pass) {
    if (pass.fixes.gdn) { // the fused layer on the batch's tokens flattened, padding runs as segments of their own
        const int64_t b = x_in.size(0), t = x_in.size(1);
        return fused(x_in.reshape({b * t, x_in.size(2)}), pass).view({b, t, -1});
    }
    const torch::Tensor x = pass.pad.defined() ? x_in * pass.pad.unsqueeze(-1).to(x_in.scalar_type()) : x_in; // padding silenced
    const int64_t b = x.size(0), t = x.size(1), key = k_heads * k_dim, value = v_heads * v_dim;
    auto conv = [&](const torch::Tensor& c) { return conv1d(c).index({"...", Slice(0, c.size(-1))}); }; // [B, channels, T]
    const torch::Tensor mixed = in_proj_qkv(x).transpose(1, 2);
    const torch::Tensor convolved =
        pass.in.packed ? perSegment(2, pass.in.segments, [&](int64_t at, int64_t len) { return conv(mixed.narrow(2, at, len)); })
                       : conv(mixed);
    const torch::Tensor qkv = F::silu(convolved).transpose(1, 2);
    const auto parts = qkv.split_with_sizes({key, key, value}, -1);
    torch::Tensor q = parts[0].reshape({b, t, k_heads, k_dim});
    torch::Tensor k = parts[1].reshape({b, t, k_heads, k_dim});
    const torch::Tensor v = parts[2].reshape({b, t, v_heads, v_dim});
    const torch::Tensor beta = torch::sigmoid(in_proj_b(x));
    const torch::Tensor g = decay(in_proj_a(x));
    if (v_heads != k_heads) {
        q = q.repeat_interleave(v_heads / k_heads, 2);
        k = k.repeat_interleave(v_heads / k_heads, 2);
    }
    q = enterPart(q, kRule);
    torch::Tensor core;
    if (pass.in.packed) {
        const std::vector<torch::Tensor> inputs{q, k, v, g, beta};
        core = perSegment(1, pass.in.segments, [&](int64_t at, int64_t len) {
            std::vector<torch::Tensor> s;
            for (const torch::Tensor& t : inputs) s.push_back(t.narrow(1, at, len));
            return chunkGatedDeltaRule(s[0], s[1], s[2], s[3], s[4]);
        });
    } else {
        core = chunkGatedDeltaRule(q, k, v, g, beta);
    }
    core = leavePart(core, kRule);
    const torch::Tensor z = in_proj_z(x).reshape({-1, v_dim});
    return out_proj(norm(core.reshape({-1, v_dim}), z, pass.elementwise()).reshape({b, t, value}));
}

// x: [N, hidden], the batch's tokens flattened; segments from the pass's chunk plan and seq_idx.
torch::Tensor GatedDeltaNetImpl::fused(const torch::Tensor& x, const Pass& pass) {
    const int64_t n = x.size(0), key = k_heads * k_dim, value = v_heads * v_dim;
    const auto proj = fused::sharedInputLinear(x, {in_proj_qkv->weight, in_proj_z->weight, in_proj_b->weight, in_proj_a->weight});
    const torch::Tensor qkv = fused::causalConv1dSilu(proj[0], conv1d->weight.squeeze(1), pass.in.seq_idx);
    // one split, whose backward joins the three gradients once (a slice's backward would fill a
    // zero gradient of qkv's whole size for each of them)
    const auto parts = qkv.split_with_sizes({key, key, value}, 1);
    const torch::Tensor q = parts[0].view({n, k_heads, k_dim});
    const torch::Tensor k = parts[1].view({n, k_heads, k_dim});
    const torch::Tensor v = parts[2].view({n, v_heads, v_dim});
    const torch::Tensor g = decay(proj[3]), beta = torch::sigmoid(proj[2]);
    const torch::Tensor qr = enterPart(q, kRule);
    const torch::Tensor core = leavePart(pass.gdn == GdnRule::Kernels ? fused::gatedDeltaRule(qr, k, v, g, beta, *pass.chunks)
                                                                      : recomputedGatedDeltaRule(qr, k, v, g, beta, *pass.chunks),
                                         kRule);
    const torch::Tensor z = proj[1].view({n, v_heads, v_dim});
    return out_proj(norm(core, z, pass.elementwise()).view({n, value}));
}

DecoderLayerImpl::DecoderLayerImpl(const ModelConfig& c, LayerType type_) : type(type_) {
    if (type == LayerType::LinearAttention) linear_attn = register_module("linear_attn", GatedDeltaNet(c));
    else self_attn = register_module("self_attn", Attention(c));
    mlp = register_module("mlp", Mlp(c.hidden_size, c.intermediate_size));
    input_layernorm = register_module("input_layernorm", RMSNorm(c.hidden_size, c.rms_norm_eps));
    post_attention_layernorm = register_module("post_attention_layernorm", RMSNorm(c.hidden_size, c.rms_norm_eps));
}

torch::Tensor DecoderLayerImpl::mix(const torch::Tensor& h, const Pass& pass) {
    return type == LayerType::LinearAttention ? part("layer.gdn", h, [&](const torch::Tensor& t) { return linear_attn(t, pass); })
                                              : part("layer.attention", h, [&](const torch::Tensor& t) { return self_attn(t, pass); });
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const Pass& pass) {
    const torch::Tensor h = part("layer.norm", x, [&](const torch::Tensor& t) { return input_layernorm(t, pass.elementwise()); });
    const torch::Tensor y = x + mix(h, pass);
    const torch::Tensor h2 = part("layer.norm", y, [&](const torch::Tensor& t) { return post_attention_layernorm(t, pass.elementwise()); });
    return y + part("layer.mlp", h2, [&](const torch::Tensor& t) { return mlp(t, pass.elementwise()); });
}

std::pair<torch::Tensor, torch::Tensor> DecoderLayerImpl::forwardFused(const torch::Tensor& res, const torch::Tensor& branch,
                                                                       const Pass& pass) {
    const auto [x, h] = input_layernorm->addForward(res, branch);
    const auto [y, h2] = post_attention_layernorm->addForward(x, mix(h, pass));
    return {y, part("layer.mlp", h2, [&](const torch::Tensor& t) { return mlp(t, pass.elementwise()); })};
}

TextModelImpl::TextModelImpl(const ModelConfig& c) : config(c) {
    embed_tokens = register_module("embed_tokens", torch::nn::Embedding(c.vocab_size, c.hidden_size));
    layers = register_module("layers", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers->push_back(DecoderLayer(c, c.layer_types.at(size_t(i))));
    norm = register_module("norm", RMSNorm(c.hidden_size, c.rms_norm_eps));
    const int64_t rot = c.rotaryDim();
    m_inv_freq = 1.0 / torch::pow(c.rope_theta, torch::arange(0, rot, 2, torch::kFloat32) / double(rot));
}

// cos/sin of each token's position, and the attention mask: causal, and a query sees only keys of
// its own example (a padded row's real tokens; a packed row's segment).
void TextModelImpl::prepareNaive(Pass& pass, const torch::Tensor& like) const {
    const ModelInput& in = pass.in;
    const int64_t b = in.input_ids.size(0), t = in.input_ids.size(1);
    const torch::Tensor freqs = in.position_ids.to(torch::kFloat32).unsqueeze(-1) * pass.inv_freq; // [B, T, rot / 2]
    const torch::Tensor emb = torch::cat({freqs, freqs}, -1);
    pass.cos = emb.cos().to(like.scalar_type());
    pass.sin = emb.sin().to(like.scalar_type());
    pass.mask = torch::ones({t, t}, torch::dtype(torch::kBool).device(like.device())).tril().view({1, 1, t, t});
    if (in.packed) {
        const torch::Tensor seq = in.seq_idx.view({t});
        pass.mask = pass.mask & (seq.unsqueeze(1) == seq.unsqueeze(0)).view({1, 1, t, t});
    } else if (in.attention_mask.defined()) {
        pass.pad = in.attention_mask;
        pass.mask = pass.mask & in.attention_mask.to(torch::kBool).view({b, 1, 1, t});
    }
}

const torch::Tensor& TextModelImpl::inverseFrequencies(const torch::Device& device) {
    if (m_inv_freq.device() != device) m_inv_freq = m_inv_freq.to(device);
    return m_inv_freq;
}

torch::Tensor TextModelImpl::forward(const ModelInput& in, KernelPath path, const torch::Tensor& tied_sink) {
    Pass pass(in, path, inverseFrequencies(in.input_ids.device()));
    pass.gdn = gdn_rule;
    if (path == KernelPath::Naive) pass.fixes = fixes;
    const bool flattened = path == KernelPath::Fused || pass.fixes.gdn; // layers that read the batch's segments
    TORCH_CHECK(!flattened || in.cu_seqlens.defined(), "the fused kernels need the batch's segments");
    if (in.input_ids.is_cuda() && (path == KernelPath::Fused || pass.fixes.kernels())) fused::loadKernels();
    torch::Tensor x;
    if (path == KernelPath::Fused) {
        const torch::Tensor ids = in.input_ids.reshape({-1});
        x = tied_sink.defined() ? fused::tiedEmbedding(ids, embed_tokens->weight, tied_sink) : embed_tokens(ids);
        pass.positions = in.position_ids.reshape({-1});
    } else {
        x = embed_tokens(in.input_ids);
        prepareNaive(pass, x);
    }
    if (flattened) pass.chunks = std::make_unique<ChunkPlan>(planChunks(in.segments, 64, x.device()));
    if (pass.elementwise() == KernelPath::Fused) { // the residual stream's adds inside the norms
        torch::Tensor branch;
        for (const auto& layer : *layers) std::tie(x, branch) = layer->as<DecoderLayer>()->forwardFused(x, branch, pass);
        return norm->addForward(x, branch).second;
    }
    for (const auto& layer : *layers) x = layer->as<DecoderLayer>()->forward(x, pass);
    return part("layer.norm", x, [&](const torch::Tensor& t) { return norm(t, pass.elementwise()); });
}

CausalLMImpl::CausalLMImpl(const ModelConfig& c) {
    model = register_module("model", TextModel(c));
    if (!c.tie_word_embeddings) lm_head = register_module("lm_head", linear(c.hidden_size, c.vocab_size));
}

torch::Tensor CausalLMImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask) {
    const torch::Tensor h = model->forward(modelInput(input_ids, attention_mask), KernelPath::Naive);
    return F::linear(h, outputWeight()).to(torch::kFloat32);
}

torch::Tensor CausalLMImpl::loss(const ModelInput& in, KernelPath path) {
    // tied weights on the fused path: the embeddings' gradient added into the loss's in place
    const torch::Tensor sink = path == KernelPath::Fused && !lm_head ? torch::empty({0}, outputWeight().options()) : torch::Tensor();
    return part("layer.loss", model->forward(in, path, sink), [&](const torch::Tensor& h) {
        if (path == KernelPath::Naive && !model->fixes.elementwise)
            return shiftedCrossEntropy(F::linear(h, outputWeight()).to(torch::kFloat32), in.labels);
        return fused::linearCrossEntropy(h.reshape({-1, h.size(-1)}), outputWeight(), shiftedTargets(in.labels).reshape({-1}),
                                         in.loss_tokens, 2048, sink);
    });
}

torch::Tensor shiftedCrossEntropy(const torch::Tensor& logits, const torch::Tensor& labels) {
    // The labels move one to the left and the last position predicts nothing (ignored): the logits,
    // the largest tensor of the step, are used where they are, not sliced into a copy.
    const int64_t v = logits.size(-1);
    return F::cross_entropy(logits.reshape({-1, v}), shiftedTargets(labels).reshape({-1}),
                            F::CrossEntropyFuncOptions().ignore_index(-100));
}

} // namespace sightline::trainer
