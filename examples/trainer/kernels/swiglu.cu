// SwiGLU, the MLP's activation: silu(gate) * up, forward and backward in one pass each, fp32 math.
#include "common.cuh"
#include "ops.h"

namespace sightline::kernels {

template <typename T>
__global__ void swiglu_fwd_kernel(const T* gate, const T* up, T* out, int64_t n) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        out[i] = fromFloat<T>(siluf(toFloat(gate[i])) * toFloat(up[i]));
}

template <typename T>
__global__ void swiglu_bwd_kernel(const T* dout, const T* gate, const T* up, T* dgate, T* dup, int64_t n) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const float d = toFloat(dout[i]), g = toFloat(gate[i]), u = toFloat(up[i]);
        dgate[i] = fromFloat<T>(d * u * siluGrad(g));
        dup[i] = fromFloat<T>(d * siluf(g));
    }
}

namespace {

void checkPair(const at::Tensor& gate, const at::Tensor& up) {
    checkCuda(gate, "swiglu: gate");
    TORCH_CHECK(gate.sizes() == up.sizes() && gate.scalar_type() == up.scalar_type(), "swiglu: gate and up must match");
}

dim3 elementwiseGrid(int64_t n) { return dim3(unsigned(std::clamp<int64_t>((n + 255) / 256, 1, 16 * multiprocessors()))); }

} // namespace

at::Tensor swigluForward(const at::Tensor& gate_in, const at::Tensor& up_in) {
    checkPair(gate_in, up_in);
    const at::Tensor gate = gate_in.contiguous(), up = up_in.contiguous();
    const c10::cuda::CUDAGuard guard(gate.device());
    at::Tensor out = at::empty_like(gate);
    if (gate.numel() == 0) return out;
    SIGHTLINE_DISPATCH_FLOAT_BF16(gate.scalar_type(), "swiglu", [&] {
        swiglu_fwd_kernel<scalar_t><<<elementwiseGrid(gate.numel()), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
            ptr<scalar_t>(gate), ptr<scalar_t>(up), ptr<scalar_t>(out), gate.numel());
    });
    checkLaunch("swiglu_fwd_kernel");
    return out;
}

std::tuple<at::Tensor, at::Tensor> swigluBackward(const at::Tensor& dout_in, const at::Tensor& gate_in, const at::Tensor& up_in) {
    checkPair(gate_in, up_in);
    const at::Tensor dout = dout_in.contiguous(), gate = gate_in.contiguous(), up = up_in.contiguous();
    TORCH_CHECK(dout.sizes() == gate.sizes(), "swiglu_bwd: dout must match gate");
    const c10::cuda::CUDAGuard guard(gate.device());
    at::Tensor dgate = at::empty_like(gate), dup = at::empty_like(up);
    if (gate.numel() == 0) return {dgate, dup};
    SIGHTLINE_DISPATCH_FLOAT_BF16(gate.scalar_type(), "swiglu_bwd", [&] {
        swiglu_bwd_kernel<scalar_t><<<elementwiseGrid(gate.numel()), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
            ptr<scalar_t>(dout), ptr<scalar_t>(gate), ptr<scalar_t>(up), ptr<scalar_t>(dgate), ptr<scalar_t>(dup), gate.numel());
    });
    checkLaunch("swiglu_bwd_kernel");
    return {dgate, dup};
}

} // namespace sightline::kernels
