#pragma once
// Shared pieces of the trainer's CUDA kernels: element conversions, warp reductions, launch checks
// and the shapes every kernel checks its inputs against.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace sightline::kernels {

__device__ __forceinline__ float toFloat(float x) { return x; }
__device__ __forceinline__ float toFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T>
__device__ __forceinline__ T fromFloat(float x);
template <>
__device__ __forceinline__ float fromFloat<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float x) { return __float2bfloat16(x); }

// V adjacent elements as one load or store of V * sizeof(T) bytes (the address aligned to that).
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
    T v[V];
};
template <int V, typename T>
__device__ __forceinline__ void loadPack(const T* p, float (&out)[V]) {
    const Pack<T, V> pk = *reinterpret_cast<const Pack<T, V>*>(p);
#pragma unroll
    for (int k = 0; k < V; ++k) out[k] = toFloat(pk.v[k]);
}
template <int V, typename T>
__device__ __forceinline__ void storePack(T* p, const float (&in)[V]) {
    Pack<T, V> pk;
#pragma unroll
    for (int k = 0; k < V; ++k) pk.v[k] = fromFloat<T>(in[k]);
    *reinterpret_cast<Pack<T, V>*>(p) = pk;
}
// The widest V of at most 16 bytes whose packs the row length and every address allow (1 always
// does): `n` elements a row split in whole packs over a warp's 32 lanes, and every pointer and row
// stride a multiple of the pack.
template <typename T>
inline int packWidth(int64_t n, std::initializer_list<const void*> ptrs, std::initializer_list<int64_t> strides) {
    for (int v = int(16 / sizeof(T)); v > 1; v /= 2) {
        bool ok = n % (32 * v) == 0;
        for (const void* q : ptrs) ok = ok && reinterpret_cast<uintptr_t>(q) % (v * sizeof(T)) == 0;
        for (int64_t st : strides) ok = ok && st % v == 0;
        if (ok) return v;
    }
    return 1;
}

// Whether every pointer is 16-byte aligned (a 16-byte pack may be read or written there).
inline bool aligned16(std::initializer_list<const void*> ptrs) {
    for (const void* q : ptrs)
        if (reinterpret_cast<uintptr_t>(q) % 16) return false;
    return true;
}

// f(std::integral_constant<int, V>) where n elements are whole packs of V and every pointer is
// 16-byte aligned, else f(std::integral_constant<int, 1>): the kernels' pack width as a constant.
template <int V, typename F>
void withAlignedPack(int64_t n, std::initializer_list<const void*> ptrs, F&& f) {
    if (n % V == 0 && aligned16(ptrs)) f(std::integral_constant<int, V>{});
    else f(std::integral_constant<int, 1>{});
}

__device__ __forceinline__ float sigmoidf(float x) { return 1.0f / (1.0f + __expf(-x)); }
__device__ __forceinline__ float siluf(float x) { return x * sigmoidf(x); }
// d silu(x) / dx = s (1 + x (1 - s)), s = sigmoid(x)
__device__ __forceinline__ float siluGrad(float x) {
    const float s = sigmoidf(x);
    return s * (1.0f + x * (1.0f - s));
}

template <typename T>
__device__ __forceinline__ T warpSum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warpMax(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

inline void checkLaunch(const char* kernel) {
    const cudaError_t e = cudaGetLastError();
    TORCH_CHECK(e == cudaSuccess, kernel, ": launch failed: ", cudaGetErrorString(e));
}

inline void checkCuda(const at::Tensor& t, const char* what) {
    TORCH_CHECK(t.is_cuda(), what, " must be a CUDA tensor");
}

inline int multiprocessors() { return at::cuda::getCurrentDeviceProperties()->multiProcessorCount; }

template <typename T>
T* ptr(const at::Tensor& t) { return reinterpret_cast<T*>(t.data_ptr()); }

// Runs FN with `scalar_t` bound to the CUDA type of TYPE: float or bf16, the two the kernels take.
#define SIGHTLINE_DISPATCH_FLOAT_BF16(TYPE, NAME, ...)                                     \
    [&] {                                                                                  \
        switch (TYPE) {                                                                    \
        case at::kFloat: {                                                                 \
            using scalar_t = float;                                                        \
            return __VA_ARGS__();                                                          \
        }                                                                                  \
        case at::kBFloat16: {                                                              \
            using scalar_t = __nv_bfloat16;                                                \
            return __VA_ARGS__();                                                          \
        }                                                                                  \
        default: TORCH_CHECK(false, NAME, ": float or bfloat16 tensors only, got ", TYPE); \
        }                                                                                  \
    }()

} // namespace sightline::kernels
