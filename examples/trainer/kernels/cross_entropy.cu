// The LM head fused with the cross-entropy, chunked over tokens so that the [tokens x vocabulary]
// logits never exist whole: per chunk one GEMM makes its logits, one kernel turns each row into
// its loss and, in place, its gradient (softmax - one-hot, scaled), and two GEMMs take that
// gradient back to the hidden states and (accumulated in fp32) to the weight. The gradients are
// made in the forward pass; the backward only scales them.
#include "common.cuh"
#include "ops.h"

#include <cublas_v2.h>

namespace sightline::kernels {

constexpr int kCeThreads = 512;

// (max, sum of exp(x - max)) pairs, merged.
__device__ __forceinline__ void mergeSoftmax(float& m, float& s, float m2, float s2) {
    const float mx = fmaxf(m, m2);
    s = (m == -INFINITY ? 0.0f : s * __expf(m - mx)) + (m2 == -INFINITY ? 0.0f : s2 * __expf(m2 - mx));
    m = mx;
}

// The block's (max, sum) over its threads' pairs, in every thread.
__device__ __forceinline__ void blockSoftmax(float& m, float& s) {
    __shared__ float ms[kCeThreads / 32], ss[kCeThreads / 32];
    for (int o = 16; o > 0; o >>= 1) mergeSoftmax(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) {
        ms[warp] = m;
        ss[warp] = s;
    }
    __syncthreads();
    m = ms[0];
    s = ss[0];
    for (int k = 1; k < kCeThreads / 32; ++k) mergeSoftmax(m, s, ms[k], ss[k]);
}

// The (max, sum) pair of V values merged into (m, s): one exponential a value and one for the
// pack, not two a value.
template <int V>
__device__ __forceinline__ void mergePack(float& m, float& s, const float (&x)[V]) {
    float mx = x[0];
#pragma unroll
    for (int k = 1; k < V; ++k) mx = fmaxf(mx, x[k]);
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < V; ++k) sum += __expf(x[k] - mx);
    mergeSoftmax(m, s, mx, sum);
}

// One block a row: the row's loss (log-sum-exp - target logit, times `scale`) added to *loss, and
// the row overwritten by its gradient (softmax - one-hot) x scale; a row whose target is negative
// (ignored) gets a zero gradient and no loss. A thread reads V adjacent logits at once (16 bytes
// where the row allows; the scalar form moved about half the H200's bandwidth).
template <typename T, int V>
__global__ void __launch_bounds__(kCeThreads) cross_entropy_rows_kernel(T* logits, const int64_t* target, int64_t vocab,
                                                                        float scale, float* loss) {
    T* row = logits + int64_t(blockIdx.x) * vocab;
    const int64_t label = target[blockIdx.x];
    const int64_t step = int64_t(kCeThreads) * V;
    if (label < 0) {
        const float zero[V] = {};
        for (int64_t j = int64_t(threadIdx.x) * V; j < vocab; j += step) storePack<V>(row + j, zero);
        return;
    }
    float m = -INFINITY, s = 0;
    for (int64_t j = int64_t(threadIdx.x) * V; j < vocab; j += step) {
        float x[V];
        loadPack<V>(row + j, x);
        mergePack<V>(m, s, x);
    }
    blockSoftmax(m, s);
    const float lse = m + __logf(s);
    const float picked = toFloat(row[label]); // read by every thread before any writes the row
    __syncthreads();
    for (int64_t j = int64_t(threadIdx.x) * V; j < vocab; j += step) {
        float x[V];
        loadPack<V>(row + j, x);
#pragma unroll
        for (int k = 0; k < V; ++k) x[k] = (__expf(x[k] - lse) - (j + k == label ? 1.0f : 0.0f)) * scale;
        storePack<V>(row + j, x);
    }
    if (threadIdx.x == 0) atomicAdd(loss, (lse - picked) * scale);
}

