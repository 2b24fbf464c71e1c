#include "model.h"

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

torch::Tensor l2normalize(const torch::Tensor& x) { return x * torch::rsqrt((x * x).sum(-1, true) + 1e-6); }

} // namespace

RMSNormImpl::RMSNormImpl(int64_t dim, double eps_) : eps(eps_) { weight = register_parameter("weight", torch::zeros({dim})); }

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
    const torch::Tensor xf = x.to(torch::kFloat32);
    const torch::Tensor y = xf * torch::rsqrt(xf.pow(2).mean(-1, true) + eps);
    return (y * (1.0 + weight.to(torch::kFloat32))).to(x.scalar_type());
}

GatedRMSNormImpl::GatedRMSNormImpl(int64_t dim, double eps_) : eps(eps_) { weight = register_parameter("weight", torch::ones({dim})); }

torch::Tensor GatedRMSNormImpl::forward(const torch::Tensor& x, const torch::Tensor& z) {
    const torch::Tensor xf = x.to(torch::kFloat32);
    torch::Tensor y = weight * (xf * torch::rsqrt(xf.pow(2).mean(-1, true) + eps)).to(x.scalar_type());
    return (y * F::silu(z.to(torch::kFloat32))).to(x.scalar_type());
}

MlpImpl::MlpImpl(int64_t hidden, int64_t intermediate) {
    gate_proj = register_module("gate_proj", linear(hidden, intermediate));
    up_proj = register_module("up_proj", linear(hidden, intermediate));
    down_proj = register_module("down_proj", linear(intermediate, hidden));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) { return down_proj(F::silu(gate_proj(x)) * up_proj(x)); }

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

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                     const torch::Tensor& mask) {
    const int64_t b = x.size(0), t = x.size(1);
    const auto qg = q_proj(x).view({b, t, heads, 2 * head_dim}).chunk(2, -1);
    const torch::Tensor gate = qg[1].reshape({b, t, heads * head_dim});
    torch::Tensor q = q_norm(qg[0]).transpose(1, 2);
    torch::Tensor k = k_norm(k_proj(x).view({b, t, kv_heads, head_dim})).transpose(1, 2);
    torch::Tensor v = v_proj(x).view({b, t, kv_heads, head_dim}).transpose(1, 2);
    q = rotary(q, cos, sin);
    k = rotary(k, cos, sin);
    if (kv_heads != heads) { // grouped-query attention: each key/value head serves heads / kv_heads queries
        k = k.repeat_interleave(heads / kv_heads, 1);
        v = v.repeat_interleave(heads / kv_heads, 1);
    }
    const torch::Tensor out = at::scaled_dot_product_attention(q, k, v, mask, 0.0, false, 1.0 / std::sqrt(double(head_dim)));
    return o_proj(out.transpose(1, 2).reshape({b, t, heads * head_dim}) * torch::sigmoid(gate));
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
    conv1d = register_module("conv1d", torch::nn::Conv1d(torch::nn::Conv1dOptions(channels, channels, c.linear_conv_kernel_dim)
                                                             .groups(channels)
                                                             .padding(c.linear_conv_kernel_dim - 1)
                                                             .bias(false)));
    dt_bias = register_parameter("dt_bias", torch::ones({v_heads}));
    A_log = register_parameter("A_log", torch::log(torch::empty({v_heads}).uniform_(0.01, 16)));
    norm = register_module("norm", GatedRMSNorm(v_dim, c.rms_norm_eps));
    out_proj = register_module("out_proj", linear(value, c.hidden_size));
}

