// The gated delta rule's CUDA kernels (gdn_bodies.h, gdn_pass_body.h, gdn_out_body.h,
// gdn_grad_body.h), blocks of 512 threads (256 for the output), two blocks an SM, fp32 arithmetic
// (inputs bf16 or fp32; what one kernel leaves another, Params::bf16_scratch, in bf16 where the
// inputs are, on the tensor cores' path): sightline_gdn_prep (grid chunks x value heads), sightline_gdn_fwd (the
// state pass, segments x value heads x 32-column tiles of the value dimension, longest segment
// first), sightline_gdn_out (the output, chunks x value heads x 64-column tiles),
// sightline_gdn_bwd_state (the reverse pass, the state pass's grid) and sightline_gdn_bwd_chunk
// (the chunk gradients, chunks x value heads; in clusters of a key head's two value heads where
// Params::pair). The operators: forward = prep + fwd + out; backward
// = prep (V' from the entering states the forward kept, T the forward's) + bwd_state + bwd_chunk.
// Each kernel is a template of two forms, general and Fixed (below), under one name; the state
// passes' Fixed forms are another body, four warps holding the state in registers
// (gdn_pass_held.h, gdn_reverse_held.h), one block an SM; the output's is sightline_gdn_out_held,
// its tile in registers (gdn_out_held.h). The held forms read their operands as the tensor memory
// accelerator's tiles (gdn_held_tiles.h, tensor maps made for each launch: gdn_tile_map.h).
#include "common.cuh"
#include "gdn_op.h"
#include "gdn_out_held.h"
#include "gdn_pass_held.h"
#include "gdn_reverse_held.h"
#include "gdn_tile_map.h"
#include "ops.h"

#include <cstdlib>
#include <type_traits>

