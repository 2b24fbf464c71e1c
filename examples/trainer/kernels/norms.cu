// RMSNorm kernels, forward and backward, one warp a row (loads of up to 16 bytes a lane; rows of
// 8, 16 or 32 packs of 16 bytes by the short-row kernels of norm_rows.cuh instead): the
// zero-centred norm of the decoder (x / rms(x) * (1 + w)), the same with the residual add before
// it (s = x + r, written out, then s / rms(s) * (1 + w); its backward adds the gradient s's other
// use brought), and the gated norm after the delta rule (x / rms(x) * w * silu(z)).
// Statistics in fp32; the backward recomputes x / rms(x) from x and the saved 1 / rms.
#include "common.cuh"
#include "norm_rows.cuh"
#include "ops.h"

#include <type_traits>

namespace sightline::kernels {

// v += the residual's pack at p, rounded to T as a separate add would round it, and written to s.
template <typename T, int V>
__device__ __forceinline__ void addResidual(const T* p, T* s, float (&v)[V]) {
    float r[V];
    loadPack<V>(p, r);
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = toFloat(fromFloat<T>(v[k] + r[k]));
    storePack<V>(s, v);
}

// Each lane takes V adjacent elements at a time (packWidth), so that a warp reads a row in loads
// of up to 16 bytes a lane. kAdd: the row normalised is x + res (rows of dim elements), written
// to sum by the first pass and read back by the second (each lane its own elements).
template <typename T, bool kGated, bool kAdd, int V>
__global__ void __launch_bounds__(kNormWarps * 32) rms_norm_fwd_kernel(const T* x, const T* z, const T* res, const T* w, T* y,
                                                                       T* sum, float* rstd, NormArgs a) {
    const int lane = threadIdx.x % 32;
    const int64_t row = int64_t(blockIdx.x) * kNormWarps + threadIdx.x / 32;
    if (row >= a.rows) return;
    const T* xr = x + row * a.x_stride;
    float ss = 0;
    for (int i = lane * V; i < a.dim; i += 32 * V) {
        float v[V];
        loadPack<V>(xr + i, v);
        if constexpr (kAdd) addResidual<T, V>(res + row * a.dim + i, sum + row * a.dim + i, v);
#pragma unroll
        for (int k = 0; k < V; ++k) ss += v[k] * v[k];
    }
    const float r = rsqrtf(warpSum(ss) / float(a.dim) + a.eps);
    T* yr = y + row * a.dim;
    const T* sr = kAdd ? sum + row * a.dim : xr;
    for (int i = lane * V; i < a.dim; i += 32 * V) {
        float xv[V], wv[V], zv[V], out[V];
        loadPack<V>(sr + i, xv);
        loadPack<V>(w + i, wv);
        if constexpr (kGated) loadPack<V>(z + row * a.z_stride + i, zv);
#pragma unroll
        for (int k = 0; k < V; ++k) {
            out[k] = xv[k] * r * (wv[k] + a.shift);
            if constexpr (kGated) out[k] *= siluf(zv[k]);
        }
        storePack<V>(yr + i, out);
    }
    if (lane == 0) rstd[row] = r;
}

// p[k] += v[k] for k < V in shared memory, 16 bytes at a time where V allows.
template <int V>
__device__ __forceinline__ void addPack(float* p, const float (&v)[V]) {
    if constexpr (V % 4 == 0) {
#pragma unroll
        for (int k = 0; k < V; k += 4) {
            float4 o = *reinterpret_cast<float4*>(p + k);
            o.x += v[k], o.y += v[k + 1], o.z += v[k + 2], o.w += v[k + 3];
            *reinterpret_cast<float4*>(p + k) = o;
        }
    } else {
#pragma unroll
        for (int k = 0; k < V; ++k) p[k] += v[k];
    }
}

// A lane's V elements from column i of a row: dy, x, the weight, and z where the norm is gated.
template <int V>
struct NormPacks {
    float d[V], x[V], w[V], z[V];
};
template <int V, bool kGated, typename T>
__device__ __forceinline__ NormPacks<V> loadNormPacks(const T* dyr, const T* xr, const T* w, const T* zr, int i) {
    NormPacks<V> p;
    loadPack<V>(dyr + i, p.d);
    loadPack<V>(xr + i, p.x);
    loadPack<V>(w + i, p.w);
    if constexpr (kGated) loadPack<V>(zr + i, p.z);
    return p;
}

// A lane's packs of dy, x (and z) of one column range, kept as loaded between the backward's two
// passes; unpack() turns them to floats with the weight's pack beside them.
template <typename T, int V, bool kGated>
struct HeldPacks {
    Pack<T, V> d, x, z;
    __device__ __forceinline__ void load(const T* dyp, const T* xp, const T* zp) {
        d = *reinterpret_cast<const Pack<T, V>*>(dyp);
        x = *reinterpret_cast<const Pack<T, V>*>(xp);
        if constexpr (kGated) z = *reinterpret_cast<const Pack<T, V>*>(zp);
    }
    // Between the passes: the packs stay as loaded, so the compiler converts them again at the
    // second pass rather than keeping the first pass's floats alive (twice the registers or more).
    __device__ __forceinline__ void keepPacked() {
        constexpr int kWords = sizeof(Pack<T, V>) / 4;
        uint32_t* words[3] = {reinterpret_cast<uint32_t*>(&d), reinterpret_cast<uint32_t*>(&x), reinterpret_cast<uint32_t*>(&z)};
#pragma unroll
        for (int t = 0; t < (kGated ? 3 : 2); ++t)
#pragma unroll
            for (int j = 0; j < kWords; ++j) asm volatile(""
                                                          : "+r"(words[t][j]));
    }
    __device__ __forceinline__ NormPacks<V> unpack(const T* wp) const {
        NormPacks<V> p;
#pragma unroll
        for (int k = 0; k < V; ++k) {
            p.d[k] = toFloat(d.v[k]);
            p.x[k] = toFloat(x.v[k]);
            if constexpr (kGated) p.z[k] = toFloat(z.v[k]);
        }
        loadPack<V>(wp, p.w);
        return p;
    }
};

// One pack's share of the row's sum of d(x_hat) x_hat.
template <int V, bool kGated>
__device__ __forceinline__ float packDot(const NormPacks<V>& in, float r, float shift) {
    float dot = 0;
#pragma unroll
    for (int k = 0; k < V; ++k) {
        float g = in.d[k] * (in.w[k] + shift);
        if constexpr (kGated) g *= siluf(in.z[k]);
        dot += g * in.x[k] * r;
    }
    return dot;
}

// One pack's dx (plus dres's pack where given; dz where gated) stored and its weight gradient
// added into the warp's slice dw.
template <typename T, bool kGated, int V>
__device__ __forceinline__ void packGrads(const NormPacks<V>& in, float r, float dot, const T* dres, T* dx, T* dz, float* dw,
                                          int64_t row, int i, const NormArgs& a) {
    float dxv[V], dzv[V], dwv[V];
#pragma unroll
    for (int k = 0; k < V; ++k) {
        const float xh = in.x[k] * r, scale = in.w[k] + a.shift;
        float gate = 1;
        if constexpr (kGated) {
            gate = siluf(in.z[k]);
            dzv[k] = in.d[k] * scale * xh * siluGrad(in.z[k]);
        }
        dxv[k] = r * (in.d[k] * scale * gate - xh * dot);
        dwv[k] = in.d[k] * xh * gate;
    }
    if (dres) {
        float dr[V];
        loadPack<V>(dres + row * a.dim + i, dr);
#pragma unroll
        for (int k = 0; k < V; ++k) dxv[k] += dr[k];
    }
    addPack<V>(dw + i, dwv);
    storePack<V>(dx + row * a.dim + i, dxv);
    if constexpr (kGated) storePack<V>(dz + row * a.dim + i, dzv);
}

// One row's backward by one warp, V elements a lane at a time: dx (and dz), and the row's share of
// the weight gradient added into dw (the warp's own slice of shared memory). dres (or null): a
// gradient added to dx before it is rounded, where x has another use (the residual stream).
// NP > 0: the row is NP packs a lane exactly, and each lane keeps its packs of dy, x (and z) in
// registers from the first pass to the second; NP = 0: the second pass reads them again (from L1
// where they are still there, else L2).
template <typename T, bool kGated, int V, int NP>
__device__ __forceinline__ void normRowBackward(const T* dy, const T* x, const T* z, const T* w, const float* rstd, const T* dres,
                                                T* dx, T* dz, float* dw, int64_t row, int lane, const NormArgs& a) {
    const T* xr = x + row * a.x_stride;
    const T* dyr = dy + row * a.dim;
    const T* zr = kGated ? z + row * a.z_stride : nullptr;
    const float r = rstd[row];
    if constexpr (NP > 0) {
        HeldPacks<T, V, kGated> held[NP]; // as loaded (bf16 packs: 4 registers each), unpacked at each use
        float dot = 0;
#pragma unroll
        for (int p = 0; p < NP; ++p) {
            const int i = (lane + 32 * p) * V;
            held[p].load(dyr + i, xr + i, kGated ? zr + i : nullptr);
            dot += packDot<V, kGated>(held[p].unpack(w + i), r, a.shift);
        }
        dot = warpSum(dot) / float(a.dim);
#pragma unroll
        for (int p = 0; p < NP; ++p) held[p].keepPacked();
#pragma unroll
        for (int p = 0; p < NP; ++p) {
            const int i = (lane + 32 * p) * V;
            packGrads<T, kGated, V>(held[p].unpack(w + i), r, dot, dres, dx, dz, dw, row, i, a);
        }
    } else {
        float dot = 0; // sum of d(x_hat) * x_hat
        for (int i = lane * V; i < a.dim; i += 32 * V) dot += packDot<V, kGated>(loadNormPacks<V, kGated>(dyr, xr, w, zr, i), r, a.shift);
        dot = warpSum(dot) / float(a.dim);
        for (int i = lane * V; i < a.dim; i += 32 * V)
            packGrads<T, kGated, V>(loadNormPacks<V, kGated>(dyr, xr, w, zr, i), r, dot, dres, dx, dz, dw, row, i, a);
    }
}

// Each warp adds its rows' weight gradient into its own slice of shared memory; the block's sum
// goes to `partial` (a row per block), summed over blocks by weight_grad_sum.
template <typename T, bool kGated, int V, int NP>
__global__ void __launch_bounds__(kNormWarps * 32, 2) rms_norm_bwd_kernel(const T* dy, const T* x, const T* z, const T* w,
                                                                          const float* rstd, const T* dres, T* dx, T* dz, float* partial,
                                                                          NormArgs a) {
    extern __shared__ float dw_warp[]; // [kNormWarps][dim]
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float* dw = dw_warp + warp * a.dim;
    for (int i = lane; i < a.dim; i += 32) dw[i] = 0;
    for (int64_t row = int64_t(blockIdx.x) * kNormWarps + warp; row < a.rows; row += int64_t(gridDim.x) * kNormWarps)
        normRowBackward<T, kGated, V, NP>(dy, x, z, w, rstd, dres, dx, dz, dw, row, lane, a);
    __syncthreads();
    for (int i = threadIdx.x; i < a.dim; i += blockDim.x) {
        float sum = 0;
        for (int k = 0; k < kNormWarps; ++k) sum += dw_warp[k * a.dim + i];
        partial[int64_t(blockIdx.x) * a.dim + i] = sum;
    }
}

template <typename T>
__global__ void weight_grad_sum_kernel(const float* partial, int blocks, int dim, T* dw) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= dim) return;
    float sum = 0;
    for (int b = 0; b < blocks; ++b) sum += partial[int64_t(b) * dim + i];
    dw[i] = fromFloat<T>(sum);
}

