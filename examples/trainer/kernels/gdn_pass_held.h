#pragma once
// The forward state pass with the state held in registers (GPU only): the Fixed form of
// sightline_gdn_fwd (gdn.cu), at heads of 128 on the tensor cores' path, where the general form
// (gdn_pass_body.h's statePassBody, which the CPU checks run) keeps the state's slice in shared
// memory and crosses a dozen block barriers a chunk. Same grid (a block per segment, value head and
// 32 value columns, longest segment first), same inputs and outputs, same roundings (the state's
// bf16 copy as the first product's operand, V' e^(gamma_L - gamma) in bf16 as the second's), so
// that the GPU checks hold it to the same reference.
//
// A block is four warps. Warp w holds S^T's rows j = 16 (w % 2) .. + 16 (the block's value
// columns) by the key rows' half 64 (w / 2) .. + 64, as the fp32 accumulators of m16n8k16 tiles
// (32 floats a thread), across all the segment's chunks. A chunk:
//   P^T = S^T W^T (each warp its half of the key rows; the two halves summed through shared memory
//        between the warp pair, one named barrier), V'^T = U^T - P^T (both warps of a pair);
//   S^T = e^(gamma_L) S^T + (V' e^(gamma_L - gamma))^T K, each warp its own key rows.
// The accumulators of one product are the next one's A operand as they lie (C and A fragments of
// m16n8k16 match), so the chain never leaves the registers; W and K are B operands by ldmatrix
// from the chunk's stage. The chunk's W, K, U's columns and gamma are staged (cp.async) while the
// chunk before computes; the entering state and V' go out through a small shared region
// (stmatrix) as whole 16-byte rows.
#if defined(__CUDACC__)
#include "gdn_pass_body.h"
#include "gdn_tc.h"

namespace sightline::gdn::held {

constexpr int kThreads = 128, kDk = kMaxDim, kTile = kTileV;
constexpr int kRowB = 272;           // bytes a staged row of W or K (128 bf16 and 16: stageRow)
constexpr int kRowU = 144;           // bytes a staged row of U's 32 fp32 columns and 16
constexpr int kRowO = 48;            // bytes a row of 16 bf16 going out (32 and 16: no bank conflicts)
constexpr int kStageW = 0, kStageK = kChunk * kRowB, kStageU = 2 * kChunk * kRowB, kStageG = kStageU + kChunk * kRowU;
constexpr int kStage = kStageG + kChunk * 4;     // one chunk's stage; two of them alternate
constexpr int kSwap = 2 * kStage;                // 4 warps' [8 x 32 lanes] float4: the pairs' partial sums
constexpr int kVOut = kSwap + 4 * 4096;          // 4 warps' [32 x 16] bf16 of V' going out
constexpr int kSeg = kVOut + 4 * 32 * kRowO;
constexpr int kBytes = kSeg + 16;
static_assert(kChunk * kRowO <= 4096, "a warp's entering state going out fits its swap region");
static_assert(kRowB == stageRow(kDk, 2) * 4, "W and K staged as the general form stages them");

__device__ __forceinline__ uint32_t sharedAddr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ uint32_t packBf16(float lo, float hi) { return floatToBf16(lo) | uint32_t(floatToBf16(hi)) << 16; }

// Four 8 x 8 bf16 tiles from a warp's fragments into shared memory, transposed (stmatrix): lane l
// gives the address of row l % 8 of tile l / 8; r[m] holds the thread's (g, 2t), (g, 2t + 1) of tile m,
// which land in row 2t and 2t + 1 of it, column g.
__device__ __forceinline__ void stsm4Trans(uint32_t addr, const uint32_t (&r)[4]) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
}

// A warp's [16 x 8 n] fp32 accumulators (8 n-tiles), transposed into rows of 16 bf16 at out
// (row 8 n + .. of tile kN0 + n's columns, kRowO bytes apart), tiles kN0 .. kN0 + kCount: both
// constants, so that x stays in registers.
template <int kN0, int kCount>
__device__ __forceinline__ void stageOut(char* out, const float (&x)[8][4]) {
    constexpr int n0 = kN0;
    const int lane = int(threadIdx.x) % 32;
#pragma unroll
    for (int n = 0; n < kCount; n += 2) {
        const int m = lane / 8; // tile m: n-tile n0 + n + m / 2, rows g (m even) or g + 8 (m odd)
        const uint32_t addr = sharedAddr(out + (8 * (n + m / 2) + lane % 8) * kRowO + (m % 2) * 16);
        const uint32_t r[4] = {packBf16(x[n0 + n][0], x[n0 + n][1]), packBf16(x[n0 + n][2], x[n0 + n][3]),
                               packBf16(x[n0 + n + 1][0], x[n0 + n + 1][1]), packBf16(x[n0 + n + 1][2], x[n0 + n + 1][3])};
        stsm4Trans(addr, r);
    }
}

