// The gated delta rule's CUDA kernels (gdn_bodies.h, gdn_pass_body.h, gdn_out_body.h,
// gdn_grad_body.h), blocks of 256 threads (512 for the chunk gradients), two blocks an SM, fp32
// throughout (inputs bf16 or fp32): sightline_gdn_prep (grid chunks x value heads),
// sightline_gdn_fwd (the state pass, segments x value heads x 32-column tiles of the value
// dimension), sightline_gdn_out (the output, chunks x value heads x 64-column tiles),
// sightline_gdn_bwd_state (the reverse pass, the state pass's grid) and sightline_gdn_bwd_chunk
// (the chunk gradients, chunks x value heads). The operators: forward = prep + fwd + out;
// backward = prep (V' from the entering states the forward kept, T the forward's) + bwd_state +
// bwd_chunk.
#include "common.cuh"
#include "gdn_op.h"
#include "ops.h"

namespace sightline::kernels {

using namespace sightline::gdn;

// The kernels launched two blocks an SM (__launch_bounds__(..., 2)) must fit twice in its
// shared memory at the largest heads: 228 KB on an H100 or H200, 1 KB of it reserved a block.
constexpr int64_t kTwoBlockBytes = 228 * 1024 / 2 - 1024;
static_assert(prepFloats(kMaxDim, kMaxDim) * 4 <= kTwoBlockBytes, "the prep no longer fits two blocks an SM");
static_assert(passFloats(kMaxDim, true) * 4 <= kTwoBlockBytes, "the state pass no longer fits two blocks an SM");
static_assert(passFloats(kMaxDim, false) * 4 <= kTwoBlockBytes, "the reverse pass no longer fits two blocks an SM");
static_assert(outFloats(kMaxDim) * 4 <= kTwoBlockBytes, "the output kernel no longer fits two blocks an SM");
static_assert(gradFloats(kMaxDim, kMaxDim) * 4 <= kTwoBlockBytes, "the chunk gradients no longer fit two blocks an SM");

__global__ void __launch_bounds__(kThreads, 2) sightline_gdn_prep(Params p) {
    extern __shared__ __align__(128) float smem[];
    DeviceBlock<8> b{int(threadIdx.x), int(blockDim.x), p.tensor_cores};
    prepBody(b, p, int(blockIdx.x), int(blockIdx.y), smem);
}

__global__ void __launch_bounds__(kThreads, 2) sightline_gdn_fwd(Params p) {
    extern __shared__ __align__(128) float smem[];
    DeviceBlock<8> b{int(threadIdx.x), int(blockDim.x), p.tensor_cores};
    statePassBody(b, p, int(blockIdx.x), int(blockIdx.y), int(blockIdx.z), smem);
}

__global__ void __launch_bounds__(kThreads, 2) sightline_gdn_out(Params p) {
    extern __shared__ __align__(128) float smem[];
    DeviceBlock<4, 4> b{int(threadIdx.x), int(blockDim.x), p.tensor_cores, p.wide_tiles};
    outputBody(b, p, int(blockIdx.x), int(blockIdx.y), int(blockIdx.z), smem);
}

__global__ void __launch_bounds__(kThreads, 2) sightline_gdn_bwd_state(Params p) {
    extern __shared__ __align__(128) float smem[];
    DeviceBlock<8> b{int(threadIdx.x), int(blockDim.x), p.tensor_cores};
    reversePassBody(b, p, int(blockIdx.x), int(blockIdx.y), int(blockIdx.z), smem);
}

// Two blocks an SM (gdn_grad_body.h's carveGrad): 64 registers a thread, so four K steps a batch
// (eight spilled more); ptxas spills about 1.4 KB of loads a thread even so. One layer's
// forward+backward on 1 x 8,192: 8.13 ms, against 9.34 for the same kernel at one block an SM and
// 8.59 for the one before it, whole in shared memory (session 22).
__global__ void __launch_bounds__(kGradThreads, 2) sightline_gdn_bwd_chunk(Params p) {
    extern __shared__ __align__(128) float smem[];
    DeviceBlock<4, 4> b{int(threadIdx.x), int(blockDim.x), p.tensor_cores, p.wide_tiles};
    chunkGradBody(b, p, int(blockIdx.x), int(blockIdx.y), smem);
}

namespace {

void launch(void (*kernel)(Params), const char* name, dim3 grid, int64_t floats, const Params& p, int threads = kThreads) {
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
    const size_t bytes = size_t(floats) * sizeof(float);
    TORCH_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)) == cudaSuccess, name,
                ": cannot have ", bytes, " bytes of shared memory");
    kernel<<<grid, threads, bytes, at::cuda::getCurrentCUDAStream()>>>(p);
    checkLaunch(name);
}

struct CudaRunner {
    static dim3 passGrid(const Params& p) { return dim3(unsigned(p.segments), unsigned(p.hv), unsigned((p.dv + kTileV - 1) / kTileV)); }
    void prep(const Params& p) {
        launch(sightline_gdn_prep, "sightline_gdn_prep", dim3(unsigned(p.chunks), unsigned(p.hv)), prepFloats(p.dk, p.dv), p);
    }
    void pass(const Params& p) { launch(sightline_gdn_fwd, "sightline_gdn_fwd", passGrid(p), passFloats(p.dk, true), p); }
    void output(const Params& p) {
        const dim3 grid(unsigned(p.chunks), unsigned(p.hv), unsigned((p.dv + kOutV - 1) / kOutV));
        launch(sightline_gdn_out, "sightline_gdn_out", grid, outFloats(p.dk), p);
    }
    void reverse(const Params& p) {
        launch(sightline_gdn_bwd_state, "sightline_gdn_bwd_state", passGrid(p), passFloats(p.dk, false), p);
    }
    void grads(const Params& p) {
        launch(sightline_gdn_bwd_chunk, "sightline_gdn_bwd_chunk", dim3(unsigned(p.chunks), unsigned(p.hv)), gradFloats(p.dk, p.dv), p, kGradThreads);
    }
};

void checkInputs(const at::Tensor& q, const at::Tensor& cu, const at::Tensor& off) {
    checkCuda(q, "gdn: q");
    TORCH_CHECK(cu.device() == q.device() && off.device() == q.device(), "gdn: cu_seqlens and chunk_offsets must be on q's device");
}

} // namespace

GdnForwardResult gdnForward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& g, const at::Tensor& beta, const at::Tensor& cu,
                            const at::Tensor& off, int64_t chunks, bool keep_states) {
    checkInputs(q, cu, off);
    const c10::cuda::CUDAGuard guard(q.device());
    CudaRunner run;
    return gdn::forward(run, q, k, v, g, beta, cu, off, chunks, keep_states);
}

GdnBackwardResult gdnBackward(const at::Tensor& dout, const at::Tensor& q,
                              const at::Tensor& k, const at::Tensor& v,
                              const at::Tensor& g, const at::Tensor& beta,
                              const at::Tensor& cu, const at::Tensor& off,
                              const at::Tensor& states, const at::Tensor& inverses,
                              const at::Tensor& values, int64_t chunks) {
    checkInputs(q, cu, off);
    const c10::cuda::CUDAGuard guard(q.device());
    CudaRunner run;
    return gdn::backward(run, dout, q, k, v, g, beta, cu, off, states, inverses, values, chunks);
}

} // namespace sightline::kernels
