#pragma once
// NVTX ranges named after the model's parts ("layer.mlp", "layer.gdn.rule", ...) around each part's
// forward and, through two identity nodes in the autograd graph, its backward
// ("layer.mlp.backward"): a profile then shows the step's GPU time by part (docs/trainer.md).
// Without an NVTX tool attached a range costs a call into an empty function.
#include <torch/torch.h>

#include <string>

namespace sightline::trainer {

// The part's input on entry and its output on exit, passed through unchanged.
torch::Tensor enterPart(const torch::Tensor& x, const std::string& name);
torch::Tensor leavePart(const torch::Tensor& y, const std::string& name);

template <typename Fn>
torch::Tensor part(const std::string& name, const torch::Tensor& x, Fn&& fn) {
    return leavePart(fn(enterPart(x, name)), name);
}

} // namespace sightline::trainer