namespace {

// f(std::integral_constant<int, V>) for V = v (1, 2, 4 or 8): the kernels' pack width as a constant.
template <class F>
void withPack(int v, F&& f) {
    switch (v) {
    case 8: return f(std::integral_constant<int, 8>());
    case 4: return f(std::integral_constant<int, 4>());
    case 2: return f(std::integral_constant<int, 2>());
    default: return f(std::integral_constant<int, 1>());
    }
}

// The backward kernel for rows of `dim` elements: held in registers between its two passes where
// the row is 1, 2, 4 or 10 packs of 16 bytes a lane (the decoder's 2,560 columns at 8 bf16 a pack:
// 10), else read twice.
template <typename T, int V>
auto bwdKernel(bool gated, int dim) {
    using K = void (*)(const T*, const T*, const T*, const T*, const float*, const T*, T*, T*, float*, NormArgs);
    auto pick = [&](auto np) -> K {
        constexpr int NP = decltype(np)::value;
        return gated ? K(rms_norm_bwd_kernel<T, true, V, NP>) : K(rms_norm_bwd_kernel<T, false, V, NP>);
    };
    if constexpr (V * sizeof(T) != 16) { // held packs at 16-byte packs only
        return pick(std::integral_constant<int, 0>());
    } else {
        switch (dim / (32 * V) * (dim % (32 * V) == 0)) {
        case 1: return pick(std::integral_constant<int, 1>());
        case 2: return pick(std::integral_constant<int, 2>());
        case 4: return pick(std::integral_constant<int, 4>());
        case 10: return pick(std::integral_constant<int, 10>());
        default: return pick(std::integral_constant<int, 0>());
        }
    }
}

// f(std::integral_constant<int, L>) for the short-row kernels' lanes a row L = lanes (8, 16 or 32).
template <class F>
void withRowLanes(int lanes, F&& f) {
    switch (lanes) {
    case 8: return f(std::integral_constant<int, 8>());
    case 16: return f(std::integral_constant<int, 16>());
    default: return f(std::integral_constant<int, 32>());
    }
}

// As many blocks of `kernel` as the SMs hold at once, at most `wanted`.
template <class K>
int residentBlocks(K kernel, size_t shared, int64_t wanted) {
    int per_sm = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kNormWarps * 32, shared);
    return int(std::max<int64_t>(1, std::min<int64_t>(int64_t(std::max(per_sm, 1)) * multiprocessors(), wanted)));
}