namespace {

// acc [V, D] (fp32) = g^T [V, n] @ h [n, D] (+ acc where `add`), with g and h in bf16: cuBLAS with fp32 output.
void accumulateWeightGradBf16(at::Tensor& acc, const at::Tensor& g, const at::Tensor& h, bool add) {
    const float one = 1.0f, beta = add ? 1.0f : 0.0f;
    const int64_t n = h.size(0), d = h.size(1), v = g.size(1);
    cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();
    const cublasStatus_t st = cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_T, int(d), int(v), int(n), &one, h.data_ptr(), CUDA_R_16BF,
                                           int(d), g.data_ptr(), CUDA_R_16BF, int(v), &beta, acc.data_ptr(), CUDA_R_32F, int(d),
                                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    TORCH_CHECK(st == CUBLAS_STATUS_SUCCESS, "linear_cross_entropy: cublasGemmEx failed (status ", int(st), ")");
}

void checkLinearCe(const at::Tensor& h, const at::Tensor& w, const at::Tensor& target) {
    checkCuda(h, "linear_cross_entropy: hidden");
    TORCH_CHECK(h.dim() == 2 && w.dim() == 2 && h.size(1) == w.size(1) && h.scalar_type() == w.scalar_type(),
                "linear_cross_entropy: hidden [tokens, dim] and weight [vocab, dim] of one dtype");
    TORCH_CHECK(target.scalar_type() == at::kLong && target.dim() == 1 && target.size(0) == h.size(0),
                "linear_cross_entropy: target must be int64 [tokens]");
    TORCH_CHECK(h.size(0) < (int64_t(1) << 31) && w.size(0) < (int64_t(1) << 31), "linear_cross_entropy: too large for one GEMM");
}

} // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> linearCrossEntropy(const at::Tensor& h_in, const at::Tensor& w_in,
                                                                  const at::Tensor& target_in, double scale, int64_t chunk) {
    checkLinearCe(h_in, w_in, target_in);
    TORCH_CHECK(chunk > 0, "linear_cross_entropy: chunk must be positive");
    const at::Tensor h = h_in.contiguous(), w = w_in.contiguous(), target = target_in.contiguous();
    const c10::cuda::CUDAGuard guard(h.device());
    const int64_t tokens = h.size(0), vocab = w.size(0);
    at::Tensor loss = at::zeros({}, h.options().dtype(at::kFloat));
    at::Tensor grad_h = at::empty_like(h);
    // the first chunk's product writes the fp32 accumulator, the others add to it (no fill of its
    // 2.5 GB at the benchmark's vocabulary: 0.27 ms a step on the H200)
    at::Tensor grad_w = tokens > 0 ? at::empty({vocab, w.size(1)}, w.options().dtype(at::kFloat))
                                   : at::zeros({vocab, w.size(1)}, w.options().dtype(at::kFloat));
    const auto stream = at::cuda::getCurrentCUDAStream();
    for (int64_t r0 = 0; r0 < tokens; r0 += chunk) {
        const int64_t n = std::min(chunk, tokens - r0);
        const at::Tensor hc = h.narrow(0, r0, n);
        at::Tensor logits = at::mm(hc, w.t()); // [n, vocab]
        SIGHTLINE_DISPATCH_FLOAT_BF16(h.scalar_type(), "linear_cross_entropy", [&] {
            const auto rows = [&](auto v) {
                cross_entropy_rows_kernel<scalar_t, decltype(v)::value><<<unsigned(n), kCeThreads, 0, stream>>>(
                    ptr<scalar_t>(logits), target.data_ptr<int64_t>() + r0, vocab, float(scale), loss.data_ptr<float>());
            };
            // whole packs a row: every row's start stays 16-byte aligned
            withAlignedPack<16 / sizeof(scalar_t)>(vocab, {logits.data_ptr()}, rows);
        });
        checkLaunch("cross_entropy_rows_kernel");
        at::Tensor gh = grad_h.narrow(0, r0, n);
        at::mm_out(gh, logits, w);
        if (h.scalar_type() == at::kBFloat16) accumulateWeightGradBf16(grad_w, logits, hc, r0 > 0);
        else grad_w.addmm_(logits.t(), hc, r0 > 0 ? 1.0 : 0.0); // beta 0: the empty accumulator is not read
    }
    return {loss, grad_h, grad_w.to(w.scalar_type())};
}

} // namespace sightline::kernels