torch::Tensor GatedDeltaNetImpl::forward(const torch::Tensor& x_in, const torch::Tensor& pad) {
    const torch::Tensor x = pad.defined() ? x_in * pad.unsqueeze(-1).to(x_in.scalar_type()) : x_in; // padding tokens silenced
    const int64_t b = x.size(0), t = x.size(1), key = k_heads * k_dim, value = v_heads * v_dim;
    torch::Tensor qkv = F::silu(conv1d(in_proj_qkv(x).transpose(1, 2)).index({"...", Slice(0, t)})).transpose(1, 2);
    const auto parts = qkv.split_with_sizes({key, key, value}, -1);
    torch::Tensor q = parts[0].reshape({b, t, k_heads, k_dim});
    torch::Tensor k = parts[1].reshape({b, t, k_heads, k_dim});
    const torch::Tensor v = parts[2].reshape({b, t, v_heads, v_dim});
    const torch::Tensor beta = torch::sigmoid(in_proj_b(x));
    const torch::Tensor g = -A_log.to(torch::kFloat32).exp() * F::softplus(in_proj_a(x).to(torch::kFloat32) + dt_bias);
    if (v_heads != k_heads) {
        q = q.repeat_interleave(v_heads / k_heads, 2);
        k = k.repeat_interleave(v_heads / k_heads, 2);
    }
    const torch::Tensor core = chunkGatedDeltaRule(q, k, v, g, beta);
    const torch::Tensor z = in_proj_z(x).reshape({-1, v_dim});
    return out_proj(norm(core.reshape({-1, v_dim}), z).reshape({b, t, value}));
}

torch::Tensor chunkGatedDeltaRule(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor g, torch::Tensor beta,
                                  int64_t chunk) {
    const auto dtype = q.scalar_type();
    const int64_t b = q.size(0), t = q.size(1), h = q.size(2), dk = q.size(3), dv = v.size(3);
    // [B, H, T, ...] in fp32.
    auto prep = [](const torch::Tensor& x) { return x.transpose(1, 2).to(torch::kFloat32).contiguous(); };
    q = l2normalize(prep(q)) / std::sqrt(double(dk));
    k = l2normalize(prep(k));
    v = prep(v);
    beta = prep(beta);
    g = prep(g);
    const int64_t pad = (chunk - t % chunk) % chunk, n = (t + pad) / chunk;
    if (pad) { // padded steps neither decay (g = 0) nor write (beta = 0)
        q = F::pad(q, F::PadFuncOptions({0, 0, 0, pad}));
        k = F::pad(k, F::PadFuncOptions({0, 0, 0, pad}));
        v = F::pad(v, F::PadFuncOptions({0, 0, 0, pad}));
        beta = F::pad(beta, F::PadFuncOptions({0, pad}));
        g = F::pad(g, F::PadFuncOptions({0, pad}));
    }
    // Per chunk: [B, H, n, C, d].
    auto chunks = [&](const torch::Tensor& x) { return x.reshape({b, h, n, chunk, x.size(-1)}); };
    const torch::Tensor kb = chunks(k * beta.unsqueeze(-1)), vb = chunks(v * beta.unsqueeze(-1));
    q = chunks(q);
    k = chunks(k);
    const torch::Tensor gamma = g.reshape({b, h, n, chunk}).cumsum(-1); // log decay from the chunk's start
    // decay[i][j] = exp(gamma_i - gamma_j) for j <= i, 0 above the diagonal.
    const torch::Tensor above = torch::ones({chunk, chunk}, torch::dtype(torch::kBool).device(q.device())).triu(1);
    const torch::Tensor decay = (gamma.unsqueeze(-1) - gamma.unsqueeze(-2)).masked_fill(above, -INFINITY).exp();
    // The WY form of the chunk's delta-rule updates: T = (I + strictly_lower(beta K K^T . decay))^-1.
    const torch::Tensor system = (kb.matmul(k.transpose(-1, -2)) * decay).tril(-1) +
                                 torch::eye(chunk, torch::dtype(torch::kFloat32).device(q.device()));
    const torch::Tensor u = torch::linalg_solve_triangular(system, vb, false, true, true);
    const torch::Tensor w = torch::linalg_solve_triangular(system, kb * gamma.exp().unsqueeze(-1), false, true, true);
    const torch::Tensor scores = q.matmul(k.transpose(-1, -2)) * decay; // within the chunk, diagonal included
    const torch::Tensor q_decayed = q * gamma.exp().unsqueeze(-1);
    const torch::Tensor last = gamma.index({"...", Slice(-1, torch::indexing::None)}); // [B, H, n, 1]
    const torch::Tensor k_to_end = k * (last - gamma).exp().unsqueeze(-1);
    torch::Tensor state = torch::zeros({b, h, dk, dv}, q.options());
    std::vector<torch::Tensor> out;
    out.reserve(size_t(n));
    for (int64_t i = 0; i < n; ++i) {
        const torch::Tensor v_new = u.select(2, i) - w.select(2, i).matmul(state);
        out.push_back(q_decayed.select(2, i).matmul(state) + scores.select(2, i).matmul(v_new));
        state = state * last.select(2, i).exp().unsqueeze(-1) + k_to_end.select(2, i).transpose(-1, -2).matmul(v_new);
    }
    const torch::Tensor o = torch::stack(out, 2).reshape({b, h, n * chunk, dv}).index({Slice(), Slice(), Slice(0, t)});
    return o.transpose(1, 2).contiguous().to(dtype);
}

