#include "train.h"
#include "device.h"
#include "gdn.h"
#include "optimizer.h"
#include "weights.h"

#include <ATen/record_function.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <optional>
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

// Model FLOPs of a batch's real tokens: each example counts its own length (attention grows with
// it), padding counts nothing.
double realFlops(const ModelConfig& c, const std::vector<int64_t>& lengths) {
    double flops = 0;
    for (int64_t n : lengths) flops += flopsPerToken(c, n) * double(n);
    return flops;
}

// The run's micro-batches, padded or packed, and what the loop reads of each.
class Batches {
public:
    Batches(const std::vector<Example>& examples, const TrainOptions& o) {
        if (o.batching == Batching::Packed) m_packed = packBatches(examples, o.budget, 0, o.fixed_rows, &m_stats);
        else m_padded = padBatches(examples, o.budget, 0, &m_stats);
    }
    size_t size() const { return m_packed.empty() ? m_padded.size() : m_packed.size(); }
    ModelInput input(size_t i, const torch::Device& d) const { return m_packed.empty() ? modelInput(m_padded[i], d) : modelInput(m_packed[i], d); }
    int64_t real(size_t i) const { return m_packed.empty() ? m_padded[i].realTokens() : m_packed[i].realTokens(); }
    int64_t padded(size_t i) const { return m_packed.empty() ? m_padded[i].paddedTokens() : m_packed[i].paddedTokens(); }
    // Each example's tokens.
    std::vector<int64_t> lengths(size_t i) const { return m_packed.empty() ? m_padded[i].rowLengths() : m_packed[i].exampleLengths(); }
    // The annotation Sightline reads (docs/metrics.md): tokens, sequences, and for packed rows that
    // every layer is given the boundaries; reference_trainer=1 names the stack for the fix texts.
    std::string annotation(size_t i) const {
        const size_t sequences = m_packed.empty() ? m_padded[i].example_index.size() : m_packed[i].example_index.size();
        return "sightline.batch real_tokens=" + std::to_string(real(i)) + " padded_tokens=" + std::to_string(padded(i)) +
            " sequences=" + std::to_string(sequences) + (m_packed.empty() ? "" : " packed=1 cu_seqlens=1") + " reference_trainer=1";
    }

private:
    BatchingStats m_stats;
    std::vector<PaddedBatch> m_padded;
    std::vector<PackedBatch> m_packed;
};

// The optimizer of either path behind one face: libtorch's AdamW (a kernel or more per parameter,
// the gradient norm read back to the host) or the fused multi-tensor one (all on the device).
class Optimizer {
public:
    Optimizer(CausalLM& model, const TrainOptions& o) : m_model(model), m_fused(o.kernels == KernelPath::Fused || o.fixes.optimizer) {
        if (m_fused) m_adamw = std::make_unique<FusedAdamW>(model->parameters(), 0.9, 0.95, o.weight_decay);
        else m_torch = std::make_unique<torch::optim::AdamW>(
                 model->parameters(), torch::optim::AdamWOptions(o.lr).betas({0.9, 0.95}).weight_decay(o.weight_decay));
    }
    torch::Tensor clipGradNorm(double max_norm) {
        if (m_fused) return m_adamw->clipGradNorm(max_norm);
        return torch::tensor(torch::nn::utils::clip_grad_norm_(m_model->parameters(), max_norm));
    }
    void step(double lr) {
        if (m_fused) return m_adamw->step(lr);
        for (auto& group : m_torch->param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
        m_torch->step();
    }
    void zeroGrad() { m_fused ? m_adamw->zeroGrad() : m_torch->zero_grad(true); }
    std::filesystem::path file(const std::filesystem::path& dir) const { return dir / (m_fused ? "optimizer_fused.pt" : "optimizer.pt"); }
    void save(const std::filesystem::path& dir) const { m_fused ? m_adamw->save(file(dir)) : torch::save(*m_torch, file(dir).string()); }
    void load(const std::filesystem::path& dir) {
        if (!std::filesystem::exists(file(dir)))
            throw std::runtime_error(file(dir).string() + ": missing (was the checkpoint written with the other --kernels path?)");
        m_fused ? m_adamw->load(file(dir)) : torch::load(*m_torch, file(dir).string());
    }

private:
    CausalLM& m_model;
    bool m_fused;
    std::unique_ptr<FusedAdamW> m_adamw;
    std::unique_ptr<torch::optim::AdamW> m_torch;
};

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
    double real = 0, padded = 0, total_s = 0, mfu_s = 0, mfu_6n_s = 0; // mfu_s: each step's MFU times its seconds
    int64_t peak = 0;
    for (size_t i = skip; i < log.size(); ++i) {
        real += double(log[i].real_tokens);
        padded += double(log[i].padded_tokens);
        total_s += log[i].seconds;
        seconds.push_back(log[i].seconds);
        mfu_s += log[i].mfu * log[i].seconds;
        mfu_6n_s += log[i].mfu_6n * log[i].seconds;
        peak = std::max(peak, log[i].allocator.peak_bytes);
    }
    nlohmann::json j{{"steps_measured", log.size() - skip},
                     {"budget", o.budget},
                     {"kernels", toString(o.kernels)},
                     {"gdn", toString(o.gdn)},
                     {"fixes", toString(o.fixes)},
                     {"batching", toString(o.batching)},
                     {"median_step_s", median(seconds)},
                     {"real_tokens_per_s", real / total_s},
                     {"padded_tokens_per_s", padded / total_s},
                     {"padding_efficiency", real / padded},
                     {"peak_memory_gib", double(peak) / double(1ll << 30)}};
    if (o.peak_tflops > 0) { // FLOPs over time
        j["mfu"] = mfu_s / total_s;
        j["mfu_6n"] = mfu_6n_s / total_s;
    }
    std::printf("summary: %s\n", j.dump().c_str());
}

