// The Gated DeltaNet's causal depthwise conv1d with SiLU, over tokens [tokens, channels]
// (channel-last, as the projection writes them), restarting at every sequence boundary: a tap
// contributes only when its token is in the same sequence (seq_idx) as the output's. The backward
// recomputes the pre-activation and sums the weight gradient over token tiles.
#include "common.cuh"
#include "ops.h"

namespace sightline::kernels {

constexpr int kConvThreads = 128; // channels a block
constexpr int kConvTile = 64;     // tokens a block

// pre-activation of token t, channel c: sum over taps i of w[i] * x[t - K + 1 + i] within t's sequence
template <typename T, int K>
__device__ __forceinline__ float convAt(const T* x, const int* seq, const float (&w)[K], int64_t t, int64_t channels, int64_t c) {
    float acc = 0;
    const int s = seq[t];
#pragma unroll
    for (int i = 0; i < K; ++i) {
        const int64_t src = t - K + 1 + i;
        if (src >= 0 && seq[src] == s) acc += w[i] * toFloat(x[src * channels + c]);
    }
    return acc;
}

template <typename T, int K>
__device__ __forceinline__ void loadTaps(const T* weight, int64_t c, float (&w)[K]) {
#pragma unroll
    for (int i = 0; i < K; ++i) w[i] = toFloat(weight[c * K + i]);
}

template <typename T, int K>
__global__ void causal_conv1d_silu_fwd_kernel(const T* x, const T* weight, const int* seq, T* y, int64_t tokens, int64_t channels) {
    const int64_t c = int64_t(blockIdx.x) * kConvThreads + threadIdx.x;
    if (c >= channels) return;
    float w[K];
    loadTaps<T, K>(weight, c, w);
    const int64_t t0 = int64_t(blockIdx.y) * kConvTile, t1 = min(tokens, t0 + kConvTile);
    for (int64_t t = t0; t < t1; ++t) y[t * channels + c] = fromFloat<T>(siluf(convAt<T, K>(x, seq, w, t, channels, c)));
}

// dpre[t] = dy[t] silu'(pre[t]); dx[s] = sum over taps i of w[i] dpre[s + K - 1 - i] (same sequence);
// dw[i] = sum over t of dpre[t] x[t - K + 1 + i]. dpre of the K - 1 tokens after the tile is
// recomputed (it belongs to the next tile's weight gradient, not this one's).
template <typename T, int K>
__global__ void causal_conv1d_silu_bwd_kernel(const T* dy, const T* x, const T* weight, const int* seq, T* dx, float* dw_partial,
                                              int64_t tokens, int64_t channels) {
    const int64_t c = int64_t(blockIdx.x) * kConvThreads + threadIdx.x;
    if (c >= channels) return;
    float w[K], dw[K] = {}, ring[K] = {}; // ring[K - 1] is dpre of the newest token
    loadTaps<T, K>(weight, c, w);
    const int64_t t0 = int64_t(blockIdx.y) * kConvTile, t1 = min(tokens, t0 + kConvTile);
    for (int64_t t = t0; t < t1 + K - 1; ++t) {
#pragma unroll
        for (int i = 0; i + 1 < K; ++i) ring[i] = ring[i + 1];
        ring[K - 1] = t < tokens ? toFloat(dy[t * channels + c]) * siluGrad(convAt<T, K>(x, seq, w, t, channels, c)) : 0.0f;
        if (t < t1) {
#pragma unroll
            for (int i = 0; i < K; ++i) {
                const int64_t src = t - K + 1 + i;
                if (src >= 0 && seq[src] == seq[t]) dw[i] += ring[K - 1] * toFloat(x[src * channels + c]);
            }
        }
        const int64_t s = t - (K - 1); // every dpre it needs is in the ring now
        if (s < t0) continue;
        float acc = 0;
#pragma unroll
        for (int i = 0; i < K; ++i) { // output token s + K - 1 - i = t - i read s through tap i
            const int64_t out = t - i;
            if (out < tokens && seq[out] == seq[s]) acc += w[i] * ring[K - 1 - i];
        }
        dx[s * channels + c] = fromFloat<T>(acc);
    }
#pragma unroll
    for (int i = 0; i < K; ++i) dw_partial[(int64_t(blockIdx.y) * channels + c) * K + i] = dw[i];
}

template <typename T>
__global__ void conv_weight_grad_sum_kernel(const float* partial, int tiles, int64_t n, T* dw) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float sum = 0;
    for (int b = 0; b < tiles; ++b) sum += partial[int64_t(b) * n + i];
    dw[i] = fromFloat<T>(sum);
}