DecoderLayerImpl::DecoderLayerImpl(const ModelConfig& c, LayerType type_) : type(type_) {
    if (type == LayerType::LinearAttention) linear_attn = register_module("linear_attn", GatedDeltaNet(c));
    else self_attn = register_module("self_attn", Attention(c));
    mlp = register_module("mlp", Mlp(c.hidden_size, c.intermediate_size));
    input_layernorm = register_module("input_layernorm", RMSNorm(c.hidden_size, c.rms_norm_eps));
    post_attention_layernorm = register_module("post_attention_layernorm", RMSNorm(c.hidden_size, c.rms_norm_eps));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                        const torch::Tensor& mask, const torch::Tensor& pad) {
    const torch::Tensor h = input_layernorm(x);
    const torch::Tensor mixed = type == LayerType::LinearAttention ? linear_attn(h, pad) : self_attn(h, cos, sin, mask);
    const torch::Tensor y = x + mixed;
    return y + mlp(post_attention_layernorm(y));
}

TextModelImpl::TextModelImpl(const ModelConfig& c) : config(c) {
    embed_tokens = register_module("embed_tokens", torch::nn::Embedding(c.vocab_size, c.hidden_size));
    layers = register_module("layers", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers->push_back(DecoderLayer(c, c.layer_types.at(size_t(i))));
    norm = register_module("norm", RMSNorm(c.hidden_size, c.rms_norm_eps));
    const int64_t rot = c.rotaryDim();
    inv_freq = register_buffer("inv_freq", 1.0 / torch::pow(c.rope_theta, torch::arange(0, rot, 2, torch::kFloat32) / double(rot)));
}

torch::Tensor TextModelImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask) {
    const int64_t b = input_ids.size(0), t = input_ids.size(1);
    torch::Tensor x = embed_tokens(input_ids);
    // Positions 0..T-1 on every row (right padding); cos/sin over the rotary features.
    const torch::Tensor freqs = torch::outer(torch::arange(t, inv_freq.options()), inv_freq);
    const torch::Tensor emb = torch::cat({freqs, freqs}, -1).unsqueeze(0).expand({b, t, -1});
    const torch::Tensor cos = emb.cos().to(x.scalar_type()), sin = emb.sin().to(x.scalar_type());
    // Causal, and no attention to padding keys.
    torch::Tensor mask = torch::ones({t, t}, torch::dtype(torch::kBool).device(x.device())).tril().view({1, 1, t, t});
    torch::Tensor pad;
    if (attention_mask.defined()) {
        pad = attention_mask;
        mask = mask & attention_mask.to(torch::kBool).view({b, 1, 1, t});
    }
    for (const auto& layer : *layers) x = layer->as<DecoderLayer>()->forward(x, cos, sin, mask, pad);
    return norm(x);
}

CausalLMImpl::CausalLMImpl(const ModelConfig& c) {
    model = register_module("model", TextModel(c));
    if (!c.tie_word_embeddings) lm_head = register_module("lm_head", linear(c.hidden_size, c.vocab_size));
}

torch::Tensor CausalLMImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask) {
    const torch::Tensor h = model(input_ids, attention_mask);
    const torch::Tensor logits = lm_head ? lm_head(h) : F::linear(h, model->embed_tokens->weight);
    return logits.to(torch::kFloat32);
}

torch::Tensor shiftedCrossEntropy(const torch::Tensor& logits, const torch::Tensor& labels) {
    // The labels move one to the left and the last position predicts nothing (ignored): the logits,
    // the largest tensor of the step, are used where they are, not sliced into a copy.
    const int64_t v = logits.size(-1);
    const torch::Tensor y = F::pad(labels.index({Slice(), Slice(1)}), F::PadFuncOptions({0, 1}).value(-100)).reshape({-1});
    return F::cross_entropy(logits.reshape({-1, v}), y, F::CrossEntropyFuncOptions().ignore_index(-100));
}

} // namespace sightline::trainer
