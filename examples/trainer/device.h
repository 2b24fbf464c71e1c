#pragma once
// The device the trainer runs on. The trainer links libtorch's CPU part only, so that CPU runs need
// no CUDA libraries; asking for a CUDA device loads libtorch_cuda (from the library path or beside
// libtorch_cpu), which registers CUDA with libtorch.
#include <c10/core/Event.h>
#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

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

// A copy of a host tensor on `d`. On a GPU it goes through pinned memory, queued without waiting
// for the device's queue (a copy from pageable memory waits for everything queued before it, so
// the host could not run ahead of the GPU); on the CPU, a plain copy.
torch::Tensor toDevice(const torch::Tensor& host, const torch::Device& d);
// The same for a host vector, as a 1-d tensor of its type.
torch::Tensor toDevice(const std::vector<int32_t>& host, const torch::Device& d);
torch::Tensor toDevice(const std::vector<int64_t>& host, const torch::Device& d);

// A host copy of `t`, queued behind the work that makes it: on a GPU into pinned memory without
// waiting (`.item()` on a device tensor waits for the whole stream, so for every step queued after
// the one it reads); read it once a QueueMark made after it is done. On the CPU, a plain copy.
torch::Tensor toHostQueued(const torch::Tensor& t);

// A point in the device's queue that the host can wait for: on a GPU a timed event on the current
// stream; on the CPU, where work is done when it is queued, the host's clock when it was made.
class QueueMark {
public:
    explicit QueueMark(const torch::Device& d);
    void wait() const;
    // Seconds from `earlier` to this mark where both are done: on the GPU's clock (the time the
    // device took between them, whatever the host did meanwhile), else on the host's.
    double secondsAfter(const QueueMark& earlier) const;

private:
    std::shared_ptr<c10::Event> m_event;
    std::chrono::steady_clock::time_point m_host;
};

} // namespace sightline::trainer
