#pragma once
// The device the trainer runs on. The trainer links libtorch's CPU part only, so that CPU runs need
// no CUDA libraries; asking for a CUDA device loads libtorch_cuda (from the library path or beside
// libtorch_cpu), which registers CUDA with libtorch.
#include <torch/torch.h>

#include <string>

namespace sightline::trainer {

// "cpu", "cuda" or "cuda:N". Throws std::runtime_error with one clear line when the device cannot
// be used (no libtorch_cuda, no GPU).
torch::Device openDevice(const std::string& name);

// The path of `file` in the executable's directory (the trainer's plugins live there).
std::string besideExecutable(const std::string& file);

// Peak bytes the device's caching allocator handed out since the last reset; 0 on the CPU.
int64_t peakDeviceBytes(const torch::Device& d, bool reset);

} // namespace sightline::trainer
