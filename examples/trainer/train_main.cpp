// sightline-trainer: trains the hybrid Qwen3.5-style model (docs/trainer.md).
//
//   sightline-trainer --config CONFIG.json [--data FILE.jsonl | --synthetic N] [--steps N] ...
//
// Bad configs, weights or data files get one line on stderr and exit status 1.
#include "device.h"
#include "gdn.h"
#include "train.h"
#include "weights.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

using namespace sightline::trainer;

int main(int argc, char** argv) {
    CLI::App app{"sightline-trainer: the reference trainer (a Qwen3.5-style hybrid model on libtorch)"};
    std::string config_path, data_path, init_path;
    SyntheticSpec synthetic;
    size_t synthetic_examples = 0;
    TrainOptions o;
    std::string save_dir, log_path, write_data;
    app.add_option("--config", config_path, "the model's Hugging Face config.json")->required();
    app.add_option("--data", data_path, "JSONL of pre-tokenized examples (input_ids, labels or loss_mask)");
    app.add_option("--synthetic", synthetic_examples, "train on N synthetic chat-like examples instead");
    app.add_option("--median-len", synthetic.median_len, "synthetic lengths: median (default 1100)");
    app.add_option("--max-len", synthetic.max_len, "synthetic lengths: clipped to this (default 8192)");
    app.add_option("--init", init_path, "start from these weights (safetensors, Hugging Face names) instead of random ones");
    app.add_option("--steps", o.steps, "optimizer steps in all (default 10)");
    app.add_option("--budget", o.budget, "tokens a micro-batch may hold: a padded one rows x longest, a packed row its length (default 8192)");
    std::string kernels = "naive", batching = "padded";
    app.add_option("--kernels", kernels, "naive (libtorch ops, as transformers' torch fallback) or fused (the trainer's CUDA kernels)")
        ->check(CLI::IsMember({"naive", "fused"}));
    app.add_option("--batching", batching, "padded (rectangles) or packed (one row of examples with their boundaries)")
        ->check(CLI::IsMember({"padded", "packed"}));
    std::string fix;
    app.add_option("--fix", fix, "on the naive path, one finding's cure at a time: gdn, elementwise, optimizer (fused kernels), attention (SDPA without cuDNN; a comma list)");
    std::string gdn = "kernels";
    app.add_option("--gdn", gdn, "the fused path's delta rule: kernels (the trainer's CUDA kernels, default) or libtorch (the chunk-parallel rule in libtorch ops)")
        ->check(CLI::IsMember({"kernels", "libtorch"}));
    app.add_flag("--fixed-rows", o.fixed_rows, "pad every packed row at its end to the budget (the same shapes every step)");
    app.add_option("--accumulate", o.accumulate, "micro-batches an optimizer step (default 1)");
    app.add_option("--lr", o.lr, "peak learning rate (default 3e-4)");
    app.add_option("--warmup", o.warmup, "warm-up steps (default 10)");
    app.add_option("--clip", o.clip, "gradient norm clip (default 1.0)");
    app.add_flag("--bf16", o.bf16, "bf16 weights and activations (the GDN rule still runs in fp32)");
    app.add_option("--device", o.device, "cpu (default) or cuda");
    app.add_option("--seed", o.seed, "seed of the weights and the synthetic data (default 0)");
    app.add_option("--save", save_dir, "write a checkpoint here at the end");
    app.add_flag("--resume", o.resume, "continue from the checkpoint in --save");
    app.add_option("--log-jsonl", log_path, "append one JSON line a step");
    app.add_option("--peak-tflops", o.peak_tflops, "the device's dense bf16 peak, for MFU");
    app.add_option("--write-data", write_data, "write the examples as JSONL (input_ids, labels) and exit, for another trainer to read");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    o.kernels = kernels == "fused" ? KernelPath::Fused : KernelPath::Naive;
    o.batching = batching == "packed" ? Batching::Packed : Batching::Padded;
    o.gdn = gdn == "libtorch" ? GdnRule::Libtorch : GdnRule::Kernels;
    try {
        o.fixes = parseFixes(fix);
        if (data_path.empty() == (synthetic_examples == 0)) throw std::runtime_error("give --data FILE or --synthetic N (one of them)");
        if (o.resume && save_dir.empty()) throw std::runtime_error("--resume needs --save DIR (the checkpoint to continue)");
        o.save_dir = save_dir;
        o.config_file = config_path;
        o.log_jsonl = log_path;
        const ModelConfig config = loadModelConfig(config_path);
        Distributed dist = Distributed::fromEnvironment();
        if (dist.active() && o.device == "cuda") o.device = "cuda:" + std::to_string(dist.local_rank); // one GPU a rank
        if (dist.active() && o.device.rfind("cuda", 0) != 0)
            throw std::runtime_error("WORLD_SIZE=" + std::to_string(dist.world) + ": data parallelism runs on GPUs over NCCL (--device cuda)");
        if (write_data.empty()) openDevice(o.device); // a device that cannot be used fails before the model is made
        std::vector<Example> examples;
        if (!data_path.empty()) {
            examples = loadJsonl(data_path);
        } else {
            synthetic.examples = synthetic_examples;
            synthetic.vocab_size = config.vocab_size;
            synthetic.seed = o.seed;
            examples = syntheticExamples(synthetic);
        }
        if (!write_data.empty()) {
            writeJsonl(write_data, examples);
            std::printf("wrote %zu examples to %s\n", examples.size(), write_data.c_str());
            return 0;
        }
        torch::manual_seed(int64_t(o.seed)); // the modules draw some of their initial values (A_log) as they are made
        CausalLM model(config);
        initWeights(model, o.seed);
        if (!init_path.empty()) loadParameters(*model, readSafeTensors(init_path), {"lm_head.weight"});
        if (dist.rank == 0)
            std::printf("model: %.3f M parameters, %lld layers; %zu examples; %d rank%s\n", double(config.parameterCount()) / 1e6,
                        (long long)config.num_hidden_layers, examples.size(), dist.world, dist.world > 1 ? "s" : "");
        dist.connect();
        train(model, config, examples, o, dist);
        return 0;
    } catch (const c10::OutOfMemoryError& e) {
        const std::string what = e.what_without_backtrace();
        std::fprintf(stderr, "sightline-trainer: out of device memory at a budget of %lld tokens a micro-batch (try a smaller --budget): %s\n",
                     (long long)o.budget, what.substr(0, what.find('.') + 1).c_str());
        return 3;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "sightline-trainer: %s\n", e.what());
        return 1;
    }
}
