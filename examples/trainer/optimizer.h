#pragma once
// AdamW for the fused path: every parameter updated by the operator `sightline::adamw_` (a few
// launches a step instead of a dozen kernels per parameter; on the GPU the trainer's own kernel,
// adamw.cu, libtorch's `_fused_adamw_` in fp32 arithmetic; on the CPU libtorch's itself), the
// gradient norm and its clipping on the device (no host synchronisation inside the step).
#include <torch/torch.h>

#include <filesystem>
#include <vector>

namespace sightline::trainer {

class FusedAdamW {
public:
    FusedAdamW(std::vector<torch::Tensor> params, double beta1, double beta2, double weight_decay, double eps = 1e-8);
    // Clips the next step's gradients so that their global L2 norm is at most max_norm: step()
    // scales them as its kernel reads them (its grad_scale), not in a pass of their own. Returns
    // the norm before clipping as a device scalar (fp32).
    torch::Tensor clipGradNorm(double max_norm);
    void step(double lr);
    void zeroGrad(); // the gradients dropped (set to none)
    void save(const std::filesystem::path& file) const;
    void load(const std::filesystem::path& file);

private:
    std::vector<torch::Tensor> gradients() const;
    std::vector<torch::Tensor> m_params, m_exp_avg, m_exp_avg_sq, m_steps;
    torch::Tensor m_grad_scale; // from clipGradNorm, for the next step
    double m_beta1, m_beta2, m_weight_decay, m_eps;
};

} // namespace sightline::trainer
