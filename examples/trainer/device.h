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

// The device's caching allocator as a step leaves it (all zero on the CPU): the peak bytes handed
// out and held from the device since the last reset, and, since the process began, how often it
// asked the device for memory and gave some back (cudaMalloc, cudaFree) and how often a request
// failed and was retried after freeing its whole cache (each a device-wide synchronisation).
struct AllocatorStats {
    int64_t peak_bytes = 0, peak_reserved_bytes = 0;
    int64_t device_allocs = 0, device_frees = 0, alloc_retries = 0;
};
AllocatorStats allocatorStats(const torch::Device& d, bool reset_peaks);

} // namespace sightline::trainer