void printStep(const StepLog& s, const TrainOptions& o) {
    char mfu_text[32] = "n/a", memory_text[48] = "";
    if (!std::isnan(s.mfu)) std::snprintf(mfu_text, sizeof mfu_text, "%.1f%%", 100.0 * s.mfu);
    if (const int64_t peak = s.allocator.peak_bytes)
        std::snprintf(memory_text, sizeof memory_text, "  peak memory %.1f GiB", double(peak) / double(1ll << 30));
    std::printf("step %lld/%lld  loss %.4f  lr %.2e  |g| %.3f  tokens/s %.0f real, %.0f padded  padding efficiency %.1f%%  MFU %s%s\n",
                (long long)s.step, (long long)o.steps, s.loss, s.lr, s.grad_norm, double(s.real_tokens) / s.seconds,
                double(s.padded_tokens) / s.seconds, 100.0 * double(s.real_tokens) / double(s.padded_tokens), mfu_text, memory_text);
    std::fflush(stdout);
}

// The allocator's counts are the process's so far: a step's own are the difference from the step before.
nlohmann::json stepJson(const StepLog& s) {
    const AllocatorStats& a = s.allocator;
    return {{"step", s.step}, {"loss", s.loss}, {"lr", s.lr}, {"grad_norm", s.grad_norm}, {"seconds", s.seconds}, {"real_tokens", s.real_tokens}, {"padded_tokens", s.padded_tokens}, {"peak_bytes", a.peak_bytes}, {"peak_reserved_bytes", a.peak_reserved_bytes}, {"device_allocs", a.device_allocs}, {"device_frees", a.device_frees}, {"alloc_retries", a.alloc_retries}};
}

// Checkpoint: a directory transformers' from_pretrained loads (config.json, model.safetensors),
// the optimizer's state and the step reached.
void saveCheckpoint(CausalLM& model, const Optimizer& optimizer, const TrainOptions& o) {
    const auto& dir = o.save_dir;
    std::filesystem::create_directories(dir);
    writeSafeTensors(dir / "model.safetensors", parameterTensors(*model), {{"format", "pt"}});
    if (!o.config_file.empty())
        std::filesystem::copy_file(o.config_file, dir / "config.json", std::filesystem::copy_options::overwrite_existing);
    optimizer.save(dir);
    std::ofstream(dir / "trainer_state.json") << nlohmann::json{{"step", o.steps}}.dump() << '\n';
}

// Returns the first step to run.
int64_t resumeCheckpoint(CausalLM& model, Optimizer& optimizer, const TrainOptions& o) {
    const auto& dir = o.save_dir;
    if (!std::filesystem::exists(dir / "trainer_state.json"))
        throw std::runtime_error(dir.string() + ": no checkpoint to resume from (trainer_state.json missing)");
    std::ifstream in(dir / "trainer_state.json");
    const int64_t done = nlohmann::json::parse(in).at("step").get<int64_t>();
    loadParameters(*model, readSafeTensors(dir / "model.safetensors"), {"lm_head.weight"});
    optimizer.load(dir);
    return done + 1;
}

