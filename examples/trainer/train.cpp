#include "train.h"
#include "device.h"
#include "weights.h"

#include <ATen/record_function.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <stdexcept>

#if __has_include(<nvtx3/nvToolsExt.h>)
#include <nvtx3/nvToolsExt.h>
#define SIGHTLINE_HAVE_NVTX 1
#endif

namespace sightline::trainer {

namespace {

// A named range for both PyTorch's profiler and Sightline (RecordFunction) and, unless `nvtx` is
// false, NVTX tools.
class Range {
public:
    explicit Range(const std::string& name, bool nvtx = true) : m_guard(at::RecordScope::USER_SCOPE), m_nvtx(nvtx) {
        if (m_guard.isActive()) m_guard.before(name);
#ifdef SIGHTLINE_HAVE_NVTX
        if (m_nvtx) nvtxRangePushA(name.c_str());
#endif
    }
    ~Range() {
#ifdef SIGHTLINE_HAVE_NVTX
        if (m_nvtx) nvtxRangePop();
#endif
    }

private:
    at::RecordFunction m_guard;
    bool m_nvtx;
};

torch::Tensor tensorOf(const std::vector<int32_t>& v, int64_t rows, int64_t cols, const torch::Device& d) {
    return torch::from_blob(const_cast<int32_t*>(v.data()), {rows, cols}, torch::kInt32).to(torch::kInt64).to(d);
}

// Model FLOPs of a padded batch's real tokens: each row counts its own length (attention grows
// with it), its padding counts nothing.
double realFlops(const ModelConfig& c, const std::vector<int64_t>& row_lengths) {
    double flops = 0;
    for (int64_t n : row_lengths) flops += flopsPerToken(c, n) * double(n);
    return flops;
}

double median(std::vector<double> v) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// One line after the run, as a JSON object that scripts read: the steady state (the first two
// steps, which warm up the allocator and the kernels, left out when there are more) as totals, real
// and padded tokens over seconds (per-step rates swing with each batch's shape), and the median step.
void printSummary(const std::vector<StepLog>& log, const TrainOptions& o) {
    if (log.empty()) return;
    const size_t skip = log.size() > 3 ? 2 : 0;
    std::vector<double> seconds;
    double real = 0, padded = 0, total_s = 0, mfu_s = 0; // mfu_s: each step's MFU times its seconds
    int64_t peak = 0;
    for (size_t i = skip; i < log.size(); ++i) {
        real += double(log[i].real_tokens);
        padded += double(log[i].padded_tokens);
        total_s += log[i].seconds;
        seconds.push_back(log[i].seconds);
        mfu_s += log[i].mfu * log[i].seconds;
        peak = std::max(peak, log[i].peak_bytes);
    }
    nlohmann::json j{{"steps_measured", log.size() - skip},
                     {"budget", o.budget},
                     {"median_step_s", median(seconds)},
                     {"real_tokens_per_s", real / total_s},
                     {"padded_tokens_per_s", padded / total_s},
                     {"padding_efficiency", real / padded},
                     {"peak_memory_gib", double(peak) / double(1ll << 30)}};
    if (o.peak_tflops > 0) j["mfu"] = mfu_s / total_s; // FLOPs over time
    std::printf("summary: %s\n", j.dump().c_str());
}

} // namespace

double learningRate(const TrainOptions& o, int64_t step) {
    if (o.warmup > 0 && step <= o.warmup) return o.lr * double(step) / double(o.warmup);
    const double span = double(std::max<int64_t>(1, o.steps - o.warmup));
    const double progress = std::min(1.0, double(step - o.warmup) / span);
    const double min_lr = o.lr * o.min_lr_ratio;
    return min_lr + 0.5 * (o.lr - min_lr) * (1.0 + std::cos(M_PI * progress));
}

double flopsPerToken(const ModelConfig& c, int64_t seq_len) {
    const double embeddings = double(c.vocab_size * c.hidden_size) * (c.tie_word_embeddings ? 1 : 2);
    double attention_layers = 0;
    for (LayerType t : c.layer_types) attention_layers += t == LayerType::FullAttention ? 1 : 0;
    return 6.0 * (double(c.parameterCount()) - embeddings) + 6.0 * double(c.vocab_size * c.hidden_size) +
           12.0 * attention_layers * double(c.num_attention_heads * c.head_dim) * double(seq_len);
}

void initWeights(CausalLM& model, uint64_t seed) {
    torch::manual_seed(seed);
    torch::NoGradGuard no_grad;
    for (auto& p : model->named_parameters()) {
        const std::string& n = p.key();
        const bool matrix = n.ends_with("proj.weight") || n.ends_with("embed_tokens.weight") || n == "lm_head.weight";
        if (matrix) p.value().normal_(0.0, 0.02);
    }
}

std::vector<StepLog> train(CausalLM& model, const ModelConfig& config, const std::vector<Example>& examples,
                           const TrainOptions& o, const Distributed& dist) {
    if (examples.empty()) throw std::runtime_error("no training examples");
    const torch::Device device = openDevice(o.device);
    const bool lead = dist.rank == 0;
    BatchingStats stats;
    const std::vector<PaddedBatch> batches = padBatches(examples, o.budget, 0, &stats);
    if (o.bf16) model->to(torch::kBFloat16);
    model->to(device);
    peakDeviceBytes(device, true);
    torch::optim::AdamW optimizer(model->parameters(),
                                  torch::optim::AdamWOptions(o.lr).betas({0.9, 0.95}).weight_decay(o.weight_decay));
    int64_t first = 1;
    const auto ckpt = o.save_dir;
    if (o.resume) {
        if (!std::filesystem::exists(ckpt / "trainer_state.json"))
            throw std::runtime_error(ckpt.string() + ": no checkpoint to resume from (trainer_state.json missing)");
        std::ifstream in(ckpt / "trainer_state.json");
        first = nlohmann::json::parse(in).at("step").get<int64_t>() + 1;
        loadParameters(*model, readSafeTensors(ckpt / "model.safetensors"), {"lm_head.weight"});
        torch::load(optimizer, (ckpt / "optimizer.pt").string());
    }
    std::unique_ptr<GradientSync> sync;
    if (dist.active()) sync = std::make_unique<GradientSync>(model->parameters(), dist.group, dist.world);
    std::ofstream log;
    if (!o.log_jsonl.empty() && lead) log.open(o.log_jsonl, std::ios::app);
    std::vector<StepLog> out;
    const int64_t per_step = o.accumulate * dist.world; // micro-batches of all ranks a step
    for (int64_t step = first; step <= o.steps; ++step) {
        const auto t0 = std::chrono::steady_clock::now();
        StepLog s;
        double flops = 0;
        s.step = step;
        s.lr = learningRate(o, step);
        for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(s.lr);
        {
            Range step_range("train_step");
            double loss_sum = 0;
            for (int64_t m = 0; m < o.accumulate; ++m) {
                const PaddedBatch& b = batches[size_t((step - 1) * per_step + m * dist.world + dist.rank) % batches.size()];
                const std::vector<int64_t> lengths = b.rowLengths();
                const int64_t real = std::accumulate(lengths.begin(), lengths.end(), int64_t(0));
                Range batch_range("sightline.batch real_tokens=" + std::to_string(real) +
                                  " padded_tokens=" + std::to_string(b.paddedTokens()) + " sequences=" + std::to_string(b.rows));
                const torch::Tensor ids = tensorOf(b.input_ids, b.rows, b.columns, device);
                const torch::Tensor labels = tensorOf(b.labels, b.rows, b.columns, device);
                const torch::Tensor mask = torch::from_blob(const_cast<uint8_t*>(b.attention_mask.data()), {b.rows, b.columns},
                                                            torch::kUInt8).to(torch::kInt64).to(device);
                const torch::Tensor loss = shiftedCrossEntropy(model->forward(ids, mask), labels) / double(o.accumulate);
                if (sync && m == o.accumulate - 1) sync->arm(); // the step's last backward: all-reduce as it goes
                loss.backward();
                loss_sum += loss.item<double>();
                s.real_tokens += real;
                s.padded_tokens += b.paddedTokens();
                flops += realFlops(config, lengths);
            }
            if (sync) sync->finish();
            s.loss = loss_sum;
            s.grad_norm = torch::nn::utils::clip_grad_norm_(model->parameters(), o.clip);
            {
                // Named as PyTorch's optimizers name their step, so that the optimizer rule finds it;
                // no NVTX range (one of the same name would count the step's GPU time twice).
                Range optimizer_range("Optimizer.step#AdamW.step", false);
                optimizer.step();
            }
            if (sync) sync->releaseGradients();
            optimizer.zero_grad(true);
        }
        if (dist.active()) { // the step as all ranks saw it: mean loss, summed tokens and FLOPs
            torch::Tensor v = torch::tensor({s.loss, double(s.real_tokens), double(s.padded_tokens), flops}, torch::kFloat64);
            dist.sumAcrossRanks(v, device);
            s.loss = v[0].item<double>() / dist.world;
            s.real_tokens = int64_t(v[1].item<double>());
            s.padded_tokens = int64_t(v[2].item<double>());
            flops = v[3].item<double>();
        }
        if (device.is_cuda()) torch::cuda::synchronize(device.has_index() ? device.index() : -1);
        s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        s.mfu = o.peak_tflops > 0 ? flops / s.seconds / (o.peak_tflops * 1e12 * dist.world) : NAN;
        s.peak_bytes = peakDeviceBytes(device, false);
        out.push_back(s);
        if (!lead) continue;
        char mfu_text[32] = "n/a", memory_text[48] = "";
        if (!std::isnan(s.mfu)) std::snprintf(mfu_text, sizeof mfu_text, "%.1f%%", 100.0 * s.mfu);
        if (s.peak_bytes) std::snprintf(memory_text, sizeof memory_text, "  peak memory %.1f GiB", double(s.peak_bytes) / double(1ll << 30));
        std::printf("step %lld/%lld  loss %.4f  lr %.2e  |g| %.3f  tokens/s %.0f real, %.0f padded  padding efficiency %.1f%%  MFU %s%s\n",
                    (long long)step, (long long)o.steps, s.loss, s.lr, s.grad_norm, double(s.real_tokens) / s.seconds,
                    double(s.padded_tokens) / s.seconds, 100.0 * double(s.real_tokens) / double(s.padded_tokens), mfu_text, memory_text);
        std::fflush(stdout);
        if (log.is_open())
            log << nlohmann::json{{"step", s.step},         {"loss", s.loss},
                                  {"lr", s.lr},             {"grad_norm", s.grad_norm},
                                  {"seconds", s.seconds},   {"real_tokens", s.real_tokens},
                                  {"padded_tokens", s.padded_tokens}, {"peak_bytes", s.peak_bytes}}
                       .dump()
                << '\n';
    }
    if (lead) printSummary(out, o);
    if (!ckpt.empty() && lead) {
        std::filesystem::create_directories(ckpt);
        // A directory transformers' from_pretrained loads: config.json and model.safetensors.
        writeSafeTensors(ckpt / "model.safetensors", parameterTensors(*model), {{"format", "pt"}});
        if (!o.config_file.empty())
            std::filesystem::copy_file(o.config_file, ckpt / "config.json", std::filesystem::copy_options::overwrite_existing);
        torch::save(optimizer, (ckpt / "optimizer.pt").string());
        std::ofstream(ckpt / "trainer_state.json") << nlohmann::json{{"step", o.steps}}.dump() << '\n';
    }
    return out;
}

} // namespace sightline::trainer