namespace sightline::kernels {

using namespace sightline::gdn;

// The kernels launched two blocks an SM (__launch_bounds__(..., 2)) must fit twice in its
// shared memory at the largest heads: 228 KB on an H100 or H200, 1 KB of it reserved a block.
constexpr int64_t kTwoBlockBytes = 228 * 1024 / 2 - 1024;
static_assert(prepFloats(kMaxDim, kMaxDim, 2) * 4 <= kTwoBlockBytes, "the prep no longer fits two blocks an SM");
// (the passes in the tensor cores' path, whose scratch is bf16; fp32's stages take twice the space)
static_assert(passFloats(kMaxDim, true, 2) * 4 <= kTwoBlockBytes, "the state pass no longer fits two blocks an SM");
static_assert(passFloats(kMaxDim, false, 2) * 4 <= kTwoBlockBytes, "the reverse pass no longer fits two blocks an SM");
static_assert(held::kReverseBytes <= 227 * 1024, "the held reverse pass no longer fits an SM");
static_assert(held::kOutputBytes <= kTwoBlockBytes, "the held output no longer fits two blocks an SM");
static_assert(outFloats(kMaxDim, false) * 4 <= kTwoBlockBytes, "the output kernel no longer fits two blocks an SM");
static_assert(outFloats(kMaxDim, true) * 4 <= 228 * 1024 / 3 - 1024, "the output kernel in bf16 no longer fits three blocks an SM");
static_assert(gradFloats(kMaxDim, kMaxDim) * 4 <= kTwoBlockBytes, "the chunk gradients no longer fit two blocks an SM");

// Each kernel in two forms: general, and with the benchmark's heads (128 x 128) and the tensor
// cores' path as constants (Fixed), where every size, stride, tile count and branch the bodies
// derive from them folds into the code: the chunk gradients' SASS 25,800 -> 9,800 instructions
// and their spill loads 1,120 -> 136 bytes a thread (ptxas); one layer's forward+backward on
// 1 x 8,192 / 8 x 1,024 / mixed 7.59 / 6.94 / 7.40 -> 6.65 / 6.21 / 6.82 ms, the trainer +2.0%
// (session 26). The launch picks (fixedHeads); other heads, and the plain path, take the general
// form, which the CPU tests run. Each kernel runs its body on fixed(p) (p itself in the general
// form, a copy with the constants in the Fixed one) with a block of
// threads<Threads, Fixed>(); Wide: the body's products take wide tiles.
template <bool Wide, bool Fixed>
__device__ __forceinline__ std::conditional_t<Fixed, Params, const Params&> fixed(const Params& p) {
    if constexpr (Fixed) {
        Params f = p;
        f.dk = kMaxDim;
        f.dv = kMaxDim;
        f.tensor_cores = true;
        f.bf16_scratch = true; // as the tensor cores' path has it (gdn_op.h), with q, k and v bf16
        f.q.bf16 = f.k.bf16 = f.v.bf16 = true;
        f.o.bf16 = f.vn_keep.bf16 = f.grad_v.bf16 = true; // in v's dtype (gdn_op.h)
        f.wide_tiles = Wide;
        f.fours = true; // the launch takes the Fixed form only where the rows allow it
        return f;
    } else {
        return p;
    }
}
template <int Threads, bool Fixed>
__device__ __forceinline__ int threads() { return Fixed ? Threads : int(blockDim.x); }
// Which kernels' products take wide tiles where Params::wide_tiles has them (gdn_tc.h): their Fixed
// forms have them as a constant, so the launch takes those forms only where they are on.
constexpr bool kWidePrep = true, kWidePasses = false, kWideOut = true, kWideGrads = true;

// The prep's products in wide tiles where they qualify: its forward 1.89 / 1.74 / 1.96 -> 1.85 /
// 1.72 / 1.92 ms with the state pass and output on the bench's three cases (session 26, two rounds).
// 16 warps a block at 64 registers a thread (batches of 4 K steps; no spills), against 8 at 88
// registers with batches of 8: one layer's forward+backward 6.54 / 6.12 / 6.09 -> 6.45 / 6.04 /
// 6.02 ms on 1 x 8,192 / 8 x 1,024 / mixed, its forward 1.85 -> 1.82 ms on one sequence (session
// 30, two rounds alternated); the output kernel at 16 warps too was slower again.
template <bool Fixed>
__global__ void __launch_bounds__(kPrepThreads, 2) sightline_gdn_prep(Params p) {
    extern __shared__ __align__(128) float smem[];
    const Params& f = fixed<kWidePrep, Fixed>(p);
    DeviceBlock<4, 4> b{int(threadIdx.x), threads<kPrepThreads, Fixed>(), f.tensor_cores, f.wide_tiles};
    prepBody(b, f, int(blockIdx.x), int(blockIdx.y), smem);
}

// The state passes take the held forms' tensor maps (gdn_held_tiles.h) in both forms, so that
// both are one kernel's; the general form leaves them.
template <bool Fixed>
__global__ void __launch_bounds__(kPassThreads, 2) sightline_gdn_fwd(Params p, const __grid_constant__ held::Maps) {
    extern __shared__ __align__(128) float smem[];
    const Params& f = fixed<kWidePasses, Fixed>(p);
    DeviceBlock<4> b{int(threadIdx.x), threads<kPassThreads, Fixed>(), f.tensor_cores};
    const PassBlock at = passBlock(blockIdx.x, f.hv, passTiles(f));
    statePassBody(b, f, at.rank, at.h, at.tile, smem);
}
// The Fixed form: the state held in registers (gdn_pass_held.h), four warps a block, one block an
// SM (three stages of W, K and U's columns).
template <>
__global__ void __launch_bounds__(held::kThreads, 1) sightline_gdn_fwd<true>(Params p, const __grid_constant__ held::Maps maps) {
    extern __shared__ __align__(128) char held_smem[];
    const Params f = fixed<kWidePasses, true>(p);
    held::statePass(f, maps, passBlock(blockIdx.x, f.hv, passTiles(f)), held_smem);
}

template <bool Fixed>
__global__ void __launch_bounds__(kThreads, 2) sightline_gdn_out(Params p) {
    extern __shared__ __align__(128) float smem[];
    const Params& f = fixed<kWideOut, Fixed>(p);
    DeviceBlock<4, 4> b{int(threadIdx.x), threads<kThreads, Fixed>(), f.tensor_cores, f.wide_tiles};
    outputBody(b, f, int(blockIdx.x), int(blockIdx.y), int(blockIdx.z), smem);
}
// The output's held form (gdn_out_held.h): a chunk's [64 x 128] output tile in registers of eight
// warps, grid chunks x value heads, two blocks an SM. One layer's forward on the H200 0.86 / 0.89 /
// 0.90 -> 0.75 / 0.77 / 0.78 ms (1 x 8,192 / 8 x 1,024 / mixed; session 50, two rounds alternated).
__global__ void __launch_bounds__(held::kOutputThreads, 2) sightline_gdn_out_held(Params p, const __grid_constant__ held::Maps maps) {
    extern __shared__ __align__(128) char held_smem[];
    const Params f = fixed<kWideOut, true>(p);
    held::output(f, maps, int(blockIdx.x), int(blockIdx.y), held_smem);
}

template <bool Fixed>
__global__ void __launch_bounds__(kPassThreads, 2) sightline_gdn_bwd_state(Params p, const __grid_constant__ held::Maps) {
    extern __shared__ __align__(128) float smem[];
    std::conditional_t<Fixed, Params, const Params&> f = fixed<kWidePasses, Fixed>(p);
    if constexpr (Fixed) f.dout.bf16 = true; // the launch takes this form only where the output's gradient is bf16
    DeviceBlock<4> b{int(threadIdx.x), threads<kPassThreads, Fixed>(), f.tensor_cores};
    const PassBlock at = passBlock(blockIdx.x, f.hv, passTiles(f));
    reversePassBody(b, f, at.rank, at.h, at.tile, smem);
}
// The Fixed form: the state's gradient held in registers (gdn_reverse_held.h), four warps a block,
// one block an SM (three stages of K, Q, W, P and the output gradient).
template <>
__global__ void __launch_bounds__(held::kThreads, 1) sightline_gdn_bwd_state<true>(Params p, const __grid_constant__ held::Maps maps) {
    extern __shared__ __align__(128) char held_smem[];
    Params f = fixed<kWidePasses, true>(p);
    f.dout.bf16 = true; // the launch takes this form only where the output's gradient is bf16
    held::reversePass(f, maps, passBlock(blockIdx.x, f.hv, passTiles(f)), held_smem);
}

// Two blocks an SM (gdn_grad_body.h's carveGrad): 64 registers a thread, so four K steps a batch
// (eight spilled more). One layer's forward+backward on 1 x 8,192: 8.13 ms, against 9.34 for the
// same kernel at one block an SM and 8.59 for the one before it, whole in shared memory (session 22).
// Pair (with Fixed): launched in clusters of two blocks, a key head's two value heads (Params::pair).
template <bool Fixed, bool Pair = false>
__global__ void __launch_bounds__(kGradThreads, 2) sightline_gdn_bwd_chunk(Params p) {
    static_assert(Fixed || !Pair, "the pairs take the Fixed form");
    extern __shared__ __align__(128) float smem[];
    std::conditional_t<Fixed, Params, const Params&> f = fixed<kWideGrads, Fixed>(p);
    if constexpr (Fixed) {
        f.vn_given.bf16 = true; // the launch takes this form only where V' is kept in bf16
        f.pair = Pair;
        f.grad_q.bf16 = f.grad_k.bf16 = Pair; // in q's dtype, or the fp32 sums
    }
    DeviceBlock<4, 4> b{int(threadIdx.x), threads<kGradThreads, Fixed>(), f.tensor_cores, f.wide_tiles};
    chunkGradBody(b, f, int(blockIdx.x), int(blockIdx.y), smem);
}

namespace {

// Whether the launch takes the Fixed form of a kernel whose body has wide tiles or not.
bool fixedHeads(const Params& p, bool wide) {
    return p.dk == kMaxDim && p.dv == kMaxDim && p.tensor_cores && (p.wide_tiles || !wide);
}

// cluster_y > 1: in clusters of that many blocks along the grid's y; `more`: the kernel's
// parameters after p.
template <class... More>
void launch(void (*kernel)(Params, More...), const char* name, dim3 grid, int64_t floats, const Params& p, int threads = kThreads,
            unsigned cluster_y = 1, const More&... more) {
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
    const size_t bytes = size_t(floats) * sizeof(float);
    TORCH_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)) == cudaSuccess, name,
                ": cannot have ", bytes, " bytes of shared memory");
