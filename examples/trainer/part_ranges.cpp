#include "part_ranges.h"

#if __has_include(<nvtx3/nvToolsExt.h>)
#include <nvtx3/nvToolsExt.h>
#define SIGHTLINE_HAVE_NVTX 1
#endif

namespace sightline::trainer {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

void push(const std::string& name) {
#ifdef SIGHTLINE_HAVE_NVTX
    nvtxRangePushA(name.c_str());
#else
    (void)name;
#endif
}

void pop() {
#ifdef SIGHTLINE_HAVE_NVTX
    nvtxRangePop();
#endif
}

// Forward: opens the part's range. Backward (run after the part's own backward): closes the
// part's backward range.
struct EnterFn : torch::autograd::Function<EnterFn> {
    static torch::Tensor forward(AutogradContext*, const torch::Tensor& x, const std::string& name) {
        push(name);
        return x.view_as(x);
    }
    static tensor_list backward(AutogradContext*, tensor_list grads) {
        pop();
        return {grads[0], torch::Tensor()};
    }
};

// Forward: closes the part's range. Backward (run before the part's own backward): opens the
// part's backward range.
struct LeaveFn : torch::autograd::Function<LeaveFn> {
    static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& y, const std::string& name) {
        pop();
        ctx->saved_data["name"] = name + ".backward";
        return y.view_as(y);
    }
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        push(ctx->saved_data["name"].toStringRef());
        return {grads[0], torch::Tensor()};
    }
};

} // namespace

torch::Tensor enterPart(const torch::Tensor& x, const std::string& name) {
    if (!x.requires_grad()) { // no backward to mark: the forward range alone
        push(name);
        return x;
    }
    return EnterFn::apply(x, name);
}

torch::Tensor leavePart(const torch::Tensor& y, const std::string& name) {
    if (!y.requires_grad()) {
        pop();
        return y;
    }
    return LeaveFn::apply(y, name);
}

} // namespace sightline::trainer
