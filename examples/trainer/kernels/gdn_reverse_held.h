#pragma once
// The reverse state pass with the state's gradient held in registers (gdn_held_warp.h; GPU only):
// the Fixed form of sightline_gdn_bwd_state (gdn.cu), at heads of 128 on the tensor cores' path
// with P staged in bf16 and a bf16 output gradient, where the general form (gdn_pass_body.h's
// reversePassBody, which the CPU checks run) keeps dS in shared memory. Same grid, inputs, outputs
// and roundings (dS's bf16 copy, dO e^gamma and dV' in bf16 as operands). Backwards over the
// segment's chunks, dS the gradient of the state leaving the chunk:
//   dV'^T = (dS^T K^T) e^(gamma_L - gamma) (each warp its half of the key rows, summed between the
//           pair) + dO^T P (each warp of the pair its half of the tokens, before the sum);
//   dS^T = e^(gamma_L) dS^T + (dO e^gamma)^T Q - dV'^T W (each warp its own key rows).
// A chunk's K, Q, W, P, output gradient tile and gamma are staged two chunks ahead (three stages,
// one block an SM) by the tensor memory accelerator (gdn_held_tiles.h: eight tiles and a bulk row
// issued by one thread, an mbarrier a stage).
#if defined(__CUDACC__)
#include "gdn_held_tiles.h"

namespace sightline::gdn::held {
namespace rev {

constexpr int kStageK = 0, kStageQ = kTileBytes, kStageW = 2 * kTileBytes, kStageP = 3 * kTileBytes;
constexpr int kStageD = kStageP + kBoxBytes, kStageG = kStageD + kNarrowBoxBytes;
constexpr int kStage = swizzleRounded(kStageG + kChunk * 4);
constexpr int kStages = 3; // chunks staged ahead: two while one computes
constexpr int kSwap = kStages * kStage, kOut = kSwap + kSwapBytes, kSeg = kOut + kOutBytes, kBar = kSeg + 16;
constexpr int kBytes = kBar + 8 * kStages + kSwizzleAlign; // (and the alignment's slack)

// Chunk c's K, Q, W, P, output gradient tile (64 rows from the chunk's first token: those past
// its len are another's, or zeros past the last token) and gamma into a stage, completing bar, by
// thread 0 (nothing outside the segment).
__device__ __forceinline__ void stageChunk(const PassSite& s, const Maps& m, char* st, uint64_t* bar, int c) {
    if (threadIdx.x != 0 || !s.has(c)) return;
    const Params& p = s.p;
    const int64_t key = slotBase(p, s.kh, c);
    const Rows g = s.gammaRows(c);
    barExpect(bar, 3 * kTileBytes + kBoxBytes + kNarrowBoxBytes + g.row_bytes);
    tileRows(st + kStageK, m.k, key, bar);
    tileRows(st + kStageQ, m.q, key, bar);
    tileRows(st + kStageW, m.w, s.base(c), bar);
    tileBox(st + kStageP, m.p, 0, int(s.base(c)), bar);
    tileBox(st + kStageD, m.d, s.h * p.dv + s.j0, s.chunk(c).start, bar);
    bulkRow(st + kStageG, g, bar);
}
// The output gradient's tile as dO^T's A fragments (ldmatrix, transposed), the four K steps of the
// chunk's tokens; zero past the chunk's len (the stage holds the next segment's rows there, or
// zeros past the last token).
__device__ __forceinline__ void loadDout(const Warp& w, const char* D, int len, uint32_t (&d)[4][4]) {
    const int m = w.lane / 8;
    const uint32_t base = sharedAddr(D);
#pragma unroll
    for (int s = 0; s < 4; ++s) {
        ldsm4<true>(d[s], NarrowRows::at(base, 16 * s + w.lane % 8 + (m / 2) * 8, 16 * w.wj + (m % 2) * 8));
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int tok = 16 * s + 2 * w.t + (r / 2) * 8;
            d[s][r] &= (tok < len ? 0xffffu : 0u) | (tok + 1 < len ? 0xffff0000u : 0u);
        }
    }
}

// X^T's tokens of half kWk += dO^T P (P lower: a tile of P meets nonzeros only where its rows reach
// its columns), B = P's rows (a swizzled box) by ldmatrix, transposed.
template <int kWk>
__device__ __forceinline__ void productPdo(const Warp& w, const uint32_t (&d)[4][4], const char* P, float (&X)[8][4]) {
    const uint32_t base = sharedAddr(P);
#pragma unroll
    for (int s = 0; s < 4; ++s)
#pragma unroll
        for (int n = 4 * kWk; n < 4 * kWk + 4; n += 2) {
            if (16 * s + 15 < 8 * n) continue; // rows 16 s .. + 16 of P all above columns 8 n ..
            const int row = 16 * s + w.lane % 8 + (w.lane / 8 % 2) * 8, col = 8 * n + (w.lane / 16) * 8;
            uint32_t b[4];
            ldsm4<true>(b, SwizzledRows::at(base, row, col));
            mma16n8k16(X[n], d[s], b[0], b[1]);
            mma16n8k16(X[n + 1], d[s], b[2], b[3]);
        }
}

// dO e^gamma in bf16 as A fragments, from dO's.
__device__ __forceinline__ void scaleDout(const Warp& w, const float* gam, const uint32_t (&d)[4][4], uint32_t (&oc)[4][4]) {
#pragma unroll
    for (int s = 0; s < 4; ++s)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int tok = 16 * s + 8 * h + 2 * w.t;
            const float e0 = expf_(gam[tok]), e1 = expf_(gam[tok + 1]);
#pragma unroll
            for (int r = 2 * h; r < 2 * h + 2; ++r)
                oc[s][r] = bf16Pair(__uint_as_float(d[s][r] << 16) * e0, __uint_as_float(d[s][r] & 0xffff0000u) * e1);
        }
}

