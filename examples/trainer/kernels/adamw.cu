// AdamW over every parameter in one launch a dtype: fp32 arithmetic throughout (libtorch's
// `_fused_adamw_`, which the CPU path and the checks use, mixes in its double hyperparameters, so
// the two differ in the last bit of some elements), 16-byte loads and stores, up to 256 tensors a
// launch and enough blocks to fill the GPU. Over the 4.2 B bf16 parameters of the benchmark model
// on the H200 it took 15.5 ms (3.8 TB/s) against libtorch's 25.7 ms (2.3 TB/s; `--only
// adamw-bench`, docs/trainer.md); a form in libtorch's double arithmetic was no faster than
// libtorch's. Unlike libtorch's, it does not write the unscaled gradient back when a grad_scale is
// given: the trainer drops the gradients after the step.
#include "common.cuh"
#include "ops.h"

#include <cmath>

namespace sightline::kernels {

constexpr int kAdamThreads = 256;
constexpr int kAdamList = 256; // tensors a launch: the argument block stays under 16 KB (CUDA 12.1+ allow 32 KB)

// The tensors of one launch and where each one's tiles start in the launch's tile count.
struct AdamwList {
    void* p[kAdamList];
    const void* g[kAdamList];
    void* m[kAdamList];
    void* v[kAdamList];
    const float* step[kAdamList];
    int64_t n[kAdamList];
    int64_t tile0[kAdamList + 1];
    bool packed[kAdamList]; // all four 16-byte aligned: whole packs of 16 bytes
    int count;
};

struct AdamwHyper {
    float lr, beta1, beta2, eps, lr_wd, one_minus_beta1, one_minus_beta2;
    const float* grad_scale; // null: none
};

// One tensor's step constants: the bias-corrected step size, sqrt of the second bias correction.
struct AdamwStepConst {
    float step_size, bc2_sqrt;
};
__device__ __forceinline__ AdamwStepConst stepConst(const AdamwHyper& h, float step) {
    const float bc1 = 1.0f - powf(h.beta1, step), bc2 = 1.0f - powf(h.beta2, step);
    return {h.lr / bc1, sqrtf(bc2)};
}

// One element: the decoupled weight decay, the moments, the bias-corrected step. `inv_scale`
// undoes the gradient's clipping (1 without it).
__device__ __forceinline__ void adamwElement(const AdamwHyper& h, const AdamwStepConst& k, float inv_scale, float& p, float g, float& m,
                                             float& v) {
    g *= inv_scale;
    p -= h.lr_wd * p;
    m = h.beta1 * m + h.one_minus_beta1 * g;
    v = h.beta2 * v + h.one_minus_beta2 * g * g;
    p -= k.step_size * m / (sqrtf(v) / k.bc2_sqrt + h.eps);
}

template <typename T, int V>
__device__ __forceinline__ void adamwPack(const AdamwHyper& h, const AdamwStepConst& k, float inv_scale, T* p, const T* g, T* m, T* v) {
    float pf[V], gf[V], mf[V], vf[V];
    loadPack<V>(p, pf);
    loadPack<V>(g, gf);
    loadPack<V>(m, mf);
    loadPack<V>(v, vf);
#pragma unroll
    for (int e = 0; e < V; ++e) adamwElement(h, k, inv_scale, pf[e], gf[e], mf[e], vf[e]);
    storePack<V>(p, pf);
    storePack<V>(m, mf);
    storePack<V>(v, vf);
}

// Each block walks tiles of kAdamThreads * V elements across the launch's tensors (its tiles come
// in order, so the tensor index only moves forward, and the step constants are made once a
// tensor); a thread takes V adjacent elements, as one pack where the tensor allows, else one by
// one (a tensor's ragged end, or unaligned tensors).
template <typename T>
__global__ void __launch_bounds__(kAdamThreads) sightline_fused_adamw_kernel(AdamwList list, AdamwHyper h) {
    constexpr int V = 16 / sizeof(T), kTile = kAdamThreads * V;
    const float inv_scale = h.grad_scale ? 1.0f / *h.grad_scale : 1.0f;
    int t = 0, made = -1;
    AdamwStepConst k{};
    for (int64_t tile = blockIdx.x; tile < list.tile0[list.count]; tile += gridDim.x) {
        while (tile >= list.tile0[t + 1]) ++t;
        const int64_t i0 = (tile - list.tile0[t]) * kTile + int64_t(threadIdx.x) * V, n = list.n[t];
        if (i0 >= n) continue;
        if (made != t) {
            k = stepConst(h, *list.step[t]);
            made = t;
        }
        T *p = static_cast<T*>(list.p[t]) + i0, *m = static_cast<T*>(list.m[t]) + i0, *v = static_cast<T*>(list.v[t]) + i0;
        const T* g = static_cast<const T*>(list.g[t]) + i0;
        if (list.packed[t] && i0 + V <= n) {
            adamwPack<T, V>(h, k, inv_scale, p, g, m, v);
            continue;
        }
        for (int e = 0; e < V && i0 + e < n; ++e) {
            float pf = toFloat(p[e]), mf = toFloat(m[e]), vf = toFloat(v[e]);
            adamwElement(h, k, inv_scale, pf, toFloat(g[e]), mf, vf);
            p[e] = fromFloat<T>(pf);
            m[e] = fromFloat<T>(mf);
            v[e] = fromFloat<T>(vf);
        }
    }
}

namespace {

void checkAdamwLists(at::TensorList p, at::TensorList g, at::TensorList m, at::TensorList v, at::TensorList s,
                     const std::optional<at::Tensor>& scale) {
    TORCH_CHECK(g.size() == p.size() && m.size() == p.size() && v.size() == p.size() && s.size() == p.size(),
                "adamw_: params, grads, exp_avg, exp_avg_sq and steps must be lists of one length");
    for (size_t i = 0; i < p.size(); ++i) {
        checkCuda(p[i], "adamw_: params");
        for (const at::Tensor* x : {&g[i], &m[i], &v[i]})
            TORCH_CHECK(x->device() == p[i].device() && x->scalar_type() == p[i].scalar_type() && x->sizes() == p[i].sizes() &&
                            x->is_contiguous(),
                        "adamw_: grads and states must be contiguous and match their parameter's device, dtype and shape");
        TORCH_CHECK(p[i].is_contiguous(), "adamw_: parameters must be contiguous");
        TORCH_CHECK(p[i].scalar_type() == at::kFloat || p[i].scalar_type() == at::kBFloat16, "adamw_: float or bfloat16 parameters only, got ",
                    p[i].scalar_type());
        TORCH_CHECK(s[i].device() == p[i].device() && s[i].scalar_type() == at::kFloat && s[i].numel() == 1,
                    "adamw_: each step must be a float scalar on its parameter's device");
    }
    TORCH_CHECK(!scale || (scale->is_cuda() && scale->scalar_type() == at::kFloat && scale->numel() == 1),
                "adamw_: grad_scale must be a float scalar on the GPU");
}

// One launch for tensors `idx` (at most kAdamList, one dtype).
template <typename T>
void launchAdamw(const std::vector<size_t>& idx, at::TensorList p, at::TensorList g, at::TensorList m, at::TensorList v,
                 at::TensorList s, const AdamwHyper& h) {
    constexpr int64_t kTile = kAdamThreads * (16 / sizeof(T));
    AdamwList list{};
    list.count = int(idx.size());
    for (size_t j = 0; j < idx.size(); ++j) {
        const size_t i = idx[j];
        list.p[j] = p[i].data_ptr();
        list.g[j] = g[i].data_ptr();
        list.m[j] = m[i].data_ptr();
        list.v[j] = v[i].data_ptr();
        list.step[j] = s[i].data_ptr<float>();
        list.n[j] = p[i].numel();
        list.packed[j] = aligned16({list.p[j], list.g[j], list.m[j], list.v[j]});
        list.tile0[j + 1] = list.tile0[j] + (list.n[j] + kTile - 1) / kTile;
    }
    const int64_t tiles = list.tile0[list.count];
    if (tiles == 0) return;
    const unsigned blocks = unsigned(std::min<int64_t>(tiles, 8 * int64_t(multiprocessors())));
    sightline_fused_adamw_kernel<T><<<blocks, kAdamThreads, 0, at::cuda::getCurrentCUDAStream()>>>(list, h);
    checkLaunch("sightline_fused_adamw_kernel");
}

} // namespace

void adamwStep(at::TensorList params, at::TensorList grads, at::TensorList exp_avg, at::TensorList exp_avg_sq, at::TensorList steps,
               double lr, double beta1, double beta2, double weight_decay, double eps, const std::optional<at::Tensor>& grad_scale) {
    checkAdamwLists(params, grads, exp_avg, exp_avg_sq, steps, grad_scale);
    if (params.empty()) return;
    const c10::cuda::CUDAGuard guard(params[0].device());
    const AdamwHyper h{float(lr), float(beta1), float(beta2), float(eps), float(lr * weight_decay), float(1 - beta1), float(1 - beta2),
                       grad_scale ? grad_scale->data_ptr<float>() : nullptr};
    for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
        std::vector<size_t> idx;
        const auto flush = [&] {
            if (idx.empty()) return;
            SIGHTLINE_DISPATCH_FLOAT_BF16(dtype, "adamw_", [&] { launchAdamw<scalar_t>(idx, params, grads, exp_avg, exp_avg_sq, steps, h); });
            idx.clear();
        };
        for (size_t i = 0; i < params.size(); ++i) {
            if (params[i].scalar_type() != dtype || params[i].numel() == 0) continue;
            idx.push_back(i);
            if (idx.size() == size_t(kAdamList)) flush();
        }
        flush();
    }
}

} // namespace sightline::kernels
