#pragma once
// Between libtorch tensors and safetensors files: a model's parameters by their Hugging Face names.
#include "safetensors.h"

#include <torch/torch.h>

namespace sightline::trainer {

torch::Tensor toTorch(const SafeTensor& t);   // a copy, on the CPU, in the file's dtype
SafeTensor fromTorch(const torch::Tensor& t); // F32, BF16, F16, I64 or I32

// Copies every parameter of `module` from `tensors` (by name, converted to the parameter's dtype).
// Throws std::runtime_error naming the first parameter that is missing or of another shape;
// names listed in `optional` may be missing (a tied lm_head).
void loadParameters(torch::nn::Module& module, const SafeTensors& tensors, const std::vector<std::string>& optional = {});
// The parameters (or, with `grads`, their gradients) by name.
SafeTensors parameterTensors(const torch::nn::Module& module, bool grads = false);

} // namespace sightline::trainer
