#pragma once
// The Qwen3.5-style hybrid decoder in libtorch, on the naive path a user gets without fused
// kernels (docs/trainer.md): Gated DeltaNet layers computed chunk by chunk in fp32 with small
// matmuls, the depthwise causal conv1d as a grouped convolution, gated full attention through SDPA
// with a padding mask. Modules and parameters carry the Hugging Face names
// (model.layers.N.linear_attn.in_proj_qkv.weight, ...), so named_parameters() maps one to one
// onto a transformers checkpoint.
#include "model_config.h"

#include <torch/torch.h>

namespace sightline::trainer {

// Zero-centred RMSNorm: x / rms(x) * (1 + w), computed in fp32.
struct RMSNormImpl : torch::nn::Module {
    RMSNormImpl(int64_t dim, double eps);
    torch::Tensor forward(const torch::Tensor& x);
    torch::Tensor weight;
    double eps;
};
TORCH_MODULE(RMSNorm);

// The norm after the delta rule: normalised per head, scaled by w, gated by silu(z).
struct GatedRMSNormImpl : torch::nn::Module {
    GatedRMSNormImpl(int64_t dim, double eps);
    torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& z);
    torch::Tensor weight;
    double eps;
};
TORCH_MODULE(GatedRMSNorm);

struct MlpImpl : torch::nn::Module {
    MlpImpl(int64_t hidden, int64_t intermediate);
    torch::Tensor forward(const torch::Tensor& x);
    torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(Mlp);

// Gated full attention: per-head q/k RMSNorm, partial rotary embedding, GQA, an output gate.
struct AttentionImpl : torch::nn::Module {
    explicit AttentionImpl(const ModelConfig& c);
    // cos/sin: [batch, seq, rotary_dim]; mask: [batch, 1, seq, seq], true where a query may see a key.
    torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin, const torch::Tensor& mask);
    torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
    RMSNorm q_norm{nullptr}, k_norm{nullptr};
    int64_t heads, kv_heads, head_dim;
};
TORCH_MODULE(Attention);

// Gated DeltaNet (linear attention) on the chunked torch path.
struct GatedDeltaNetImpl : torch::nn::Module {
    explicit GatedDeltaNetImpl(const ModelConfig& c);
    // pad: [batch, seq] (1 real, 0 padding) or undefined.
    torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& pad);
    torch::nn::Linear in_proj_qkv{nullptr}, in_proj_z{nullptr}, in_proj_b{nullptr}, in_proj_a{nullptr}, out_proj{nullptr};
    torch::nn::Conv1d conv1d{nullptr};
    torch::Tensor dt_bias, A_log;
    GatedRMSNorm norm{nullptr};
    int64_t k_heads, v_heads, k_dim, v_dim;
};
TORCH_MODULE(GatedDeltaNet);

// The gated delta rule over chunks of `chunk` tokens (q, k: [B, T, H, dk], already expanded to the
// value heads; v: [B, T, H, dv]; g (log decay <= 0), beta: [B, T, H]). Returns [B, T, H, dv] in the
// input's dtype; computed in fp32 with q and k L2-normalised and q scaled by dk^-1/2.
torch::Tensor chunkGatedDeltaRule(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor g, torch::Tensor beta,
                                  int64_t chunk = 64);

struct DecoderLayerImpl : torch::nn::Module {
    DecoderLayerImpl(const ModelConfig& c, LayerType type);
    torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin, const torch::Tensor& mask,
                          const torch::Tensor& pad);
    LayerType type;
    GatedDeltaNet linear_attn{nullptr};
    Attention self_attn{nullptr};
    Mlp mlp{nullptr};
    RMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
};
TORCH_MODULE(DecoderLayer);

struct TextModelImpl : torch::nn::Module {
    explicit TextModelImpl(const ModelConfig& c);
    torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask);
    ModelConfig config;
    torch::nn::Embedding embed_tokens{nullptr};
    torch::nn::ModuleList layers;
    RMSNorm norm{nullptr};
    torch::Tensor inv_freq; // rotary inverse frequencies (a buffer, not saved)
};
TORCH_MODULE(TextModel);

struct CausalLMImpl : torch::nn::Module {
    explicit CausalLMImpl(const ModelConfig& c);
    // Logits [batch, seq, vocab] in fp32.
    torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask);
    TextModel model{nullptr};
    torch::nn::Linear lm_head{nullptr}; // null when tied to the embeddings
};
TORCH_MODULE(CausalLM);

// Mean cross-entropy of each position predicting the next token, positions whose label is -100 left out.
torch::Tensor shiftedCrossEntropy(const torch::Tensor& logits, const torch::Tensor& labels);

} // namespace sightline::trainer