#if defined(SIGHTLINE_GDN_PHASE_CLOCK)
    phase_clock::reset(at::cuda::getCurrentCUDAStream());
#endif
    if (cluster_y > 1) {
        cudaLaunchAttribute cluster{};
        cluster.id = cudaLaunchAttributeClusterDimension;
        cluster.val.clusterDim.x = 1;
        cluster.val.clusterDim.y = cluster_y;
        cluster.val.clusterDim.z = 1;
        cudaLaunchConfig_t config{};
        config.gridDim = grid;
        config.blockDim = dim3(unsigned(threads));
        config.dynamicSmemBytes = bytes;
        config.stream = at::cuda::getCurrentCUDAStream();
        config.attrs = &cluster;
        config.numAttrs = 1;
        TORCH_CHECK(cudaLaunchKernelEx(&config, kernel, p, more...) == cudaSuccess, name, ": cannot launch in clusters of ", cluster_y);
    } else {
        kernel<<<grid, threads, bytes, at::cuda::getCurrentCUDAStream()>>>(p, more...);
    }
    checkLaunch(name);
#if defined(SIGHTLINE_GDN_PHASE_CLOCK)
    phase_clock::collect(name, grid.x * grid.y * grid.z, at::cuda::getCurrentCUDAStream());
#endif
}

