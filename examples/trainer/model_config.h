#pragma once
// The hybrid decoder's configuration, read from a Hugging Face config.json of the Qwen3.5 text
// model (model_type "qwen3_5_text") or of Qwen3-Next ("qwen3_next", layers from
// full_attention_interval).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace sightline::trainer {

enum class LayerType { LinearAttention,
                       FullAttention };

struct ModelConfig {
    std::string model_type;
    int64_t vocab_size = 0;
    int64_t hidden_size = 0;
    int64_t intermediate_size = 0;
    int64_t num_hidden_layers = 0;
    std::vector<LayerType> layer_types;
    // Gated full attention.
    int64_t num_attention_heads = 0;
    int64_t num_key_value_heads = 0;
    int64_t head_dim = 0;
    double partial_rotary_factor = 1.0;
    double rope_theta = 10000.0;
    // Gated DeltaNet.
    int64_t linear_num_key_heads = 0;
    int64_t linear_num_value_heads = 0;
    int64_t linear_key_head_dim = 0;
    int64_t linear_value_head_dim = 0;
    int64_t linear_conv_kernel_dim = 4;
    double rms_norm_eps = 1e-6;
    bool tie_word_embeddings = false;

    // Parameters of the model this config describes (embeddings counted once when tied).
    int64_t parameterCount() const;
    int64_t rotaryDim() const { return int64_t(double(head_dim) * partial_rotary_factor); }
};

// Throws std::runtime_error with one line naming the file and the field on any problem.
ModelConfig loadModelConfig(const std::filesystem::path& path);
ModelConfig parseModelConfig(const std::string& json_text, const std::string& source);

} // namespace sightline::trainer