// Chunk c up to W's product: dS out, dV' (out too), dS's decay and Q's product; -dV' in bf16 into vc.
__device__ __forceinline__ void chunkFirst(const Warp& w, const PassSite& site, const char* st, char* smem, float (&dS)[8][4], uint32_t (&vc)[4][4], int c, HeldClock& clk) {
    const Params& p = site.p;
    char* swapMine = smem + kSwap + (2 * w.wj + w.wk) * 4096;
    storeState(dS, swapMine, static_cast<uint16_t*>(p.dstates) + stateBase(p, site.h, c) + int64_t(64 * w.wk) * p.dv + site.j0 + 16 * w.wj, p.dv);
    clk.note();
    const float* gam = reinterpret_cast<const float*>(st + kStageG);
    const float gl = gam[kChunk - 1];
    float X[8][4];
    productWS(w, dS, st + kStageK, X); // (K dS)^T, the warp's key rows
    clk.note();
#pragma unroll
    for (int n = 0; n < 8; ++n) {
        const int tok = 8 * n + 2 * w.t;
        const float e0 = expf_(gl - gam[tok]), e1 = expf_(gl - gam[tok + 1]);
        X[n][0] *= e0, X[n][1] *= e1, X[n][2] *= e0, X[n][3] *= e1;
    }
    uint32_t d[4][4];
    loadDout(w, st + kStageD, site.chunk(c).len, d);
    clk.note();
    if (w.wk == 0) productPdo<0>(w, d, st + kStageP, X);
    else productPdo<1>(w, d, st + kStageP, X);
    clk.note();
    sumPair(w, smem + kSwap, X);
    clk.note();
    storeTokens(w, X, smem + kOut + (2 * w.wj + w.wk) * 32 * kRowO,
                static_cast<uint16_t*>(p.dvn) + (site.base(c) + 32 * w.wk) * p.dv + site.j0 + 16 * w.wj, p.dv);
    clk.note();
#pragma unroll
    for (int s = 0; s < 4; ++s) {
        vc[s][0] = bf16Pair(-X[2 * s][0], -X[2 * s][1]);
        vc[s][1] = bf16Pair(-X[2 * s][2], -X[2 * s][3]);
        vc[s][2] = bf16Pair(-X[2 * s + 1][0], -X[2 * s + 1][1]);
        vc[s][3] = bf16Pair(-X[2 * s + 1][2], -X[2 * s + 1][3]);
    }
    const float a = expf_(gl);
#pragma unroll
    for (int n = 0; n < 8; ++n) dS[n][0] *= a, dS[n][1] *= a, dS[n][2] *= a, dS[n][3] *= a;
    uint32_t oc[4][4];
    scaleDout(w, gam, d, oc);
    clk.note();
    productVK(w, oc, st + kStageQ, dS);
    clk.note();
}

} // namespace rev
constexpr int kReverseBytes = rev::kBytes;

// The block's pass: its segment (by rank), then its chunks from the last, each staged kStages - 1
// chunks ahead.
__device__ __forceinline__ void reversePass(const Params& p, const Maps& maps, const PassBlock& at, char* held_smem) {
    using namespace rev;
    char* smem = swizzleAligned(held_smem);
    uint64_t* bars = reinterpret_cast<uint64_t*>(smem + kBar);
    if (threadIdx.x < kStages) barInit(bars + threadIdx.x);
    const PassSite site(p, segmentOf(p, at.rank, reinterpret_cast<int*>(smem + kSeg)), at.h, at.tile); // (a block barrier)
    const Warp w;
    float dS[8][4];
    zero(dS);
    HeldClock clk;
    for (int i = 0; i < kStages - 1; ++i) stageChunk(site, maps, smem + i * kStage, bars + i, site.end - 1 - i);
    for (int c = site.end - 1; c >= site.first; --c) {
        const int i = site.end - 1 - c;
        barWait(bars + i % kStages, i / kStages % 2);
        __syncthreads(); // chunk c landed for every thread; chunk c + 1's stage and swaps are read
        clk.note();
        const int next = (i + kStages - 1) % kStages;
        stageChunk(site, maps, smem + next * kStage, bars + next, c - kStages + 1);
        clk.note();
        char* st = smem + i % kStages * kStage;
        uint32_t vc[4][4];
        chunkFirst(w, site, st, smem, dS, vc, c, clk);
        productVK(w, vc, st + kStageW, dS);
        clk.note();
    }
}

} // namespace sightline::gdn::held
#endif
