// The fused path's AdamW (libtorch's _fused_adamw_ with the gradient norm clipped on the device)
// against libtorch's AdamW with clip_grad_norm_: the same parameters after three steps.
#include "check_util.h"
#include "optimizer.h"

namespace sightline::trainer::checks {

void runOptimizerChecks(Results& r, const torch::Device& d) {
    torch::manual_seed(5);
    for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
        std::vector<torch::Tensor> a, b, initial;
        for (auto shape : std::vector<std::vector<int64_t>>{{300, 70}, {70}, {1}, {5, 3, 4}}) {
            const torch::Tensor init = torch::randn(shape, d).to(dtype);
            initial.push_back(init);
            a.push_back(init.clone().requires_grad_(true));
            b.push_back(init.clone().requires_grad_(true));
        }
        FusedAdamW fused(a, 0.9, 0.95, 0.1);
        torch::optim::AdamW reference(b, torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).weight_decay(0.1));
        double norm_fused = 0, norm_ref = 0;
        for (int step = 0; step < 3; ++step) {
            for (size_t i = 0; i < a.size(); ++i) {
                const torch::Tensor g = (torch::randn(a[i].sizes(), d) * (i + 1)).to(dtype);
                a[i].mutable_grad() = g.clone();
                b[i].mutable_grad() = g.clone();
            }
            norm_fused = fused.clipGradNorm(1.0).item<double>();
            norm_ref = torch::nn::utils::clip_grad_norm_(b, 1.0);
            fused.step(1e-2);
            reference.step();
        }
        const std::string tag = std::string("fused AdamW vs libtorch AdamW, 3 steps") + (dtype == torch::kFloat32 ? " fp32" : " bf16");
        r.expectClose(tag + ": gradient norm", std::abs(norm_fused - norm_ref) / norm_ref, dtype == torch::kFloat32 ? 1e-5 : 1e-2);
        double worst = 0;
        for (size_t i = 0; i < a.size(); ++i) worst = worse(worst, relError(a[i].detach(), b[i].detach()));
        r.expectClose(tag + ": parameters", worst, dtype == torch::kFloat32 ? 1e-5 : 1e-2);
        double moved = 0; // the steps did something: about 3 x lr
        for (size_t i = 0; i < a.size(); ++i) moved = worse(moved, (a[i].detach() - initial[i]).abs().max().item<double>());
        r.expectTrue(tag + ": parameters moved", std::isfinite(moved) && moved > 1e-3, "largest change " + std::to_string(moved));
    }
}

} // namespace sightline::trainer::checks