// The forward by the short-row kernels (norm_rows.cuh) where the rows are one 16-byte pack a lane
// (no residual add), returning true; else false, nothing launched.
template <typename T>
bool rowsForward(const T* x, const T* z, const T* w, T* y, float* rstd, const NormArgs& a, cudaStream_t stream) {
    const int lanes = rowLanes<T>(a.dim, {x, z, w, y}, {a.x_stride, a.z_stride});
    if (lanes == 0) return false;
    const dim3 grid(unsigned((a.rows * lanes + kNormWarps * 32 - 1) / (kNormWarps * 32)));
    withRowLanes(lanes, [&](auto l) {
        constexpr int L = decltype(l)::value;
        auto kernel = z ? rms_norm_fwd_rows_kernel<T, true, L> : rms_norm_fwd_rows_kernel<T, false, L>;
        kernel<<<grid, kNormWarps * 32, 0, stream>>>(x, z, w, y, rstd, a);
    });
    checkLaunch("rms_norm_fwd_rows_kernel");
    return true;
}

// A backward kernel's per-block weight gradients: launch(partial) with `partial` [blocks, dim] fp32
// (a row a block, on the current device: normBackward guards x's), then their sum over blocks into dw.
template <typename T, class Launch>
void sumWeightGrad(int blocks, int dim, T* dw, cudaStream_t stream, Launch&& launch) {
    const at::Tensor partial = at::empty({blocks, dim}, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, c10::cuda::current_device()));
    launch(partial.data_ptr<float>());
    weight_grad_sum_kernel<T><<<(dim + 255) / 256, 256, 0, stream>>>(partial.data_ptr<float>(), blocks, dim, dw);
    checkLaunch("weight_grad_sum_kernel");
}

