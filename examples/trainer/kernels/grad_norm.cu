// The gradients' global L2 norm and the clipping factor in two launches however many tensors there
// are: every block sums the squares of its tiles across a list of tensors (16-byte loads, fp32 a
// pack, double a thread) into its own partial sum, and one block adds the partials in a fixed order
// (the same norm, to the bit, from run to run), takes the square root and the factor. libtorch's
// `_foreach_norm` (then stack, norm, add, divide and clamp) took 202 launches and 3.5 ms a step of
// the reference trainer on the H200 (2.4 TB/s over the 8.4 GB of bf16 gradients; session 28's
// profile); `--only adamw-bench` prints both: 2.62 ms for these, 4.40 for libtorch's (session 30).
#include "common.cuh"
#include "ops.h"

namespace sightline::kernels {

constexpr int kNormThreads = 256;
constexpr int kNormList = 512; // tensors a launch: the argument block stays under 16 KB

struct NormList {
    const void* g[kNormList];
    int64_t n[kNormList];
    int64_t tile0[kNormList + 1]; // where each tensor's tiles start in the launch's tile count
    int count;
};

__device__ __forceinline__ double blockSum(double v, double* red) {
    v = warpSum(v);
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    if (lane == 0) red[warp] = v;
    __syncthreads();
    double sum = 0;
    if (threadIdx.x == 0)
        for (int w = 0; w < int(blockDim.x) / 32; ++w) sum += red[w]; // in warp order: the same sum every run
    return sum;
}

// Block b sums tiles b, b + gridDim.x, ... of the list into partial[b].
template <typename T>
__global__ void __launch_bounds__(kNormThreads) sightline_grad_sq_sum_kernel(NormList list, double* partial) {
    constexpr int V = 16 / sizeof(T), kTile = kNormThreads * V;
    __shared__ double red[kNormThreads / 32];
    double acc = 0;
    int t = 0;
    for (int64_t tile = blockIdx.x; tile < list.tile0[list.count]; tile += gridDim.x) {
        while (tile >= list.tile0[t + 1]) ++t;
        const int64_t i0 = (tile - list.tile0[t]) * kTile + int64_t(threadIdx.x) * V, n = list.n[t];
        const T* g = static_cast<const T*>(list.g[t]) + i0;
        float part = 0;
        if (i0 + V <= n && reinterpret_cast<uintptr_t>(g) % 16 == 0) {
            float x[V];
            loadPack<V>(g, x);
#pragma unroll
            for (int e = 0; e < V; ++e) part += x[e] * x[e];
        } else {
            for (int e = 0; e < V && i0 + e < n; ++e) part += toFloat(g[e]) * toFloat(g[e]);
        }
        acc += part;
    }
    const double sum = blockSum(acc, red);
    if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

// One block: *total = sqrt(the partials' sum), *scale = max((*total + 1e-6) / max_norm, 1).
__global__ void __launch_bounds__(kNormThreads) sightline_grad_norm_finish_kernel(const double* partial, int count, double max_norm,
                                                                                  float* total, float* scale) {
    __shared__ double red[kNormThreads / 32];
    double acc = 0;
    for (int i = int(threadIdx.x); i < count; i += int(blockDim.x)) acc += partial[i];
    const double norm = sqrt(blockSum(acc, red));
    if (threadIdx.x == 0) {
        *total = float(norm);
        *scale = float(fmax((norm + 1e-6) / max_norm, 1.0));
    }
}

namespace {

// Sums the squares of tensors `idx` (one dtype, at most kNormList) into `blocks` partials at partial.
template <typename T>
void launchSqSum(const std::vector<size_t>& idx, at::TensorList grads, double* partial, unsigned blocks) {
    constexpr int64_t kTile = kNormThreads * (16 / sizeof(T));
    NormList list{};
    list.count = int(idx.size());
    for (size_t j = 0; j < idx.size(); ++j) {
        list.g[j] = grads[idx[j]].data_ptr();
        list.n[j] = grads[idx[j]].numel();
        list.tile0[j + 1] = list.tile0[j] + (list.n[j] + kTile - 1) / kTile;
    }
    sightline_grad_sq_sum_kernel<T><<<blocks, kNormThreads, 0, at::cuda::getCurrentCUDAStream()>>>(list, partial);
    checkLaunch("sightline_grad_sq_sum_kernel");
}

void checkGrads(at::TensorList grads) {
    for (const at::Tensor& g : grads) {
        checkCuda(g, "grad_norm: gradients");
        TORCH_CHECK(g.device() == grads[0].device() && g.is_contiguous(), "grad_norm: gradients must be contiguous, on one device");
        TORCH_CHECK(g.scalar_type() == at::kFloat || g.scalar_type() == at::kBFloat16, "grad_norm: float or bfloat16 gradients only, got ",
                    g.scalar_type());
    }
}

} // namespace

std::tuple<at::Tensor, at::Tensor> gradNorm(at::TensorList grads, double max_norm) {
    TORCH_CHECK(!grads.empty(), "grad_norm: no gradients");
    TORCH_CHECK(max_norm > 0, "grad_norm: max_norm must be positive");
    checkGrads(grads);
    const c10::cuda::CUDAGuard guard(grads[0].device());
    const unsigned blocks = unsigned(4 * multiprocessors());
    // the launches, one a dtype and kNormList tensors, each with its own `blocks` partials
    std::vector<std::pair<at::ScalarType, std::vector<size_t>>> launches;
    for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16})
        for (size_t i = 0; i < grads.size(); ++i) {
            if (grads[i].scalar_type() != dtype || grads[i].numel() == 0) continue;
            if (launches.empty() || launches.back().first != dtype || launches.back().second.size() == size_t(kNormList))
                launches.push_back({dtype, {}});
            launches.back().second.push_back(i);
        }
    const auto f64 = grads[0].options().dtype(at::kDouble), f32 = grads[0].options().dtype(at::kFloat);
    const at::Tensor partial = launches.empty() ? at::zeros({1}, f64) : at::empty({int64_t(launches.size()) * blocks}, f64);
    for (size_t l = 0; l < launches.size(); ++l) {
        double* slot = partial.data_ptr<double>() + l * blocks;
        SIGHTLINE_DISPATCH_FLOAT_BF16(launches[l].first, "grad_norm", [&] { launchSqSum<scalar_t>(launches[l].second, grads, slot, blocks); });
    }
    at::Tensor total = at::empty({}, f32), scale = at::empty({}, f32);
    sightline_grad_norm_finish_kernel<<<1, kNormThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        partial.data_ptr<double>(), int(partial.numel()), max_norm, total.data_ptr<float>(), scale.data_ptr<float>());
    checkLaunch("sightline_grad_norm_finish_kernel");
    return {total, scale};
}

} // namespace sightline::kernels
