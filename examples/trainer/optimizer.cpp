#include "optimizer.h"

#include "fused_ops.h"

#include <stdexcept>

namespace sightline::trainer {

FusedAdamW::FusedAdamW(std::vector<torch::Tensor> params, double beta1, double beta2, double weight_decay, double eps)
    : m_params(std::move(params)), m_beta1(beta1), m_beta2(beta2), m_weight_decay(weight_decay), m_eps(eps) {
    for (const torch::Tensor& p : m_params) {
        m_exp_avg.push_back(torch::zeros_like(p));
        m_exp_avg_sq.push_back(torch::zeros_like(p));
        m_steps.push_back(torch::zeros({}, p.options().dtype(torch::kFloat32)));
    }
}

std::vector<torch::Tensor> FusedAdamW::gradients() const {
    std::vector<torch::Tensor> grads;
    for (const torch::Tensor& p : m_params)
        if (p.grad().defined()) grads.push_back(p.grad());
    return grads;
}

torch::Tensor FusedAdamW::clipGradNorm(double max_norm) {
    const std::vector<torch::Tensor> grads = gradients();
    if (grads.empty()) return torch::zeros({});
    if (grads[0].is_cuda()) fused::loadKernels(); // sightline::grad_norm's CUDA kernel
    // the AdamW kernel divides each gradient by its grad_scale as it reads it: 1 / the clipping factor
    auto [total, scale] = fused::gradNorm(grads, max_norm);
    m_grad_scale = scale;
    return total;
}

void FusedAdamW::step(double lr) {
    std::vector<torch::Tensor> p, g, m, v, s;
    for (size_t i = 0; i < m_params.size(); ++i) {
        if (!m_params[i].grad().defined()) continue;
        p.push_back(m_params[i]);
        g.push_back(m_params[i].grad());
        m.push_back(m_exp_avg[i]);
        v.push_back(m_exp_avg_sq[i]);
        s.push_back(m_steps[i]);
    }
    if (p.empty()) return;
    torch::NoGradGuard no_grad;
    at::_foreach_add_(s, 1);                  // the kernel reads the step count for the bias correction; it does not count
    if (p[0].is_cuda()) fused::loadKernels(); // sightline::adamw_'s CUDA kernel
    const std::optional<at::Tensor> scale = m_grad_scale.defined() ? std::optional<at::Tensor>(m_grad_scale) : std::nullopt;
    fused::adamw(p, g, m, v, s, lr, m_beta1, m_beta2, m_weight_decay, m_eps, scale);
    m_grad_scale = torch::Tensor();
}

void FusedAdamW::zeroGrad() {
    for (torch::Tensor& p : m_params) p.mutable_grad() = torch::Tensor();
}

void FusedAdamW::save(const std::filesystem::path& file) const {
    std::vector<torch::Tensor> all;
    for (const auto* list : {&m_exp_avg, &m_exp_avg_sq, &m_steps})
        for (const torch::Tensor& t : *list) all.push_back(t.cpu());
    torch::save(all, file.string());
}

void FusedAdamW::load(const std::filesystem::path& file) {
    std::vector<torch::Tensor> all;
    torch::load(all, file.string());
    if (all.size() != 3 * m_params.size())
        throw std::runtime_error(file.string() + ": optimizer state for " + std::to_string(all.size() / 3) + " parameters, the model has " +
                                 std::to_string(m_params.size()));
    const size_t n = m_params.size();
    for (size_t i = 0; i < n; ++i) {
        m_exp_avg[i].copy_(all[i]);
        m_exp_avg_sq[i].copy_(all[n + i]);
        m_steps[i].copy_(all[2 * n + i]);
    }
}

} // namespace sightline::trainer
