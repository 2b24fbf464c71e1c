#pragma once
// Synthetic training steps for rule tests: a host timeline that launches kernels onto one GPU
// stream, as a PyTorch job does, with the timing of each launch, kernel, sync and data wait
// known exactly. Each step is a ProfilerStep#N range; a job of three steps has two steady ones.
// By default each step ends with a cudaDeviceSynchronize (the host waits for the GPU).
#include "sightline/trace.h"

#include <functional>
#include <string>
#include <vector>

namespace sightline::test {

class SyntheticTraining {
public:
    // Kernels launched by an op: `count` launches of `kernel` each running `dur_us`, each launch
    // taking `launch_us` of host time.
    SyntheticTraining& kernels(const std::string& op, const std::string& kernel, int count, double dur_us,
                               double launch_us = 5, GpuKind kind = GpuKind::Kernel);
    // Host work that launches nothing (Python, dispatcher).
    SyntheticTraining& host(double us);
    // A blocking .item(): a device-to-host copy and cudaStreamSynchronize until the GPU is idle.
    SyntheticTraining& item();
    // The DataLoader fetching the next batch, on the host.
    SyntheticTraining& dataloader(double us);
    // Open / close an annotation range (Optimizer.step#AdamW.step, ...) around later items.
    SyntheticTraining& begin(const std::string& annotation);
    SyntheticTraining& end();
    // A sightline.batch annotation for every step.
    SyntheticTraining& batch(const std::string& fields);
    // Ops without GPU work.
    SyntheticTraining& op(const std::string& name, int count = 1, double us = 3);

    // Steps end without the final synchronize: the host runs ahead of the GPU, as in a healthy
    // job whose step has no synchronisation (the next step's launches queue behind this one's work).
    SyntheticTraining& hostRunsAhead();

    Trace build(int steps = 3) const;

private:
    std::vector<std::function<void(struct Sim&)>> m_items;
    bool m_step_sync = true;
};

struct HealthyOptions {
    bool fused_norm = true;
    bool flash = true;
    bool fused_optimizer = true;
    double dataloader_us = 20;
    std::string batch = "real_tokens=7900 padded_tokens=8192 sequences=4";
};

// A healthy dense training step: long GEMM and flash-attention kernels queued well ahead of the
// GPU, a few elementwise kernels, a fused optimizer, a fused RMSNorm, padding efficiency 0.96.
// `extra` adds items after the backward pass, before the optimizer step.
SyntheticTraining healthyStep(const std::function<void(SyntheticTraining&)>& extra = {}, const HealthyOptions& o = {});

// The GPU-bound job of the advisor's GPU check (tests/gpu/mlp_job.py), rebuilt: 8 MLP blocks of
// 4096/16384 on 16x1024 tokens in bf16 make 48 GEMMs of about 3 ms a step (forward, and two in
// backward for each), 16 activation kernels of 200 us and one fused AdamW kernel of 2 ms; the host
// launches a step's 65 kernels in under a millisecond and runs on into the next step without a
// synchronisation. Each step's GPU work takes kGpuBoundStepMs.
SyntheticTraining gpuBoundMlp();
inline constexpr double kGpuBoundStepMs = (48 * 3000 + 16 * 200 + 2000) / 1000.0;

extern const char* const kNvjet;
extern const char* const kXmmaFp32;
extern const char* const kFlashFwd;
extern const char* const kFlashBwd;
extern const char* const kMulKernel;
extern const char* const kAddKernel;
extern const char* const kFusedAdam;
extern const char* const kForeachKernel;
extern const char* const kRmsNorm;
extern const char* const kSoftmaxFwd;
extern const char* const kSoftmaxBwd;

} // namespace sightline::test