namespace {

void checkConv(const at::Tensor& x, const at::Tensor& w, const at::Tensor& seq) {
    checkCuda(x, "causal_conv1d: x");
    TORCH_CHECK(x.dim() == 2, "causal_conv1d: x must be [tokens, channels]");
    TORCH_CHECK(w.dim() == 2 && w.size(0) == x.size(1) && w.size(1) >= 2 && w.size(1) <= 4 && w.scalar_type() == x.scalar_type(),
                "causal_conv1d: weight must be [channels, 2..4] of x's dtype");
    TORCH_CHECK(seq.scalar_type() == at::kInt && seq.dim() == 1 && seq.size(0) == x.size(0),
                "causal_conv1d: seq_idx must be int32 [tokens]");
}

template <typename F>
void withTaps(int64_t k, F&& f) {
    if (k == 2) f(std::integral_constant<int, 2>{});
    else if (k == 3) f(std::integral_constant<int, 3>{});
    else f(std::integral_constant<int, 4>{});
}

} // namespace

at::Tensor causalConv1dSiluForward(const at::Tensor& x_in, const at::Tensor& w_in, const at::Tensor& seq_in) {
    checkConv(x_in, w_in, seq_in);
    const at::Tensor x = x_in.contiguous(), w = w_in.contiguous(), seq = seq_in.contiguous();
    const c10::cuda::CUDAGuard guard(x.device());
    at::Tensor y = at::empty_like(x);
    const int64_t tokens = x.size(0), channels = x.size(1);
    if (x.numel() == 0) return y;
    const dim3 grid(unsigned((channels + kConvThreads - 1) / kConvThreads), unsigned((tokens + kConvTile - 1) / kConvTile));
    SIGHTLINE_DISPATCH_FLOAT_BF16(x.scalar_type(), "causal_conv1d", [&] {
        withTaps(w.size(1), [&](auto k) {
            causal_conv1d_silu_fwd_kernel<scalar_t, decltype(k)::value><<<grid, kConvThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
                ptr<scalar_t>(x), ptr<scalar_t>(w), seq.data_ptr<int>(), ptr<scalar_t>(y), tokens, channels);
        });
    });
    checkLaunch("causal_conv1d_silu_fwd_kernel");
    return y;
}

std::tuple<at::Tensor, at::Tensor> causalConv1dSiluBackward(const at::Tensor& dy_in, const at::Tensor& x_in, const at::Tensor& w_in,
                                                            const at::Tensor& seq_in) {
    checkConv(x_in, w_in, seq_in);
    const at::Tensor dy = dy_in.contiguous(), x = x_in.contiguous(), w = w_in.contiguous(), seq = seq_in.contiguous();
    TORCH_CHECK(dy.sizes() == x.sizes(), "causal_conv1d_bwd: dy must match x");
    const c10::cuda::CUDAGuard guard(x.device());
    at::Tensor dx = at::empty_like(x), dw = at::empty_like(w);
    const int64_t tokens = x.size(0), channels = x.size(1), taps = w.size(1);
    if (x.numel() == 0) return {dx, dw.zero_()};
    const int tiles = int((tokens + kConvTile - 1) / kConvTile);
    at::Tensor partial = at::empty({tiles, channels, taps}, x.options().dtype(at::kFloat));
    const dim3 grid(unsigned((channels + kConvThreads - 1) / kConvThreads), unsigned(tiles));
    const auto stream = at::cuda::getCurrentCUDAStream();
    SIGHTLINE_DISPATCH_FLOAT_BF16(x.scalar_type(), "causal_conv1d_bwd", [&] {
        withTaps(taps, [&](auto k) {
            causal_conv1d_silu_bwd_kernel<scalar_t, decltype(k)::value><<<grid, kConvThreads, 0, stream>>>(
                ptr<scalar_t>(dy), ptr<scalar_t>(x), ptr<scalar_t>(w), seq.data_ptr<int>(), ptr<scalar_t>(dx), ptr<float>(partial),
                tokens, channels);
        });
        checkLaunch("causal_conv1d_silu_bwd_kernel");
        const int64_t n = channels * taps;
        conv_weight_grad_sum_kernel<scalar_t><<<unsigned((n + 255) / 256), 256, 0, stream>>>(ptr<float>(partial), tiles, n,
                                                                                             ptr<scalar_t>(dw));
    });
    checkLaunch("conv_weight_grad_sum_kernel");
    return {dx, dw};
}

} // namespace sightline::kernels
