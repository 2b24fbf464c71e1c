// Partial rotary embedding on q or k, [tokens, heads, head_dim]: the first `rot` features of each
// head rotated by the angle position x inv_freq (the halves convention: feature i pairs with
// i + rot / 2), the rest passed through. The backward is the inverse rotation.
#include "common.cuh"
#include "ops.h"

namespace sightline::kernels {

// One thread per (token, head, pair); pairs beyond rot / 2 copy the pass-through features.
template <typename T, bool kInverse>
__global__ void rotary_kernel(const T* x, const int64_t* pos, const float* inv_freq, T* y, int64_t tokens, int heads, int dim,
                              int rot) {
    const int half = rot / 2, pass = dim - rot;
    const int per_head = half + pass; // work items of a head: its pairs, then its pass-through features
    const int64_t n = tokens * heads * per_head;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t row = i / per_head; // token * heads + head
        const int j = int(i % per_head);
        const T* xr = x + row * dim;
        T* yr = y + row * dim;
        if (j >= half) {
            yr[rot + j - half] = xr[rot + j - half];
            continue;
        }
        const float angle = float(pos[row / heads]) * inv_freq[j];
        float s, c;
        sincosf(angle, &s, &c);
        if (kInverse) s = -s;
        const float a = toFloat(xr[j]), b = toFloat(xr[j + half]);
        yr[j] = fromFloat<T>(a * c - b * s);
        yr[j + half] = fromFloat<T>(b * c + a * s);
    }
}

at::Tensor rotary(const at::Tensor& x_in, const at::Tensor& positions, const at::Tensor& inv_freq, bool inverse) {
    checkCuda(x_in, "rotary: x");
    TORCH_CHECK(x_in.dim() == 3, "rotary: x must be [tokens, heads, head_dim]");
    TORCH_CHECK(positions.dim() == 1 && positions.size(0) == x_in.size(0) && positions.scalar_type() == at::kLong,
                "rotary: positions must be int64 [tokens]");
    TORCH_CHECK(inv_freq.scalar_type() == at::kFloat && inv_freq.dim() == 1 && 2 * inv_freq.size(0) <= x_in.size(2),
                "rotary: inv_freq must be float [rot / 2] with rot <= head_dim");
    const at::Tensor x = x_in.contiguous(), pos = positions.contiguous(), freq = inv_freq.contiguous();
    const c10::cuda::CUDAGuard guard(x.device());
    at::Tensor y = at::empty_like(x);
    const int64_t tokens = x.size(0);
    const int heads = int(x.size(1)), dim = int(x.size(2)), rot = int(2 * freq.size(0));
    const int64_t n = tokens * heads * (rot / 2 + dim - rot);
    if (n == 0) return y;
    const dim3 grid(unsigned(std::clamp<int64_t>((n + 255) / 256, 1, 16 * multiprocessors())));
    SIGHTLINE_DISPATCH_FLOAT_BF16(x.scalar_type(), "rotary", [&] {
        auto kernel = inverse ? rotary_kernel<scalar_t, true> : rotary_kernel<scalar_t, false>;
        kernel<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(ptr<scalar_t>(x), pos.data_ptr<int64_t>(), freq.data_ptr<float>(),
                                                                   ptr<scalar_t>(y), tokens, heads, dim, rot);
    });
    checkLaunch("rotary_kernel");
    return y;
}

} // namespace sightline::kernels
