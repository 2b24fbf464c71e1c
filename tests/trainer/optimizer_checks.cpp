// The fused path's AdamW (the operator sightline::adamw_ with the gradient norm clipped on the
// device) against libtorch's AdamW with clip_grad_norm_: the same parameters after three steps. On
// the GPU also its kernel against libtorch's _fused_adamw_: the same up to fp32 rounding.
#include "check_util.h"
#include "fused_ops.h"
#include "optimizer.h"

#include <algorithm>
#include <tuple>

namespace sightline::trainer::checks {

namespace {

// Parameters, gradients, both moments and steps of `count` tensors of ragged sizes: a large one
// (many tiles), odd ones (a pack's ragged end), and every third one a view one element into a
// larger buffer (not 16-byte aligned: the element-by-element path).
struct AdamwSet {
    std::vector<torch::Tensor> p, g, m, v, s;
};
AdamwSet adamwSet(int count, torch::ScalarType dtype, const torch::Device& d) {
    AdamwSet a;
    for (int i = 0; i < count; ++i) {
        const int64_t n = i == 0 ? (int64_t(1) << 20) + 5 : 1 + (i * 977) % 5000;
        const auto make = [&](double scale, bool positive) {
            torch::Tensor x = torch::randn({n + (i % 3 == 2 ? 1 : 0)}, d) * scale;
            if (positive) x = x.abs();
            x = x.to(dtype);
            return i % 3 == 2 ? x.narrow(0, 1, n) : x;
        };
        a.p.push_back(make(1.0, false));
        a.m.push_back(make(0.01, false));
        a.v.push_back(make(1e-4, true));
        a.g.push_back(make(0.1, false));
        a.s.push_back(torch::full({}, 4.0f, torch::TensorOptions(d).dtype(torch::kFloat32)));
    }
    return a;
}
std::vector<torch::Tensor> clones(const std::vector<torch::Tensor>& xs) {
    std::vector<torch::Tensor> out;
    for (const torch::Tensor& x : xs) out.push_back(x.clone());
    return out;
}

// Over lists of results a (the kernel's) and b (libtorch's): the largest difference relative to its
// tensor's largest |b| (elementwise ratios blow up where a moment passes near zero), and the share
// of elements not bit for bit the same.
struct ListDiff {
    double worst = 0, share = 0;
};
ListDiff listDiff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
    ListDiff d;
    int64_t differ = 0, total = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        const torch::Tensor x = a[i].to(torch::kFloat64), y = b[i].to(torch::kFloat64);
        d.worst = worse(d.worst, (x - y).abs().max().item<double>() / std::max(y.abs().max().item<double>(), 1e-30));
        differ += (x != y).sum().item<int64_t>();
        total += x.numel();
    }
    d.share = double(differ) / double(total);
    return d;
}

void checkAdamwKernel(Results& r, const torch::Device& d) {
    fused::loadKernels();
    for (auto dtype : {torch::kFloat32, torch::kBFloat16})
        for (bool scaled : {false, true}) {
            AdamwSet a = adamwSet(60, dtype, d); // two launches (48 tensors each at most)
            AdamwSet b{clones(a.p), clones(a.g), clones(a.m), clones(a.v), clones(a.s)};
            const std::optional<at::Tensor> scale =
                scaled ? std::optional<at::Tensor>(torch::full({}, 3.7f, torch::TensorOptions(d).dtype(torch::kFloat32))) : std::nullopt;
            for (int step = 0; step < 3; ++step) {
                for (size_t i = 0; i < a.g.size(); ++i) {
                    a.g[i].copy_(torch::randn(a.g[i].sizes(), d) * 0.1);
                    b.g[i].copy_(a.g[i]);
                }
                at::_foreach_add_(a.s, 1);
                at::_foreach_add_(b.s, 1);
                fused::adamw(a.p, a.g, a.m, a.v, a.s, 1e-3, 0.9, 0.95, 0.1, 1e-8, scale);
                at::_fused_adamw_(b.p, b.g, b.m, b.v, {}, b.s, 1e-3, 0.9, 0.95, 0.1, 1e-8, false, false, scale);
            }
            // fp32: rounding differences only; bf16: at most one unit in the last place (2^-8 to 2^-7
            // of the value), in a small share of the elements (3.5% at most on the H200)
            const bool bf16 = dtype == torch::kBFloat16;
            const double tol = bf16 ? 1.0 / 128 : 1e-5, max_share = bf16 ? 0.1 : 1.0;
            const std::string tag = std::string("AdamW kernel vs libtorch _fused_adamw_, 3 steps, 60 tensors") + (bf16 ? " bf16" : " fp32") +
                (scaled ? ", grad_scale" : "");
            for (const auto& [what, x, y] : {std::tuple{"parameters", &a.p, &b.p}, {"exp_avg", &a.m, &b.m}, {"exp_avg_sq", &a.v, &b.v}}) {
                const ListDiff d = listDiff(*x, *y);
                r.expectTrue(tag + ": " + what, d.worst <= tol && d.share <= max_share,
                             "largest difference relative to the largest value " + std::to_string(d.worst) + " (at most " + std::to_string(tol) + "), " +
                                 std::to_string(100 * d.share) + "% of elements differ");
            }
        }
}

// The gradient norm kernel against libtorch's _foreach_norm over the same ragged lists (several
// launches, unaligned views), and the same bits from one call to the next.
void checkGradNormKernel(Results& r, const torch::Device& d) {
    for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
        const AdamwSet a = adamwSet(700, dtype, d); // two launches a dtype (512 tensors each at most)
        const auto [total, scale] = fused::gradNorm(a.g, 0.5);
        const double ref = torch::stack(at::_foreach_norm(a.g, 2, torch::kFloat32)).norm().item<double>();
        const std::string tag = std::string("gradient norm kernel vs libtorch _foreach_norm, 700 tensors") + (dtype == torch::kFloat32 ? " fp32" : " bf16");
        r.expectClose(tag + ": norm", std::abs(total.item<double>() - ref) / ref, 1e-5);
        r.expectClose(tag + ": clipping factor", std::abs(scale.item<double>() - (ref + 1e-6) / 0.5) / ((ref + 1e-6) / 0.5), 1e-5);
        const at::Tensor again = std::get<0>(fused::gradNorm(a.g, 0.5));
        r.expectTrue(tag + ": the same bits again", again.item<float>() == total.item<float>(),
                     std::to_string(again.item<float>()) + " then " + std::to_string(total.item<float>()));
        const at::Tensor one = std::get<1>(fused::gradNorm(a.g, 1e9));
        r.expectTrue(tag + ": no clipping under max_norm", one.item<float>() == 1.0f, "factor " + std::to_string(one.item<float>()));
    }
}

} // namespace

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
    if (d.is_cuda()) {
        checkAdamwKernel(r, d);
        checkGradNormKernel(r, d);
    }
}

} // namespace sightline::trainer::checks
