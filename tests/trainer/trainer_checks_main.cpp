// sightline-trainer-checks: the reference trainer's numerical checks (docs/trainer.md).
//
//   sightline-trainer-checks CONFIG.json [--device cpu|cuda] [--only kernels|gdn|gdn-kernels|gdn-bench|adamw-bench|gdn-sanitize|packing|optimizer]
//
// On the CPU: the chunk-parallel delta rule and the delta rule's kernels (emulated) against the naive one, and packed against padded
// batches through the whole model (naive path, fp32). On a GPU also the fused kernels against
// libtorch references and the fused path through the model (bf16); the fused AdamW on both. One line a check; exit status
// 1 when any fails, 77 when a GPU was asked for and none is there.
#include "check_util.h"
#include "device.h"
#include "fused_ops.h"
#include "model_config.h"

#include <cstring>
#include <exception>
#include <stdexcept>

namespace sightline::trainer::checks {
void runKernelChecks(Results& r, const torch::Device& d);
void runSharedLinearChecks(Results& r, const torch::Device& d);
void runAddNormChecks(Results& r, const torch::Device& d);
void runGdnChecks(Results& r, const torch::Device& d);
void runGdnKernelChecks(Results& r, const torch::Device& d);
void runGdnBench(const torch::Device& d);
void runAdamwBench(const ModelConfig& config, const torch::Device& d);
void runGdnSanitizeCase(Results& r, const torch::Device& d);
void runPackingChecks(Results& r, const ModelConfig& config, const torch::Device& d);
void runOptimizerChecks(Results& r, const torch::Device& d);
} // namespace sightline::trainer::checks

using namespace sightline::trainer;

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: sightline-trainer-checks CONFIG.json [--device cpu|cuda] [--only kernels|gdn|gdn-kernels|gdn-bench|adamw-bench|gdn-sanitize|packing|optimizer]\n");
        return 2;
    }
    std::string device_name = "cpu", only;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--device")) device_name = argv[i + 1];
        else if (!std::strcmp(argv[i], "--only")) only = argv[i + 1];
    }
    try {
        torch::Device device(torch::kCPU);
        try {
            device = openDevice(device_name);
        } catch (const std::exception& e) {
            if (device_name.rfind("cuda", 0) != 0) throw;
            std::printf("skipped: %s\n", e.what());
            return 77;
        }
        // The CUDA implementations of the trainer's operators (the delta rule's kernels among them)
        // live in the kernels plugin: loaded before any check calls them.
        if (device.is_cuda()) fused::loadKernels();
        const ModelConfig config = loadModelConfig(argv[1]);
        checks::Results r;
        if (device.is_cuda() && (only.empty() || only == "kernels")) checks::runKernelChecks(r, device);
        if (only.empty() || only == "kernels") checks::runSharedLinearChecks(r, device);
        if (only.empty() || only == "kernels") checks::runAddNormChecks(r, device);
        if (only.empty() || only == "gdn") checks::runGdnChecks(r, device);
        if (only.empty() || only == "gdn-kernels") checks::runGdnKernelChecks(r, device);
        if (only == "gdn-sanitize") checks::runGdnSanitizeCase(r, device);
        if (only == "gdn-bench") {
            if (!device.is_cuda()) throw std::runtime_error("--only gdn-bench needs --device cuda");
            checks::runGdnBench(device);
            return 0;
        }
        if (only == "adamw-bench") {
            if (!device.is_cuda()) throw std::runtime_error("--only adamw-bench needs --device cuda");
            checks::runAdamwBench(config, device);
            return 0;
        }
        if (only.empty() || only == "packing") checks::runPackingChecks(r, config, device);
        if (only.empty() || only == "optimizer") checks::runOptimizerChecks(r, device);
        std::printf("%d of %d checks passed\n", r.total() - r.failures(), r.total());
        return r.failures() ? 1 : 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "sightline-trainer-checks: %s\n", e.what());
        return 1;
    }
}