// The backward by the short-row kernels where the rows are one 16-byte pack a lane (no residual
// gradient), the weight gradient summed into dw, returning true; else false, nothing launched.
template <typename T>
bool rowsBackward(const T* dy, const T* x, const T* z, const T* w, const float* rstd, T* dx, T* dz, T* dw, const NormArgs& a,
                  cudaStream_t stream) {
    const int lanes = rowLanes<T>(a.dim, {dy, x, z, w, dx, dz}, {a.x_stride, a.z_stride});
    if (lanes == 0) return false;
    withRowLanes(lanes, [&](auto l) {
        constexpr int L = decltype(l)::value;
        auto kernel = z ? rms_norm_bwd_rows_kernel<T, true, L> : rms_norm_bwd_rows_kernel<T, false, L>;
        const int64_t groups = kNormWarps * 32 / L;
        const int blocks = residentBlocks(kernel, 0, (a.rows + groups - 1) / groups);
        sumWeightGrad(blocks, a.dim, dw, stream, [&](float* partial) {
            kernel<<<blocks, kNormWarps * 32, 0, stream>>>(dy, x, z, w, rstd, dx, dz, partial, a);
            checkLaunch("rms_norm_bwd_rows_kernel");
        });
    });
    return true;
}

NormArgs normArgs(const at::Tensor& x, const at::Tensor& z, const at::Tensor& w, double eps, bool zero_centred) {
    checkCuda(x, "rms_norm: x");
    TORCH_CHECK(x.dim() == 2 && x.stride(1) == 1, "rms_norm: x must be [rows, dim] with unit stride along dim");
    TORCH_CHECK(w.dim() == 1 && w.size(0) == x.size(1) && w.is_contiguous() && w.scalar_type() == x.scalar_type(),
                "rms_norm: weight must be [dim], contiguous, of x's dtype");
    NormArgs a;
    a.rows = x.size(0);
    a.dim = int(x.size(1));
    a.x_stride = x.stride(0);
    a.eps = float(eps);
    a.shift = zero_centred ? 1.0f : 0.0f;
    if (z.defined()) {
        TORCH_CHECK(z.sizes() == x.sizes() && z.stride(1) == 1 && z.scalar_type() == x.scalar_type(),
                    "gated_rms_norm: z must match x");
        a.z_stride = z.stride(0);
    }
    return a;
}

