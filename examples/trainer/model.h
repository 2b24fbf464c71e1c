#pragma once
// The Qwen3.5-style hybrid decoder in libtorch, with two kernel paths (docs/trainer.md):
// - naive: what a user gets without fused kernels (transformers' torch fallback): Gated DeltaNet
//   layers chunk by chunk in fp32 with small matmuls, the depthwise causal conv1d as a grouped
//   convolution, gated full attention through SDPA with a mask, the full logits for the loss;
// - fused: the trainer's own CUDA kernels (fused_ops.h) on the flattened tokens of the batch,
//   varlen flash attention, the chunk-parallel delta rule, the LM head fused with the loss.
// Both honour the batch's segments: a packed row's examples never see each other.
// Modules and parameters carry the Hugging Face names (model.layers.N.linear_attn.in_proj_qkv.weight,
// ...), so named_parameters() maps one to one onto a transformers checkpoint.
#include "gdn.h"
#include "model_config.h"
#include "model_input.h"

#include <torch/torch.h>

#include <memory>
#include <utility>

namespace sightline::trainer {

// What every layer of one forward pass shares.
struct Pass {
    Pass(const ModelInput& in_, KernelPath path_, torch::Tensor inv_freq_) : in(in_), path(path_), inv_freq(std::move(inv_freq_)) {}
    const ModelInput& in;
    KernelPath path;
    GdnRule gdn = GdnRule::Kernels; // the fused path's delta rule
    Fixes fixes;                    // on the naive path: the fused kernels it takes one by one
    // The path of the norms, SwiGLU and loss: fused on the fused path or with the elementwise fix.
    KernelPath elementwise() const { return fixes.elementwise ? KernelPath::Fused : path; }
    torch::Tensor inv_freq; // rotary inverse frequencies [rot / 2]
    // naive path
    torch::Tensor cos, sin; // [B, T, rot]
    torch::Tensor mask;     // [B, 1, T, T] bool: causal, within the query's example
    torch::Tensor pad;      // [B, T] 1 real / 0 padding (padded batches) or undefined
    // fused path
    torch::Tensor positions; // int64 [B x T]
    std::unique_ptr<ChunkPlan> chunks;
};

// Zero-centred RMSNorm: x / rms(x) * (1 + w), computed in fp32.
struct RMSNormImpl : torch::nn::Module {
    RMSNormImpl(int64_t dim, double eps);
    torch::Tensor forward(const torch::Tensor& x, KernelPath path = KernelPath::Naive);
    // On the fused path, the residual stream's add before the norm: (res + branch, its norm), or
    // (res, its norm) where there is no branch yet (the first layer's).
    std::pair<torch::Tensor, torch::Tensor> addForward(const torch::Tensor& res, const torch::Tensor& branch);
    torch::Tensor weight;
    double eps;
};
TORCH_MODULE(RMSNorm);

// The norm after the delta rule: normalised per head, scaled by w, gated by silu(z).
struct GatedRMSNormImpl : torch::nn::Module {
    GatedRMSNormImpl(int64_t dim, double eps);
    torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& z, KernelPath path = KernelPath::Naive);
    torch::Tensor weight;
    double eps;
};
TORCH_MODULE(GatedRMSNorm);