// Rows of 32 bytes (16 bf16) from shared memory (kRowO apart) to global memory (ld elements apart),
// rows [0, rows), by a warp.
__device__ __forceinline__ void copyOut(const char* src, uint16_t* dst, int64_t ld, int rows) {
    const int lane = int(threadIdx.x) % 32;
    for (int e = lane; e < 2 * rows; e += 32) {
        const int r = e / 2, half = e % 2;
        *reinterpret_cast<uint4*>(dst + r * ld + half * 8) = *reinterpret_cast<const uint4*>(src + r * kRowO + half * 16);
    }
}

// Chunk c's W, K, U's columns and gamma into a stage (nothing outside the segment, but always a group).
__device__ __forceinline__ void stageChunk(const PassSite& s, char* st, int c) {
    const int tid = int(threadIdx.x);
    if (s.has(c)) {
        const Params& p = s.p;
        stage(tid, kThreads, st + kStageW, kRowB, s.wRows(c));
        stage(tid, kThreads, st + kStageK, kRowB, s.keyRows(p.kn, c));
        stage(tid, kThreads, st + kStageU, kRowU, floatRows(p.u, p.dv, s.base(c), s.j0, kChunk, kTile));
        stage(tid, kThreads, st + kStageG, kChunk * 4, s.gammaRows(c));
    }
    commitStaged();
}

// A warp's register state: S^T's [16 x 64] (8 n-tiles of the warp's key rows) and P^T / V'^T's
// [16 x 64] (8 n-tiles of the chunk's tokens).
struct Warp {
    int wj, wk, lane, g, t;
    __device__ Warp() : wj(int(threadIdx.x) / 32 % 2), wk(int(threadIdx.x) / 64), lane(int(threadIdx.x) % 32), g(lane / 4), t(lane % 4) {}
};

// P^T = S^T W^T over the warp's key rows: A from S's accumulators (bf16), B = W's rows by ldmatrix.
__device__ __forceinline__ void productWS(const Warp& w, const float (&S)[8][4], const char* W, float (&P)[8][4]) {
#pragma unroll
    for (int n = 0; n < 8; ++n) P[n][0] = P[n][1] = P[n][2] = P[n][3] = 0.0f;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
        const uint32_t a[4] = {packBf16(S[2 * s][0], S[2 * s][1]), packBf16(S[2 * s][2], S[2 * s][3]),
                               packBf16(S[2 * s + 1][0], S[2 * s + 1][1]), packBf16(S[2 * s + 1][2], S[2 * s + 1][3])};
        const int k0 = 64 * w.wk + 16 * s;
#pragma unroll
        for (int n = 0; n < 8; n += 2) { // tokens 8 n .. + 16: tiles (n, k0), (n, k0 + 8), (n + 1, k0), (n + 1, k0 + 8)
            const int row = 8 * n + w.lane % 8 + (w.lane / 16) * 8, col = k0 + (w.lane / 8 % 2) * 8;
            uint32_t b[4];
            ldsm4<false>(b, sharedAddr(W + row * kRowB + col * 2));
            mma16n8k16(P[n], a, b[0], b[1]);
            mma16n8k16(P[n + 1], a, b[2], b[3]);
        }
    }
}

// S^T += Vc^T K over the chunk's tokens, the warp's key rows: A = Vc (bf16, as packed), B = K's
// rows by ldmatrix, transposed.
__device__ __forceinline__ void productVK(const Warp& w, const uint32_t (&vc)[4][4], const char* K, float (&S)[8][4]) {
#pragma unroll
    for (int s = 0; s < 4; ++s) {
#pragma unroll
        for (int n = 0; n < 8; n += 2) { // key rows 64 wk + 8 n .. + 16: tiles (tokens 16 s, +8) x (n, n + 1)
            const int row = 16 * s + w.lane % 8 + (w.lane / 8 % 2) * 8, col = 64 * w.wk + 8 * n + (w.lane / 16) * 8;
            uint32_t b[4];
            ldsm4<true>(b, sharedAddr(K + row * kRowB + col * 2));
            mma16n8k16(S[n], vc[s], b[0], b[1]);
            mma16n8k16(S[n + 1], vc[s], b[2], b[3]);
        }
    }
}

// The pair's partial sums: this warp's P^T into its swap region, the pair's barrier, the other's added.
__device__ __forceinline__ void sumPair(const Warp& w, char* swap, float (&P)[8][4]) {
    float4* mine = reinterpret_cast<float4*>(swap + (2 * w.wj + w.wk) * 4096);
    const float4* theirs = reinterpret_cast<const float4*>(swap + (2 * w.wj + 1 - w.wk) * 4096);
#pragma unroll
    for (int n = 0; n < 8; ++n) mine[n * 32 + w.lane] = make_float4(P[n][0], P[n][1], P[n][2], P[n][3]);
    asm volatile("bar.sync %0, 64;\n" ::"r"(1 + w.wj)
                 : "memory");
#pragma unroll
    for (int n = 0; n < 8; ++n) {
        const float4 o = theirs[n * 32 + w.lane];
        P[n][0] += o.x, P[n][1] += o.y, P[n][2] += o.z, P[n][3] += o.w;
    }
}