struct CudaRunner {
    static dim3 passGrid(const Params& p) { return dim3(unsigned(int64_t(p.segments) * p.hv * passTiles(p))); }
    // (given the forward's normalised q and k, the backward's prep copies v's rows alone: no shared memory)
    void prep(const Params& p) {
        const int64_t floats = p.qk_given ? 0 : prepFloats(p.dk, p.dv, scratchBytes(p));
        launch(fixedHeads(p, kWidePrep) ? sightline_gdn_prep<true> : sightline_gdn_prep<false>, "sightline_gdn_prep", dim3(unsigned(p.chunks), unsigned(p.hv)), floats, p, kPrepThreads);
    }
    // The held form reads W, kn and U as the accelerator's tiles and writes the entering states
    // and V' as 16-byte rows.
    void pass(const Params& p) {
        if (fixedHeads(p, kWidePasses) && (!p.vn_keep.p || p.vn_keep.bf16) && aligned16({p.states, p.vn_keep.p, p.w, p.kn, p.u, p.gamma}))
            launch(sightline_gdn_fwd<true>, "sightline_gdn_fwd", passGrid(p), held::kForwardBytes / 4, p, held::kThreads, 1, heldMaps(p, MapsOf::forward));
        else launch(sightline_gdn_fwd<false>, "sightline_gdn_fwd", passGrid(p), passFloats(p.dk, true, scratchBytes(p)), p, kPassThreads, 1, held::Maps{});
    }
    // The held form reads its operands as the accelerator's tiles and writes 16-byte rows of a
    // bf16 output; SIGHTLINE_GDN_NO_HELD_OUTPUT takes the Fixed form instead (to compare).
    static bool heldOutput(const Params& p) {
        return fixedHeads(p, kWideOut) && p.o.bf16 && p.vn_keep.bf16 && p.pb && aligned16({p.o.p, p.vn_keep.p, p.pb, p.qn, p.states, p.gamma}) &&
            std::getenv("SIGHTLINE_GDN_NO_HELD_OUTPUT") == nullptr;
    }
    void output(const Params& p) {
        if (heldOutput(p)) {
            launch(sightline_gdn_out_held, "sightline_gdn_out_held", dim3(unsigned(p.chunks), unsigned(p.hv)), held::kOutputBytes / 4, p,
                   held::kOutputThreads, 1, heldMaps(p, MapsOf::output));
            return;
        }
        const dim3 grid(unsigned(p.chunks), unsigned(p.hv), unsigned((p.dv + kOutV - 1) / kOutV));
        launch(fixedHeads(p, kWideOut) ? sightline_gdn_out<true> : sightline_gdn_out<false>, "sightline_gdn_out", grid, outFloats(p.dk, p.bf16_scratch), p);
    }
    // The held form reads K, Q, W, P (bf16) and the output's gradient as the accelerator's tiles
    // and writes dS and dV' as 16-byte rows.
    void reverse(const Params& p) {
        if (fixedHeads(p, kWidePasses) && p.dout.bf16 && p.pb && aligned16({p.dstates, p.dvn, p.w, p.kn, p.qn, p.pb, p.dout.p, p.gamma}))
            launch(sightline_gdn_bwd_state<true>, "sightline_gdn_bwd_state", passGrid(p), held::kReverseBytes / 4, p, held::kThreads, 1, heldMaps(p, MapsOf::reverse));
        else
            launch(sightline_gdn_bwd_state<false>, "sightline_gdn_bwd_state", passGrid(p), passFloats(p.dk, false, scratchBytes(p)), p, kPassThreads, 1,
                   held::Maps{});
    }
    static bool gradsFixed(const Params& p) { return fixedHeads(p, kWideGrads) && p.vn_given.p && p.vn_given.bf16 && p.fours; }
    // Whether the chunk gradients run as pairs (Params::pair): their Fixed form, two value heads a
    // key head, unless SIGHTLINE_GDN_NO_PAIRS is set (to compare).
    static bool pairs(const Params& p) { return gradsFixed(p) && p.hv == 2 * p.hk && std::getenv("SIGHTLINE_GDN_NO_PAIRS") == nullptr; }
    void grads(const Params& p) {
        const dim3 grid(unsigned(p.chunks), unsigned(p.hv));
        if (p.pair) launch(sightline_gdn_bwd_chunk<true, true>, "sightline_gdn_bwd_chunk", grid, gradFloats(p.dk, p.dv), p, kGradThreads, 2);
        else launch(gradsFixed(p) ? sightline_gdn_bwd_chunk<true> : sightline_gdn_bwd_chunk<false>, "sightline_gdn_bwd_chunk", grid, gradFloats(p.dk, p.dv), p, kGradThreads);
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
                              const at::Tensor& values, const at::Tensor& wy,
                              const at::Tensor& scores, const at::Tensor& keys,
                              const at::Tensor& decays, int64_t chunks) {
    checkInputs(q, cu, off);
    const c10::cuda::CUDAGuard guard(q.device());
    CudaRunner run;
    return gdn::backward(run, dout, q, k, v, g, beta, cu, off, states, inverses, values, wy, scores, keys, decays, chunks);
}

} // namespace sightline::kernels