struct MlpImpl : torch::nn::Module {
    MlpImpl(int64_t hidden, int64_t intermediate);
    torch::Tensor forward(const torch::Tensor& x, KernelPath path = KernelPath::Naive);
    torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(Mlp);

// Gated full attention: per-head q/k RMSNorm, partial rotary embedding, GQA, an output gate.
struct AttentionImpl : torch::nn::Module {
    explicit AttentionImpl(const ModelConfig& c);
    torch::Tensor forward(const torch::Tensor& x, const Pass& pass);
    torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
    RMSNorm q_norm{nullptr}, k_norm{nullptr};
    int64_t heads, kv_heads, head_dim;

private:
    torch::Tensor naive(const torch::Tensor& x, const Pass& pass);
    torch::Tensor fused(const torch::Tensor& x, const Pass& pass);
};
TORCH_MODULE(Attention);

// Gated DeltaNet (linear attention).
struct GatedDeltaNetImpl : torch::nn::Module {
    explicit GatedDeltaNetImpl(const ModelConfig& c);
    torch::Tensor forward(const torch::Tensor& x, const Pass& pass);
    torch::nn::Linear in_proj_qkv{nullptr}, in_proj_z{nullptr}, in_proj_b{nullptr}, in_proj_a{nullptr}, out_proj{nullptr};
    torch::nn::Conv1d conv1d{nullptr};
    torch::Tensor dt_bias, A_log;
    GatedRMSNorm norm{nullptr};
    int64_t k_heads, v_heads, k_dim, v_dim;

private:
    torch::Tensor naive(const torch::Tensor& x, const Pass& pass);
    torch::Tensor fused(const torch::Tensor& x, const Pass& pass);
    torch::Tensor decay(const torch::Tensor& a); // log decay g = -exp(A_log) softplus(a + dt_bias), fp32, from in_proj_a's output
};
TORCH_MODULE(GatedDeltaNet);

struct DecoderLayerImpl : torch::nn::Module {
    DecoderLayerImpl(const ModelConfig& c, LayerType type);
    torch::Tensor forward(const torch::Tensor& x, const Pass& pass);
    // The fused path's form: the layer's input as the residual stream and the last layer's MLP
    // output not yet added to it (undefined before the first layer); returns the same pair for the
    // next layer, the adds made inside the norms (fused::addRmsNorm).
    std::pair<torch::Tensor, torch::Tensor> forwardFused(const torch::Tensor& res, const torch::Tensor& branch, const Pass& pass);
    // The token mixer of the layer's type (the delta rule or attention) on the normed input.
    torch::Tensor mix(const torch::Tensor& h, const Pass& pass);
    LayerType type;
    GatedDeltaNet linear_attn{nullptr};
    Attention self_attn{nullptr};
    Mlp mlp{nullptr};
    RMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
};
TORCH_MODULE(DecoderLayer);

struct TextModelImpl : torch::nn::Module {
    explicit TextModelImpl(const ModelConfig& c);
    // The final hidden states: [B, T, hidden] on the naive path, [B x T, hidden] on the fused one.
    // tied_sink (fused path): the embeddings' gradient goes into the fused loss's weight gradient
    // (fused::tiedEmbedding).
    torch::Tensor forward(const ModelInput& in, KernelPath path, const torch::Tensor& tied_sink = torch::Tensor());
    ModelConfig config;
    GdnRule gdn_rule = GdnRule::Kernels; // the fused path's delta rule (the trainer's --gdn)
    Fixes fixes;                         // the naive path's single fixes (the trainer's --fix)
    torch::nn::Embedding embed_tokens{nullptr};
    torch::nn::ModuleList layers;
    RMSNorm norm{nullptr};

private:
    void prepareNaive(Pass& pass, const torch::Tensor& like) const;
    // The rotary inverse frequencies in fp32 on `device`. Not a buffer: a bf16 model keeps them in
    // fp32 (rounded to bf16 they would turn positions in the thousands by radians).
    const torch::Tensor& inverseFrequencies(const torch::Device& device);
    torch::Tensor m_inv_freq;
};
TORCH_MODULE(TextModel);

struct CausalLMImpl : torch::nn::Module {
    explicit CausalLMImpl(const ModelConfig& c);
    // Logits [batch, seq, vocab] in fp32 of a right-padded batch, on the naive path.
    torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask);
    // The mean next-token cross-entropy of a batch, on either path (the fused one never makes the
    // whole logits).
    torch::Tensor loss(const ModelInput& in, KernelPath path);
    const torch::Tensor& outputWeight() const { return lm_head ? lm_head->weight : model->embed_tokens->weight; }
    TextModel model{nullptr};
    torch::nn::Linear lm_head{nullptr}; // null when tied to the embeddings
};
TORCH_MODULE(CausalLM);

// Mean cross-entropy of each position predicting the next token, positions whose label is -100 left out.
torch::Tensor shiftedCrossEntropy(const torch::Tensor& logits, const torch::Tensor& labels);

} // namespace sightline::trainer