// A tensor of x's shape, dtype and device, contiguous (the residual and its gradient).
void checkLikeRows(const at::Tensor& t, const NormArgs& a, const at::Tensor& x, const char* what) {
    TORCH_CHECK(t.dim() == 2 && t.size(0) == a.rows && t.size(1) == a.dim && t.is_contiguous() && t.scalar_type() == x.scalar_type() &&
                    t.device() == x.device(),
                what, " must be [rows, dim], contiguous, of x's dtype and device");
}

// (y, 1/rms, x + res where res is given).
std::tuple<at::Tensor, at::Tensor, at::Tensor> normForward(const at::Tensor& x, const at::Tensor& z, const at::Tensor& res,
                                                           const at::Tensor& w, double eps, bool zero_centred) {
    const NormArgs a = normArgs(x, z, w, eps, zero_centred);
    if (res.defined()) checkLikeRows(res, a, x, "add_rms_norm: the residual");
    const c10::cuda::CUDAGuard guard(x.device());
    at::Tensor y = at::empty({a.rows, a.dim}, x.options());
    at::Tensor rstd = at::empty({a.rows}, x.options().dtype(at::kFloat));
    at::Tensor sum = res.defined() ? at::empty({a.rows, a.dim}, x.options()) : at::Tensor();
    if (a.rows == 0) return {y, rstd, sum};
    const auto stream = at::cuda::getCurrentCUDAStream();
    const dim3 grid(unsigned((a.rows + kNormWarps - 1) / kNormWarps));
    SIGHTLINE_DISPATCH_FLOAT_BF16(x.scalar_type(), "rms_norm", [&] {
        const scalar_t* zp = z.defined() ? ptr<scalar_t>(z) : nullptr;
        if (!res.defined() && rowsForward<scalar_t>(ptr<scalar_t>(x), zp, ptr<scalar_t>(w), ptr<scalar_t>(y), ptr<float>(rstd), a, stream))
            return;
        const scalar_t* rp = res.defined() ? ptr<scalar_t>(res) : nullptr;
        scalar_t* sp = res.defined() ? ptr<scalar_t>(sum) : nullptr;
        const int v = packWidth<scalar_t>(a.dim, {x.data_ptr(), zp, rp, sp, w.data_ptr()}, {a.x_stride, a.z_stride});
        withPack(v, [&](auto pack) {
            constexpr int V = decltype(pack)::value;
            auto kernel = z.defined() ? rms_norm_fwd_kernel<scalar_t, true, false, V>
                : res.defined()       ? rms_norm_fwd_kernel<scalar_t, false, true, V>
                                      : rms_norm_fwd_kernel<scalar_t, false, false, V>;
            kernel<<<grid, kNormWarps * 32, 0, stream>>>(ptr<scalar_t>(x), zp, rp, ptr<scalar_t>(w), ptr<scalar_t>(y), sp,
                                                         ptr<float>(rstd), a);
        });
    });
    checkLaunch("rms_norm_fwd_kernel");
    return {y, rstd, sum};
}