// SIGHTLINE_TRAINER_CHECK_FINITE=1: after each optimizer step, the parameters and gradients that
// hold a NaN or an infinity, by name (a diagnosis aid: it waits for the device).
void reportNonFinite(CausalLM& model) {
    for (const auto& p : model->named_parameters()) {
        const torch::Tensor& g = p.value().grad();
        const bool param_bad = !torch::isfinite(p.value()).all().item<bool>();
        const bool grad_bad = g.defined() && !torch::isfinite(g).all().item<bool>();
        if (param_bad || grad_bad)
            std::fprintf(stderr, "non-finite after the step: %s%s%s\n", p.key().c_str(), param_bad ? " (parameter)" : "", grad_bad ? " (gradient)" : "");
    }
}

// One run of the loop, its state in one place.
struct Loop {
    CausalLM& model;
    const ModelConfig& config;
    const TrainOptions& o;
    const Distributed& dist;
    const Batches& batches;
    Optimizer& optimizer;
    torch::Device device;
    GradientSync* sync;
    bool m_check_finite = std::getenv("SIGHTLINE_TRAINER_CHECK_FINITE") != nullptr;

    // The step's micro-batches (on this rank), forward and backward; returns the summed loss on the
    // device (read back once, at the step's end) and fills the step's token and FLOP counts.
    torch::Tensor microBatches(int64_t step, StepLog& s, double& flops) {
        const int64_t per_step = o.accumulate * dist.world; // micro-batches of all ranks a step
        torch::Tensor loss_sum = torch::zeros({}, torch::dtype(torch::kFloat32).device(device));
        for (int64_t m = 0; m < o.accumulate; ++m) {
            const size_t i = size_t((step - 1) * per_step + m * dist.world + dist.rank) % batches.size();
            Range batch_range(batches.annotation(i));
            const ModelInput in = batches.input(i, device);
            const torch::Tensor loss = model->loss(in, o.kernels) / double(o.accumulate);
            if (sync && m == o.accumulate - 1) sync->arm(); // the step's last backward: all-reduce as it goes
            loss.backward();
            loss_sum += loss.detach().to(torch::kFloat32);
            s.real_tokens += batches.real(i);
            s.padded_tokens += batches.padded(i);
            flops += realFlops(config, batches.lengths(i));
        }
        return loss_sum;
    }

    // A step whose work is queued: what it logs once the device has done it (its loss and gradient
    // norm copied to the host behind the step's work).
    struct Queued {
        StepLog s;
        torch::Tensor loss, grad_norm;
        double flops = 0;
        QueueMark done; // after the step's last work
    };

    // Queues the step's forward, backward and optimizer step without waiting for the device.
    Queued queue(int64_t step) {
        StepLog s;
        double flops = 0;
        s.step = step;
        s.lr = learningRate(o, step);
        Range step_range("train_step");
        torch::Tensor loss = microBatches(step, s, flops);
        if (sync) sync->finish();
        torch::Tensor grad_norm = optimizer.clipGradNorm(o.clip);
        {
            // Named as PyTorch's optimizers name their step, so that the optimizer rule finds it;
            // no NVTX range (one of the same name would count the step's GPU time twice).
            Range optimizer_range("Optimizer.step#AdamW.step", false);
            optimizer.step(s.lr);
        }
        if (sync) sync->releaseGradients();
        if (m_check_finite) reportNonFinite(model);
        optimizer.zeroGrad();
        torch::Tensor loss_host = toHostQueued(loss), norm_host = toHostQueued(grad_norm);
        return {s, loss_host, norm_host, flops, QueueMark(device)};
    }

