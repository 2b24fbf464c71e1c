#pragma once
// The warp-level pieces of the state passes' held forms (gdn_pass_held.h, gdn_reverse_held.h;
// GPU only). A block of four warps carries the [dk x 32] slice of the state (or of its gradient)
// of one segment, value head and 32 value columns, transposed: warp w holds rows j = 16 (w % 2) ..
// + 16 (value columns) by key rows 64 (w / 2) .. + 64, as the fp32 accumulators of eight
// m16n8k16 tiles (32 floats a thread) across all the segment's chunks. The accumulators of one
// product are the next one's A operand as they lie (C and A fragments of m16n8k16 match), so a
// chunk's chain of products never leaves the registers; the chunk's [64 x dk] rows (W, K, Q) are B
// operands by ldmatrix from their stage. A product over the key rows is summed between the two
// warps of a pair (the same value columns) through shared memory, one named barrier.
#if defined(__CUDACC__)
#include "gdn_pass_body.h"
#include "gdn_swizzle.h"
#include "gdn_tc.h"

namespace sightline::gdn::held {

constexpr int kThreads = 128, kDk = kMaxDim;
constexpr int kRowO = 48;                 // bytes a row of 16 bf16 going out (32 and 16: no bank conflicts)
constexpr int kSwapBytes = 4 * 4096;      // 4 warps' [8 x 32 lanes] float4: the pairs' partial sums
constexpr int kOutBytes = 4 * 32 * kRowO; // 4 warps' [32 x 16] bf16 going out
static_assert(kChunk * kRowO <= 4096, "a warp's slice of the state going out fits its swap region");

__device__ __forceinline__ uint32_t sharedAddr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// Four 8 x 8 bf16 tiles from a warp's fragments into shared memory, transposed (stmatrix): lane l
// gives the address of row l % 8 of tile l / 8; r[m] holds the thread's (g, 2t), (g, 2t + 1) of tile m,
// which land in row 2t and 2t + 1 of it, column g (kTrans; else in row g, columns 2t and 2t + 1,
// as ldsm4 reads them).
template <bool kTrans>
__device__ __forceinline__ void stsm4(uint32_t addr, const uint32_t (&r)[4]) {
    if constexpr (kTrans)
        asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
                     : "memory");
    else
        asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
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
        const uint32_t r[4] = {bf16Pair(x[n0 + n][0], x[n0 + n][1]), bf16Pair(x[n0 + n][2], x[n0 + n][3]),
                               bf16Pair(x[n0 + n + 1][0], x[n0 + n + 1][1]), bf16Pair(x[n0 + n + 1][2], x[n0 + n + 1][3])};
        stsm4<true>(addr, r);
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

__device__ __forceinline__ void zero(float (&x)[8][4]) {
#pragma unroll
    for (int n = 0; n < 8; ++n) x[n][0] = x[n][1] = x[n][2] = x[n][3] = 0.0f;
}

// A warp's place in the block (the module's comment) and its lane's in the m16n8k16 fragments.
struct Warp {
    int wj, wk, lane, g, t;
    __device__ Warp() : wj(int(threadIdx.x) / 32 % 2), wk(int(threadIdx.x) / 64), lane(int(threadIdx.x) % 32), g(lane / 4), t(lane % 4) {}
};

// P^T = S^T W^T over the warp's key rows: A from S's accumulators (bf16), B = W's rows by ldmatrix
// (staged as tileRows lands them: gdn_swizzle.h's SwizzledRows).
__device__ __forceinline__ void productWS(const Warp& w, const float (&S)[8][4], const char* W, float (&P)[8][4]) {
    zero(P);
    const uint32_t base = sharedAddr(W);
#pragma unroll
    for (int s = 0; s < 4; ++s) {
        const uint32_t a[4] = {bf16Pair(S[2 * s][0], S[2 * s][1]), bf16Pair(S[2 * s][2], S[2 * s][3]),
                               bf16Pair(S[2 * s + 1][0], S[2 * s + 1][1]), bf16Pair(S[2 * s + 1][2], S[2 * s + 1][3])};
        const int k0 = 64 * w.wk + 16 * s;
#pragma unroll
        for (int n = 0; n < 8; n += 2) { // tokens 8 n .. + 16: tiles (n, k0), (n, k0 + 8), (n + 1, k0), (n + 1, k0 + 8)
            const int row = 8 * n + w.lane % 8 + (w.lane / 16) * 8, col = k0 + (w.lane / 8 % 2) * 8;
            uint32_t b[4];
            ldsm4<false>(b, SwizzledRows::at(base, row, col));
            mma16n8k16(P[n], a, b[0], b[1]);
            mma16n8k16(P[n + 1], a, b[2], b[3]);
        }
    }
}

// S^T += Vc^T K over the chunk's tokens, the warp's key rows: A = Vc (bf16, as packed), B = K's
// rows by ldmatrix, transposed (staged as tileRows lands them).
__device__ __forceinline__ void productVK(const Warp& w, const uint32_t (&vc)[4][4], const char* K, float (&S)[8][4]) {
    const uint32_t base = sharedAddr(K);
#pragma unroll
    for (int s = 0; s < 4; ++s) {
#pragma unroll
        for (int n = 0; n < 8; n += 2) { // key rows 64 wk + 8 n .. + 16: tiles (tokens 16 s, +8) x (n, n + 1)
            const int row = 16 * s + w.lane % 8 + (w.lane / 8 % 2) * 8, col = 64 * w.wk + 8 * n + (w.lane / 16) * 8;
            uint32_t b[4];
            ldsm4<true>(b, SwizzledRows::at(base, row, col));
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

// A warp's [16 x 64] slice of the state (or its gradient) in bf16 to dst (rows ld elements apart:
// the warp's first key row and value column), through its swap region.
__device__ __forceinline__ void storeState(const float (&S)[8][4], char* swapMine, uint16_t* dst, int64_t ld) {
    stageOut<0, 8>(swapMine, S);
    __syncwarp();
    copyOut(swapMine, dst, ld, 64);
    __syncwarp();
}

// A warp's half of the chunk's tokens (wk) of its [16 x 64] (tokens) in bf16 to dst (the warp's
// first token and value column, rows ld elements apart), through its out region.
__device__ __forceinline__ void storeTokens(const Warp& w, const float (&X)[8][4], char* outMine, uint16_t* dst, int64_t ld) {
    if (w.wk == 0) stageOut<0, 4>(outMine, X);
    else stageOut<4, 4>(outMine, X);
    __syncwarp();
    copyOut(outMine, dst, ld, 32);
}

// The development instrument's notes (gdn_phase_clock.h, where SIGHTLINE_GDN_PHASE_CLOCK is
// defined): warp 0's cycles from the last note to this one, summed by the line that notes them, so
// that a held pass's steps, which cross no block barrier, split its time too (its notes pass the
// phase table's 96 phases a block within two chunks: the sums by line and the cycles a block hold
// them all). Nothing otherwise.
struct HeldClock {
#if defined(SIGHTLINE_GDN_PHASE_CLOCK)
    long long mark = phase_clock::start();
    int no = 0;
    __device__ void note(int line = __builtin_LINE()) { phase_clock::note(int(threadIdx.x), mark, no, line); }
#else
    __device__ void note() {}
#endif
};

// The block's segment: the one of rank `rank` (segmentRank), found by the block's threads.
__device__ __forceinline__ int segmentOf(const Params& p, int rank, int* seg) {
    for (int s = int(threadIdx.x); s < p.segments; s += kThreads)
        if (segmentRank(p.chunk_off, p.segments, s) == rank) seg[0] = s;
    __syncthreads();
    return seg[0];
}

} // namespace sightline::gdn::held
#endif
