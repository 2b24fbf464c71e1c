// Linear projections of one input (fused_ops.h: sharedInputLinear).
#include "fused_ops.h"

namespace sightline::trainer::fused {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Forward: one GEMM a weight. Backward: each weight's gradient dy_i^T x, and x's as one GEMM and
// then the others added by their own accumulation (addmm_, beta 1), where separate linears leave
// autograd an elementwise add of x's size for every projection after the first.
struct SharedInputLinearFn : torch::autograd::Function<SharedInputLinearFn> {
    static tensor_list forward(AutogradContext* ctx, const at::Tensor& x, at::TensorList weights) {
        const at::Tensor rows = x.reshape({-1, x.size(-1)});
        tensor_list saved{x}, out;
        auto sizes = x.sizes().vec();
        for (const at::Tensor& w : weights) {
            saved.push_back(w);
            sizes.back() = w.size(0);
            out.push_back(at::mm(rows, w.t()).view(sizes));
        }
        ctx->save_for_backward(saved);
        return out;
    }
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        const auto s = ctx->get_saved_variables();
        const at::Tensor rows = s[0].reshape({-1, s[0].size(-1)});
        at::Tensor dx;
        tensor_list result{at::Tensor()};
        for (size_t i = 0; i < grads.size(); ++i) {
            const at::Tensor& w = s[i + 1];
            if (!grads[i].defined()) {
                result.push_back(at::Tensor());
                continue;
            }
            const at::Tensor dy = grads[i].reshape({-1, w.size(0)});
            if (dx.defined()) dx.addmm_(dy, w);
            else dx = at::mm(dy, w);
            result.push_back(at::mm(dy.t(), rows));
        }
        if (dx.defined()) result[0] = dx.view(s[0].sizes());
        return result;
    }
};

} // namespace

std::vector<torch::Tensor> sharedInputLinear(const torch::Tensor& x, const std::vector<torch::Tensor>& weights) {
    TORCH_CHECK(!weights.empty(), "sharedInputLinear: no weights");
    for (const torch::Tensor& w : weights)
        TORCH_CHECK(w.dim() == 2 && w.size(1) == x.size(-1), "sharedInputLinear: each weight must be [out, ", x.size(-1), "], got ",
                    w.sizes());
    return SharedInputLinearFn::apply(x, at::TensorList(weights)); // a TensorList: each weight an input with a gradient
}

} // namespace sightline::trainer::fused