    // Waits for a queued step and fills its log; its time runs from the end of the step before
    // (`since`, then the step's own end) to its own end, on the GPU's clock where there is one.
    StepLog finish(Queued q, QueueMark& since) {
        StepLog& s = q.s;
        q.done.wait();
        s.loss = q.loss.item<double>();
        s.grad_norm = q.grad_norm.item<double>();
        double flops = q.flops;
        if (dist.active()) { // the step as all ranks saw it: mean loss, summed tokens and FLOPs
            torch::Tensor v = torch::tensor({s.loss, double(s.real_tokens), double(s.padded_tokens), flops}, torch::kFloat64);
            dist.sumAcrossRanks(v, device);
            s.loss = v[0].item<double>() / dist.world;
            s.real_tokens = int64_t(v[1].item<double>());
            s.padded_tokens = int64_t(v[2].item<double>());
            flops = v[3].item<double>();
        }
        s.seconds = q.done.secondsAfter(since);
        since = q.done;
        const double peak = o.peak_tflops * 1e12 * dist.world;
        s.mfu = o.peak_tflops > 0 ? flops / s.seconds / peak : NAN;
        s.mfu_6n = o.peak_tflops > 0 ? 6.0 * double(config.parameterCount()) * double(s.real_tokens) / s.seconds / peak : NAN;
        s.allocator = allocatorStats(device, false);
        return s;
    }

    // Whether the host queues a step before the one before it is done: on a single GPU, so that no
    // step waits for the device before it is queued (a step's loss is read once the next is queued).
    // Until session 29 that read was `.item()` on the device tensors, a wait for the whole stream,
    // the next step's work included: the host queued each step on an idle GPU, which ran dry while
    // the host set up the step's first products (11.9 ms a step of 473 in session 28's profile).
    // With several ranks each step ends in their all-reduced log.
    bool ahead() const { return device.is_cuda() && !dist.active(); }
};

// The fused path on the GPU takes bf16 (flash attention does); on the CPU it runs the operators'
// reference implementations, for tests.
void checkOptions(const TrainOptions& o, const torch::Device& device) {
    if (o.kernels == KernelPath::Fused && device.is_cuda() && !o.bf16)
        throw std::runtime_error("--kernels fused on a GPU needs --bf16 (flash attention takes bf16)");
    if (o.kernels == KernelPath::Fused && o.fixes.any())
        throw std::runtime_error("--fix is for the naive path (--kernels fused has every fix)");
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
    checkOptions(o, device);
    const bool lead = dist.rank == 0;
    const Batches batches(examples, o);
    if (o.bf16) model->to(torch::kBFloat16);
    model->to(device);
    model->model->gdn_rule = o.gdn;
    model->model->fixes = o.fixes;
    const FixScope fix_scope(o.fixes); // --fix attention: SDPA without cuDNN (process-wide)
    allocatorStats(device, true);
    Optimizer optimizer(model, o);
    const int64_t first = o.resume ? resumeCheckpoint(model, optimizer, o) : 1;
    std::unique_ptr<GradientSync> sync;
    if (dist.active()) sync = std::make_unique<GradientSync>(model->parameters(), dist.group, dist.world);
    std::ofstream log;
    if (!o.log_jsonl.empty() && lead) log.open(o.log_jsonl, std::ios::app);
    if (lead)
        std::printf("kernels: %s%s%s%s; batching: %s%s, %zu micro-batches of at most %lld tokens\n", toString(o.kernels),
                    o.kernels == KernelPath::Fused || o.fixes.gdn ? ", delta rule " : "",
                    o.kernels == KernelPath::Fused || o.fixes.gdn ? toString(o.gdn) : "",
                    o.fixes.any() ? ("; fixes: " + toString(o.fixes)).c_str() : "",
                    toString(o.batching),
                    o.batching == Batching::Packed && o.fixed_rows ? " (rows padded to the budget)" : "", batches.size(),
                    (long long)o.budget);
    Loop loop{model, config, o, dist, batches, optimizer, device, sync.get()};
    std::vector<StepLog> out;
    std::optional<Loop::Queued> pending;
    QueueMark since(device); // where the first step's time starts
    const auto finish = [&] {
        out.push_back(loop.finish(std::move(*pending), since));
        pending.reset();
        if (!lead) return;
        printStep(out.back(), o);
        if (log.is_open()) log << stepJson(out.back()).dump() << '\n';
    };
    for (int64_t step = first; step <= o.steps; ++step) {
        Loop::Queued next = loop.queue(step);
        if (pending) finish();
        pending = std::move(next);
        if (!loop.ahead()) finish();
    }
    if (pending) finish();
    if (lead) printSummary(out, o);
    if (!o.save_dir.empty() && lead) saveCheckpoint(model, optimizer, o);
    return out;
}

} // namespace sightline::trainer
