#include "model_config.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace sightline::trainer {

namespace {

[[noreturn]] void fail(const std::string& source, const std::string& why) {
    throw std::runtime_error(source + ": " + why);
}

int64_t positive(const nlohmann::json& j, const char* key, const std::string& source) {
    if (!j.contains(key)) fail(source, std::string("missing \"") + key + "\"");
    if (!j[key].is_number_integer() || j[key].get<int64_t>() <= 0)
        fail(source, std::string("\"") + key + "\" must be a positive integer");
    return j[key].get<int64_t>();
}

double number(const nlohmann::json& j, const char* key, double fallback, const std::string& source) {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    if (!j[key].is_number()) fail(source, std::string("\"") + key + "\" must be a number");
    return j[key].get<double>();
}

} // namespace

int64_t ModelConfig::parameterCount() const {
    const int64_t h = hidden_size;
    int64_t n = vocab_size * h * (tie_word_embeddings ? 1 : 2) + h; // embeddings, head, final norm
    const int64_t mlp = 3 * h * intermediate_size + 2 * h;          // SwiGLU + two layer norms
    const int64_t q = num_attention_heads * head_dim, kv = num_key_value_heads * head_dim;
    const int64_t attn = h * (2 * q) + 2 * h * kv + q * h + 2 * head_dim; // q (with gate), k, v, o, q/k norms
    const int64_t key = linear_num_key_heads * linear_key_head_dim, value = linear_num_value_heads * linear_value_head_dim;
    const int64_t conv_dim = 2 * key + value;
    const int64_t gdn = h * (2 * key + 2 * value) + h * 2 * linear_num_value_heads // qkvz, b and a projections
        + conv_dim * linear_conv_kernel_dim                                        // depthwise conv
        + 2 * linear_num_value_heads                                               // A_log, dt_bias
        + linear_value_head_dim                                                    // gated norm
        + value * h;                                                               // out projection
    for (LayerType t : layer_types) n += mlp + (t == LayerType::FullAttention ? attn : gdn);
    return n;
}

ModelConfig parseModelConfig(const std::string& text, const std::string& source) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        fail(source, std::string("not valid JSON (") + e.what() + ")");
    }
    if (!j.is_object()) fail(source, "not a model config (expected a JSON object)");
    if (j.contains("text_config") && j["text_config"].is_object()) j = j["text_config"]; // multimodal wrapper
    ModelConfig c;
    c.model_type = j.value("model_type", "");
    if (c.model_type != "qwen3_5_text" && c.model_type != "qwen3_next" && c.model_type != "qwen3_5")
        fail(source, "model_type \"" + c.model_type + "\" is not a Qwen3.5 / Qwen3-Next hybrid model");
    c.vocab_size = positive(j, "vocab_size", source);
    c.hidden_size = positive(j, "hidden_size", source);
    c.intermediate_size = positive(j, "intermediate_size", source);
    c.num_hidden_layers = positive(j, "num_hidden_layers", source);
    c.num_attention_heads = positive(j, "num_attention_heads", source);
    c.num_key_value_heads = positive(j, "num_key_value_heads", source);
    c.head_dim = j.contains("head_dim") ? positive(j, "head_dim", source) : c.hidden_size / c.num_attention_heads;
    c.linear_num_key_heads = positive(j, "linear_num_key_heads", source);
    c.linear_num_value_heads = positive(j, "linear_num_value_heads", source);
    c.linear_key_head_dim = positive(j, "linear_key_head_dim", source);
    c.linear_value_head_dim = positive(j, "linear_value_head_dim", source);
    c.linear_conv_kernel_dim = j.contains("linear_conv_kernel_dim") ? positive(j, "linear_conv_kernel_dim", source) : 4;
    c.rms_norm_eps = number(j, "rms_norm_eps", 1e-6, source);
    c.partial_rotary_factor = number(j, "partial_rotary_factor", 1.0, source);
    c.rope_theta = number(j, "rope_theta", 10000.0, source);
    if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) { // newer transformers layout
        c.rope_theta = number(j["rope_parameters"], "rope_theta", c.rope_theta, source);
        c.partial_rotary_factor = number(j["rope_parameters"], "partial_rotary_factor", c.partial_rotary_factor, source);
    }
    c.tie_word_embeddings = j.value("tie_word_embeddings", false);
    if (j.contains("layer_types")) {
        if (!j["layer_types"].is_array()) fail(source, "\"layer_types\" must be a list");
        for (const auto& t : j["layer_types"]) {
            const std::string s = t.is_string() ? t.get<std::string>() : "";
            if (s == "linear_attention") c.layer_types.push_back(LayerType::LinearAttention);
            else if (s == "full_attention") c.layer_types.push_back(LayerType::FullAttention);
            else fail(source, "unknown layer type \"" + s + "\" in \"layer_types\"");
        }
    } else {
        // Qwen3-Next: every full_attention_interval-th layer is full attention.
        const int64_t every = j.contains("full_attention_interval") ? positive(j, "full_attention_interval", source) : 4;
        for (int64_t i = 0; i < c.num_hidden_layers; ++i)
            c.layer_types.push_back((i + 1) % every == 0 ? LayerType::FullAttention : LayerType::LinearAttention);
    }
    if (int64_t(c.layer_types.size()) != c.num_hidden_layers)
        fail(source, "\"layer_types\" has " + std::to_string(c.layer_types.size()) + " entries for " + std::to_string(c.num_hidden_layers) + " layers");
    if (c.num_attention_heads % c.num_key_value_heads != 0)
        fail(source, "num_attention_heads must be a multiple of num_key_value_heads");
    if (c.linear_num_value_heads % c.linear_num_key_heads != 0)
        fail(source, "linear_num_value_heads must be a multiple of linear_num_key_heads");
    if (c.partial_rotary_factor <= 0 || c.partial_rotary_factor > 1 || c.rotaryDim() % 2 != 0)
        fail(source, "partial_rotary_factor must give an even rotary dimension within head_dim");
    return c;
}

ModelConfig loadModelConfig(const std::filesystem::path& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error(path.string() + ": cannot open");
    std::stringstream ss;
    ss << in.rdbuf();
    return parseModelConfig(ss.str(), path.string());
}

} // namespace sightline::trainer
