#pragma once
// Data parallelism for the reference trainer: one process per GPU, as torchrun (or any launcher
// setting RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) starts them; a c10d process group
// over NCCL; gradients all-reduced in buckets while backward still runs (docs/trainer.md).
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sightline::trainer {

struct Distributed {
    int rank = 0, world = 1, local_rank = 0;
    c10::intrusive_ptr<c10d::Backend> group; // null when world == 1

    // From the launcher's environment; world 1 when WORLD_SIZE is unset. Throws std::runtime_error
    // (one line) on a partial or inconsistent environment.
    static Distributed fromEnvironment();
    // Joins the process group: a TCP store at MASTER_ADDR:MASTER_PORT (torchrun's own, when it
    // says so through TORCHELASTIC_USE_AGENT_STORE; else rank 0 serves it) and NCCL, loaded from
    // libsightline_trainer_nccl.so beside the executable.
    void connect();
    bool active() const { return world > 1; }
    // Sums `values` (a small CPU tensor) over the ranks, in place.
    void sumAcrossRanks(torch::Tensor& values, const torch::Device& device) const;
};

// Gradient all-reduce in buckets (about `bucket_bytes` each, filled in the reverse order of the
// parameters, as backward produces them), each launched as soon as its last gradient is ready and
// all earlier buckets have been launched, so every rank issues the same collectives in the same
// order. Arm it before the backward of an optimizer step's last micro-batch; finish() after it
// leaves every parameter's gradient the mean over the ranks of its accumulated gradient.
class GradientSync {
public:
    GradientSync(std::vector<torch::Tensor> params, c10::intrusive_ptr<c10d::Backend> group, int world,
                 int64_t bucket_bytes = 25ll << 20);
    ~GradientSync(); // takes its hooks off the parameters
    GradientSync(const GradientSync&) = delete;
    GradientSync& operator=(const GradientSync&) = delete;
    void arm() { m_armed = true; }
    void finish();
    // Drops the gradients that finish() left as views of the buckets (after the optimizer step;
    // libtorch's Optimizer::zero_grad cannot detach views in place).
    void releaseGradients();
    size_t bucketCount() const { return m_buckets.size(); }

private:
    struct Bucket {
        torch::Tensor flat;
        std::vector<size_t> params;
        std::vector<int64_t> offsets;
        size_t pending = 0;
        c10::intrusive_ptr<c10d::Work> work;
    };
    void onGradient(size_t param, const torch::Tensor& grad);
    void launchReady();

    std::vector<torch::Tensor> m_params;
    std::vector<unsigned> m_hooks;                  // each parameter's hook, to remove
    std::vector<std::pair<size_t, size_t>> m_where; // param -> (bucket, slot)
    std::vector<Bucket> m_buckets;
    c10::intrusive_ptr<c10d::Backend> m_group;
    int m_world;
    size_t m_next = 0; // the next bucket to launch
    bool m_armed = false;
};

} // namespace sightline::trainer