// One chunk from its stage: the entering state out, V' = U - W S (out too), the state's update.
__device__ __forceinline__ void chunkStep(const Warp& w, const PassSite& site, const char* st, char* smem, float (&S)[8][4], int c) {
    const Params& p = site.p;
    char* swapMine = smem + kSwap + (2 * w.wj + w.wk) * 4096;
    // the entering state, bf16, rows 64 wk .. + 64 of columns j0 + 16 wj .. + 16
    stageOut<0, 8>(swapMine, S);
    __syncwarp();
    uint16_t* states = static_cast<uint16_t*>(p.states) + stateBase(p, site.h, c) + int64_t(64 * w.wk) * p.dv + site.j0 + 16 * w.wj;
    copyOut(swapMine, states, p.dv, 64);
    __syncwarp();
    float P[8][4];
    productWS(w, S, st + kStageW, P);
    sumPair(w, smem + kSwap, P);
    const float* U = reinterpret_cast<const float*>(st + kStageU);
    const float* gam = reinterpret_cast<const float*>(st + kStageG);
    const float gl = gam[kChunk - 1];
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int tok = 8 * n + 2 * w.t + e % 2, j = 16 * w.wj + w.g + 8 * (e / 2);
            P[n][e] = U[tok * (kRowU / 4) + j] - P[n][e];
        }
    if (p.vn_keep.p) { // the pair's halves of the tokens
        char* vout = smem + kVOut + (2 * w.wj + w.wk) * 32 * kRowO;
        if (w.wk == 0) stageOut<0, 4>(vout, P);
        else stageOut<4, 4>(vout, P);
        __syncwarp();
        copyOut(vout, static_cast<uint16_t*>(p.vn_keep.p) + (site.base(c) + 32 * w.wk) * p.dv + site.j0 + 16 * w.wj, p.dv, 32);
    }
    uint32_t vc[4][4];
#pragma unroll
    for (int s = 0; s < 4; ++s)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int n = 2 * s + h, tok = 8 * n + 2 * w.t;
            const float e0 = expf_(gl - gam[tok]), e1 = expf_(gl - gam[tok + 1]);
            vc[s][2 * h] = packBf16(P[n][0] * e0, P[n][1] * e1);
            vc[s][2 * h + 1] = packBf16(P[n][2] * e0, P[n][3] * e1);
        }
    const float a = expf_(gl);
#pragma unroll
    for (int n = 0; n < 8; ++n) S[n][0] *= a, S[n][1] *= a, S[n][2] *= a, S[n][3] *= a;
    productVK(w, vc, st + kStageK, S);
}

// The final state, fp32, from the accumulators.
__device__ __forceinline__ void writeFinal(const Warp& w, const PassSite& site, const float (&S)[8][4]) {
    const Params& p = site.p;
    float* f = p.final_state + (int64_t(site.seg) * p.hv + site.h) * kDk * p.dv + site.j0;
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int r = 64 * w.wk + 8 * n + 2 * w.t + e % 2, j = 16 * w.wj + w.g + 8 * (e / 2);
            f[int64_t(r) * p.dv + j] = S[n][e];
        }
}

// The block's pass: its segment (by rank), then the chunks, each staged a chunk ahead.
__device__ __forceinline__ void statePass(const Params& p, const PassBlock& at, char* smem) {
    int* seg = reinterpret_cast<int*>(smem + kSeg);
    for (int s = int(threadIdx.x); s < p.segments; s += kThreads)
        if (segmentRank(p.chunk_off, p.segments, s) == at.rank) seg[0] = s;
    __syncthreads();
    const PassSite site(p, seg[0], at.h, at.tile);
    const Warp w;
    float S[8][4];
#pragma unroll
    for (int n = 0; n < 8; ++n) S[n][0] = S[n][1] = S[n][2] = S[n][3] = 0.0f;
    stageChunk(site, smem, site.first);
    for (int c = site.first; c < site.end; ++c) {
        const char* st = smem + ((c - site.first) % 2) * kStage;
        waitStaged<0>();
        __syncthreads(); // chunk c landed for every thread; chunk c - 1's stage and swaps are read
        stageChunk(site, smem + ((c - site.first + 1) % 2) * kStage, c + 1);
        chunkStep(w, site, st, smem, S, c);
    }
    if (p.final_state) writeFinal(w, site, S);
}

} // namespace sightline::gdn::held
#endif
