// `sightline-trainer-checks CONFIG.json --device cuda --only adamw-bench`: one AdamW step over the
// parameters of the config's model in bf16 (random gradients, a clipping scale given), libtorch's
// `_fused_adamw_` against the trainer's `sightline::adamw_`, alternately in one process. Prints
// each one's milliseconds and the bytes it moved a second (parameters, gradients and both moments
// read, parameters and moments written), then the ratio; then the same for the gradient norm and
// clipping factor (`_foreach_norm` as clip_grad_norm_ uses it against `sightline::grad_norm`).
#include "fused_ops.h"
#include "model.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

namespace sightline::trainer::checks {

namespace {

// The median over `reps` timed calls of f (each synchronised), after one warm-up call.
double medianMs(const torch::Device& d, int reps, const std::function<void()>& f) {
    const int index = d.has_index() ? d.index() : -1;
    f();
    std::vector<double> ms;
    for (int i = 0; i < reps; ++i) {
        torch::cuda::synchronize(index);
        const auto t0 = std::chrono::steady_clock::now();
        f();
        torch::cuda::synchronize(index);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::nth_element(ms.begin(), ms.begin() + reps / 2, ms.end());
    return ms[reps / 2];
}

} // namespace

void runAdamwBench(const ModelConfig& config, const torch::Device& d) {
    CausalLM model(config);
    model->to(d, torch::kBFloat16);
    std::vector<torch::Tensor> p, g, m, v, s;
    int64_t elements = 0;
    for (const torch::Tensor& x : model->parameters()) {
        p.push_back(x.detach());
        g.push_back(torch::randn_like(x) * 1e-2);
        m.push_back(torch::zeros_like(x));
        v.push_back(torch::zeros_like(x));
        s.push_back(torch::ones({}, torch::TensorOptions(d).dtype(torch::kFloat32)));
        elements += x.numel();
    }
    const torch::Tensor scale = torch::full({}, 1.5f, torch::TensorOptions(d).dtype(torch::kFloat32));
    const std::function<void()> libtorch = [&] {
        at::_fused_adamw_(p, g, m, v, {}, s, 1e-5, 0.9, 0.95, 0.1, 1e-8, false, false, scale);
    };
    const std::function<void()> ours = [&] { fused::adamw(p, g, m, v, s, 1e-5, 0.9, 0.95, 0.1, 1e-8, scale); };
    const double bytes = double(elements) * 2 * 7; // bf16: p, g, m, v read; p, m, v written
    double a = 0, b = 0;
    for (int round = 0; round < 3; ++round) { // alternately, the last round's figures kept
        a = medianMs(d, 5, libtorch);
        b = medianMs(d, 5, ours);
    }
    std::printf("adamw-bench: %lld parameters in %zu tensors (bf16)\n", static_cast<long long>(elements), p.size());
    std::printf("adamw-bench: libtorch _fused_adamw_ %.2f ms (%.0f GB/s)\n", a, bytes / a / 1e6);
    std::printf("adamw-bench: sightline::adamw_ %.2f ms (%.0f GB/s)\n", b, bytes / b / 1e6);
    std::printf("adamw-bench: ours / libtorch time %.3f\n", b / a);
    // the gradient norm and clipping factor the step reads, made as clip_grad_norm_ makes them and by
    // the trainer's kernel (the gradients read once: 2 bytes an element)
    const std::function<void()> foreach_norm = [&] {
        const torch::Tensor total = torch::stack(at::_foreach_norm(g, 2, torch::kFloat32)).norm();
        torch::clamp_min((total + 1e-6) / 1.0, 1.0);
    };
    const std::function<void()> grad_norm = [&] { fused::gradNorm(g, 1.0); };
    for (int round = 0; round < 3; ++round) {
        a = medianMs(d, 5, foreach_norm);
        b = medianMs(d, 5, grad_norm);
    }
    const double norm_bytes = double(elements) * 2;
    std::printf("adamw-bench: gradient norm, libtorch _foreach_norm %.2f ms (%.0f GB/s)\n", a, norm_bytes / a / 1e6);
    std::printf("adamw-bench: gradient norm, sightline::grad_norm %.2f ms (%.0f GB/s)\n", b, norm_bytes / b / 1e6);
    std::printf("adamw-bench: gradient norm, ours / libtorch time %.3f\n", b / a);
}

} // namespace sightline::trainer::checks
