#pragma once
// RMSNorm kernels for short rows (norms.cu), forward and backward, plain or gated: rows of exactly
// kLanes packs of 16 bytes (the delta rule's gated norm over heads of 128 bf16: 16 lanes; norms
// over heads of 256 bf16: 32), each lane one pack of its row, 32 / kLanes rows a warp. The general
// kernels take a warp a row in packs that divide the warp's width (8 bytes a lane at 128 bf16),
// read the row twice and keep a slice of shared memory a warp for the weight gradient. Here every
// lane loads 16 bytes of each input once, keeps them for both uses, and adds its columns' weight
// gradient in registers over all its rows. The gated norm alone at the benchmark's shape (8,192
// tokens x 32 heads of 128 bf16, H200, session 32): forward 93 -> 62 us, backward 167 -> 108 us
// (2.0 -> 3.1 TB/s); the backward one row a group at a time at three blocks an SM (80 registers)
// against two rows at a time at two blocks (128 registers, 128 us) or one row at four (64
// registers, spilling 48 bytes: 119 us).
#include "common.cuh"

namespace sightline::kernels {

constexpr int kNormWarps = 8; // warps a block (norms.cu's kernels: rows a block)

struct NormArgs {
    int64_t rows = 0;
    int dim = 0;
    int64_t x_stride = 0, z_stride = 0; // elements between rows
    float eps = 0;
    float shift = 0; // 1 for the zero-centred scale (1 + w), 0 for w
};

// The sum over the kLanes lanes of a row (an aligned group of the warp): every lane of the warp
// must call it.
template <int kLanes>
__device__ __forceinline__ float rowGroupSum(float v) {
    for (int o = kLanes / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// The lanes a row takes when each holds one 16-byte pack of it, or 0 where the rows do not split
// so (dim * sizeof(T) not 8, 16 or 32 packs; a pointer or a row stride off 16 bytes).
template <typename T>
inline int rowLanes(int64_t dim, std::initializer_list<const void*> ptrs, std::initializer_list<int64_t> strides) {
    constexpr int64_t V = 16 / sizeof(T);
    const int64_t lanes = dim / V;
    if (dim % V || (lanes != 8 && lanes != 16 && lanes != 32) || !aligned16(ptrs)) return 0;
    for (int64_t s : strides)
        if (s % V) return 0;
    return int(lanes);
}

template <typename T, bool kGated, int kLanes>
__global__ void __launch_bounds__(kNormWarps * 32) rms_norm_fwd_rows_kernel(const T* x, const T* z, const T* w, T* y, float* rstd,
                                                                            NormArgs a) {
    constexpr int V = 16 / sizeof(T);
    const int lane = threadIdx.x % kLanes;
    const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kLanes;
    const bool live = row < a.rows; // every lane takes part in the row sums
    float xv[V] = {}, zv[V] = {}, wv[V];
    if (live) {
        loadPack<V>(x + row * a.x_stride + lane * V, xv);
        if constexpr (kGated) loadPack<V>(z + row * a.z_stride + lane * V, zv);
    }
    loadPack<V>(w + lane * V, wv);
    float ss = 0;
#pragma unroll
    for (int k = 0; k < V; ++k) ss += xv[k] * xv[k];
    const float r = rsqrtf(rowGroupSum<kLanes>(ss) / float(a.dim) + a.eps);
    if (!live) return;
    float out[V];
#pragma unroll
    for (int k = 0; k < V; ++k) {
        out[k] = xv[k] * r * (wv[k] + a.shift);
        if constexpr (kGated) out[k] *= siluf(zv[k]);
    }
    storePack<V>(y + row * a.dim + lane * V, out);
    if (lane == 0) rstd[row] = r;
}

// One row's inputs as loaded (16 bytes each), converted at their use.
template <typename T, bool kGated>
struct RowPacks {
    static constexpr int V = 16 / sizeof(T);
    Pack<T, V> d, x, z;
    float r = 0;
    bool live = false;
    __device__ __forceinline__ void load(const T* dy, const T* x_, const T* z_, const float* rstd, int64_t row, int lane,
                                         const NormArgs& a) {
        live = row < a.rows;
        if (!live) return;
        d = *reinterpret_cast<const Pack<T, V>*>(dy + row * a.dim + lane * V);
        x = *reinterpret_cast<const Pack<T, V>*>(x_ + row * a.x_stride + lane * V);
        if constexpr (kGated) z = *reinterpret_cast<const Pack<T, V>*>(z_ + row * a.z_stride + lane * V);
        r = rstd[row];
    }
};

// One row's dx (and dz) stored, its weight gradient added to dw (this lane's columns). Only the
// gate's sigmoid is kept between the row sum's two uses; dy, x and z are converted again from
// their packs (floats of all of them held across the sum made the kernel spill).
template <typename T, bool kGated, int kLanes>
__device__ __forceinline__ void rowGrads(const RowPacks<T, kGated>& in, const float (&w)[16 / sizeof(T)], float (&dw)[16 / sizeof(T)],
                                         T* dx, T* dz, int64_t row, int lane, const NormArgs& a) {
    constexpr int V = 16 / sizeof(T);
    float sig[V], dot = 0;
#pragma unroll
    for (int k = 0; k < V; ++k) {
        const float z = kGated ? toFloat(in.z.v[k]) : 0.0f;
        sig[k] = kGated ? sigmoidf(z) : 1.0f;
        const float gate = kGated ? z * sig[k] : 1.0f;
        dot += in.live ? toFloat(in.d.v[k]) * (w[k] + a.shift) * gate * toFloat(in.x.v[k]) * in.r : 0.0f;
    }
    dot = rowGroupSum<kLanes>(dot) / float(a.dim);
    if (!in.live) return;
    float dxv[V], dzv[V];
#pragma unroll
    for (int k = 0; k < V; ++k) {
        const float d = toFloat(in.d.v[k]), xh = toFloat(in.x.v[k]) * in.r, scale = w[k] + a.shift;
        float gate = 1.0f;
        if constexpr (kGated) {
            const float z = toFloat(in.z.v[k]);
            gate = z * sig[k];
            dzv[k] = d * scale * xh * sig[k] * (1.0f + z * (1.0f - sig[k])); // silu'(z)
        }
        dxv[k] = in.r * (d * scale * gate - xh * dot);
        dw[k] += d * xh * gate;
    }
    storePack<V>(dx + row * a.dim + lane * V, dxv);
    if constexpr (kGated) storePack<V>(dz + row * a.dim + lane * V, dzv);
}

// A row a lane group at a time, rows gridDim.x * kGroups apart; the block's weight gradient (its
// groups' registers summed through shared memory) to `partial` (a row a block), summed over
// blocks by norms.cu's weight_grad_sum_kernel.
template <typename T, bool kGated, int kLanes>
__global__ void __launch_bounds__(kNormWarps * 32, 3) rms_norm_bwd_rows_kernel(const T* dy, const T* x, const T* z, const T* w,
                                                                               const float* rstd, T* dx, T* dz, float* partial,
                                                                               NormArgs a) {
    constexpr int V = 16 / sizeof(T), kGroups = kNormWarps * 32 / kLanes;
    __shared__ float dw_groups[kGroups][kLanes * V];
    const int lane = threadIdx.x % kLanes, group = threadIdx.x / kLanes;
    float wv[V], dw[V] = {};
    loadPack<V>(w + lane * V, wv);
    // the loop runs alike for a whole warp (its groups' rows differ by less than a warp's rows)
    const int64_t step = int64_t(gridDim.x) * kGroups;
    for (int64_t base = int64_t(blockIdx.x) * kGroups + (threadIdx.x / 32) * (32 / kLanes); base < a.rows; base += step) {
        const int64_t row = base + group % (32 / kLanes);
        RowPacks<T, kGated> in;
        in.load(dy, x, z, rstd, row, lane, a);
        rowGrads<T, kGated, kLanes>(in, wv, dw, dx, dz, row, lane, a);
    }
#pragma unroll
    for (int k = 0; k < V; ++k) dw_groups[group][lane * V + k] = dw[k];
    __syncthreads();
    for (int i = threadIdx.x; i < kLanes * V; i += blockDim.x) {
        float sum = 0;
        for (int g = 0; g < kGroups; ++g) sum += dw_groups[g][i];
        partial[int64_t(blockIdx.x) * a.dim + i] = sum;
    }
}

} // namespace sightline::kernels