// (dx, dz where z is given, dw); dres (or undefined) added to dx.
std::tuple<at::Tensor, at::Tensor, at::Tensor> normBackward(const at::Tensor& dy_in, const at::Tensor& x, const at::Tensor& z,
                                                            const at::Tensor& w, const at::Tensor& rstd, bool zero_centred,
                                                            const at::Tensor& dres = at::Tensor()) {
    const NormArgs a = normArgs(x, z, w, 0, zero_centred);
    const at::Tensor dy = dy_in.contiguous();
    TORCH_CHECK(dy.sizes() == x.sizes() && rstd.numel() == a.rows, "rms_norm_bwd: shapes of dy / rstd do not match x");
    if (dres.defined()) checkLikeRows(dres, a, x, "add_rms_norm_bwd: the residual's gradient");
    const c10::cuda::CUDAGuard guard(x.device());
    at::Tensor dx = at::empty({a.rows, a.dim}, x.options());
    at::Tensor dz = z.defined() ? at::empty({a.rows, a.dim}, x.options()) : at::Tensor();
    const size_t shared = size_t(kNormWarps) * a.dim * sizeof(float);
    const auto stream = at::cuda::getCurrentCUDAStream();
    at::Tensor dw = at::empty_like(w);
    SIGHTLINE_DISPATCH_FLOAT_BF16(x.scalar_type(), "rms_norm_bwd", [&] {
        const scalar_t* zp = z.defined() ? ptr<scalar_t>(z) : nullptr;
        scalar_t* dzp = z.defined() ? ptr<scalar_t>(dz) : nullptr;
        if (!dres.defined() && rowsBackward<scalar_t>(ptr<scalar_t>(dy), ptr<scalar_t>(x), zp, ptr<scalar_t>(w), ptr<float>(rstd), ptr<scalar_t>(dx), dzp, ptr<scalar_t>(dw), a, stream))
            return;
        const scalar_t* dr = dres.defined() ? ptr<scalar_t>(dres) : nullptr;
        const int v = packWidth<scalar_t>(a.dim, {x.data_ptr(), zp, w.data_ptr(), dy.data_ptr(), dr}, {a.x_stride, a.z_stride});
        withPack(v, [&](auto pack) {
            constexpr int V = decltype(pack)::value;
            auto kernel = bwdKernel<scalar_t, V>(z.defined(), a.dim);
            if (shared > 48 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
            // as many blocks as the SMs hold at once, each taking every so many rows
            const int blocks = residentBlocks(kernel, shared, (a.rows + kNormWarps - 1) / kNormWarps);
            sumWeightGrad(blocks, a.dim, ptr<scalar_t>(dw), stream, [&](float* partial) {
                kernel<<<blocks, kNormWarps * 32, shared, stream>>>(ptr<scalar_t>(dy), ptr<scalar_t>(x), zp, ptr<scalar_t>(w),
                                                                    ptr<float>(rstd), dr, ptr<scalar_t>(dx), dzp, partial, a);
                checkLaunch("rms_norm_bwd_kernel");
            });
        });
    });
    return {dx, dz, dw};
}

} // namespace

std::tuple<at::Tensor, at::Tensor> rmsNormForward(const at::Tensor& x, const at::Tensor& w, double eps, bool zero_centred) {
    auto [y, rstd, sum] = normForward(x, at::Tensor(), at::Tensor(), w, eps, zero_centred);
    return {y, rstd};
}

std::tuple<at::Tensor, at::Tensor> rmsNormBackward(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& w,
                                                   const at::Tensor& rstd, bool zero_centred) {
    auto [dx, dz, dw] = normBackward(dy, x, at::Tensor(), w, rstd, zero_centred);
    return {dx, dw};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> addRmsNormForward(const at::Tensor& x, const at::Tensor& res, const at::Tensor& w,
                                                                 double eps, bool zero_centred) {
    auto [y, rstd, sum] = normForward(x, at::Tensor(), res, w, eps, zero_centred);
    return {sum, y, rstd};
}

std::tuple<at::Tensor, at::Tensor> addRmsNormBackward(const at::Tensor& dy, const std::optional<at::Tensor>& dsum, const at::Tensor& sum,
                                                      const at::Tensor& w, const at::Tensor& rstd, bool zero_centred) {
    auto [dx, dz, dw] = normBackward(dy, sum, at::Tensor(), w, rstd, zero_centred, dsum.value_or(at::Tensor()));
    return {dx, dw};
}

std::tuple<at::Tensor, at::Tensor> gatedRmsNormForward(const at::Tensor& x, const at::Tensor& z, const at::Tensor& w, double eps) {
    auto [y, rstd, sum] = normForward(x, z, at::Tensor(), w, eps, false);
    return {y, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> gatedRmsNormBackward(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& z,
                                                                    const at::Tensor& w, const at::Tensor& rstd) {
    return normBackward(dy, x, z, w, rstd, false);
}

} // namespace sightline::kernels
