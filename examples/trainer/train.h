#pragma once
// The training loop of the reference trainer: padded or packed batches under a token budget, the
// naive or the fused kernel path, AdamW (libtorch's per-parameter one, or the fused multi-tensor
// kernel on the fused path), optional bf16 weights, gradient clipping and accumulation, linear
// warm-up then cosine decay, checkpoints that resume where they stopped, a progress line per step,
// and a "train_step" range per step with a "sightline.batch real_tokens=N padded_tokens=M ..."
// range per micro-batch (RecordFunction and NVTX), the convention Sightline reads (docs/metrics.md).
#include "data.h"
#include "device.h"
#include "distributed.h"
#include "model.h"

#include <cmath>
#include <filesystem>
#include <string>

namespace sightline::trainer {

struct TrainOptions {
    int64_t steps = 10;     // optimizer steps in all (a resumed run continues up to this)
    int64_t budget = 8192;  // tokens a padded micro-batch may hold (rows x longest)
    int64_t accumulate = 1; // micro-batches an optimizer step
    double lr = 3e-4, min_lr_ratio = 0.1, weight_decay = 0.1, clip = 1.0;
    int64_t warmup = 10;
    bool bf16 = false;
    std::string device = "cpu";
    uint64_t seed = 0;
    std::filesystem::path save_dir;    // checkpoint here at the end (and resume from it with `resume`)
    std::filesystem::path config_file; // copied into the checkpoint, which transformers then loads
    bool resume = false;
    std::filesystem::path log_jsonl; // one JSON line a step
    double peak_tflops = 0;          // for MFU; 0 = unknown
    KernelPath kernels = KernelPath::Naive;
    GdnRule gdn = GdnRule::Kernels; // the fused path's delta rule
    Fixes fixes;                    // the naive path's single fixes (--fix)
    Batching batching = Batching::Padded;
    bool fixed_rows = false; // packed rows padded at their end to the budget (the same shapes every step)
};

struct StepLog {
    int64_t step = 0;
    double loss = 0, lr = 0, grad_norm = 0, seconds = 0;
    int64_t real_tokens = 0, padded_tokens = 0;
    double mfu = NAN;         // model FLOPs of the real tokens over the step's time and the peak
    double mfu_6n = NAN;      // 6 x parameters x real tokens over the step's time and the peak
    AllocatorStats allocator; // the caching allocator after the step, its peak so far (CUDA only; device.h)
};

// The learning rate at `step` (1-based): linear warm-up to `lr`, then cosine down to lr x min_lr_ratio.
double learningRate(const TrainOptions& o, int64_t step);
// Model FLOPs a token for one forward and backward pass: 6 x parameters (embeddings left out) plus
// the attention layers' 12 x layers x heads x head_dim x sequence length.
double flopsPerToken(const ModelConfig& c, int64_t seq_len);

// Trains `model` on `examples` (batched in order, cycling) and returns the log of every step run.
// With several ranks (`dist`), rank r takes the micro-batches r, r + world, ... of the sequence one
// process would take, so a step's global batch is the one process's with accumulate x world
// micro-batches; gradients are averaged over the ranks, logs count all ranks, rank 0 prints and saves.
std::vector<StepLog> train(CausalLM& model, const ModelConfig& config, const std::vector<Example>& examples,
                           const TrainOptions& options, const Distributed& dist = Distributed{});

// Initial weights as transformers initialises this family: N(0, 0.02) for linear and embedding
// weights, the rest as the modules made them.
void initWeights(CausalLM& model, uint64_t seed);

} // namespace sightline::trainer
