#pragma once
// The forward state pass with the state held in registers (gdn_held_warp.h; GPU only): the Fixed
// form of sightline_gdn_fwd (gdn.cu), at heads of 128 on the tensor cores' path, where the general
// form (gdn_pass_body.h's statePassBody, which the CPU checks run) keeps the state's slice in
// shared memory and crosses a dozen block barriers a chunk. Same grid (a block per segment, value
// head and 32 value columns, longest segment first), same inputs and outputs, same roundings (the
// state's bf16 copy as the first product's operand, V' e^(gamma_L - gamma) in bf16 as the
// second's), so that the GPU checks hold it to the same reference. A chunk:
//   P^T = S^T W^T (each warp its half of the key rows, summed between the pair), V'^T = U^T - P^T;
//   S^T = e^(gamma_L) S^T + (V' e^(gamma_L - gamma))^T K (each warp its own key rows).
// The chunk's W, K, U's columns and gamma are staged two chunks ahead by the tensor memory
// accelerator (gdn_held_tiles.h: five tiles and a bulk row issued by one thread, an mbarrier a
// stage); the entering state and V' go out through shared memory (stmatrix) as whole 16-byte rows.
#if defined(__CUDACC__)
#include "gdn_held_tiles.h"

namespace sightline::gdn::held {
namespace fwd {

constexpr int kStageW = 0, kStageK = kTileBytes, kStageU = 2 * kTileBytes, kStageG = kStageU + kNarrowBoxBytes;
constexpr int kStage = swizzleRounded(kStageG + kChunk * 4); // one chunk's stage
constexpr int kStages = 3;                                   // chunks staged ahead: two while one computes
constexpr int kSwap = kStages * kStage, kVOut = kSwap + kSwapBytes, kSeg = kVOut + kOutBytes, kBar = kSeg + 16;
constexpr int kBytes = kBar + 8 * kStages + kSwizzleAlign; // (and the alignment's slack)
} // namespace fwd
constexpr int kForwardBytes = fwd::kBytes;
namespace fwd {

// Chunk c's W, K, U's columns and gamma into a stage, completing bar, by thread 0 (nothing
// outside the segment).
__device__ __forceinline__ void stageChunk(const PassSite& s, const Maps& m, char* st, uint64_t* bar, int c) {
    if (threadIdx.x != 0 || !s.has(c)) return;
    const Rows g = s.gammaRows(c);
    barExpect(bar, 2 * kTileBytes + kNarrowBoxBytes + g.row_bytes);
    tileRows(st + kStageW, m.w, s.base(c), bar);
    tileRows(st + kStageK, m.k, slotBase(s.p, s.kh, c), bar);
    tileBox(st + kStageU, m.u, s.j0, int(s.base(c)), bar);
    bulkRow(st + kStageG, g, bar);
}

// One chunk from its stage: the entering state out, V' = U - W S (out too), the state's update.
__device__ __forceinline__ void chunkStep(const Warp& w, const PassSite& site, const char* st, char* smem, float (&S)[8][4], int c, HeldClock& clk) {
    const Params& p = site.p;
    char* swapMine = smem + kSwap + (2 * w.wj + w.wk) * 4096;
    storeState(S, swapMine, static_cast<uint16_t*>(p.states) + stateBase(p, site.h, c) + int64_t(64 * w.wk) * p.dv + site.j0 + 16 * w.wj, p.dv);
    clk.note();
    float P[8][4];
    productWS(w, S, st + kStageW, P);
    clk.note();
    sumPair(w, smem + kSwap, P);
    clk.note();
    const char* U = st + kStageU;
    const float* gam = reinterpret_cast<const float*>(st + kStageG);
    const float gl = gam[kChunk - 1];
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int tok = 8 * n + 2 * w.t + e % 2, j = 16 * w.wj + w.g + 8 * (e / 2);
            P[n][e] = bf16ToFloat(*reinterpret_cast<const uint16_t*>(U + NarrowRows::at(0, tok, j))) - P[n][e];
        }
    clk.note();
    if (p.vn_keep.p) // the pair's halves of the tokens
        storeTokens(w, P, smem + kVOut + (2 * w.wj + w.wk) * 32 * kRowO,
                    static_cast<uint16_t*>(p.vn_keep.p) + (site.base(c) + 32 * w.wk) * p.dv + site.j0 + 16 * w.wj, p.dv);
    clk.note();
    uint32_t vc[4][4];
#pragma unroll
    for (int s = 0; s < 4; ++s)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int n = 2 * s + h, tok = 8 * n + 2 * w.t;
            const float e0 = expf_(gl - gam[tok]), e1 = expf_(gl - gam[tok + 1]);
            vc[s][2 * h] = bf16Pair(P[n][0] * e0, P[n][1] * e1);
            vc[s][2 * h + 1] = bf16Pair(P[n][2] * e0, P[n][3] * e1);
        }
    const float a = expf_(gl);
#pragma unroll
    for (int n = 0; n < 8; ++n) S[n][0] *= a, S[n][1] *= a, S[n][2] *= a, S[n][3] *= a;
    clk.note();
    productVK(w, vc, st + kStageK, S);
    clk.note();
}

} // namespace fwd

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

// The block's pass: its segment (by rank), then the chunks, each staged kStages - 1 chunks ahead
// (one ahead, one layer's forward+backward took 1-1.6% longer on the H100, session 45).
__device__ __forceinline__ void statePass(const Params& p, const Maps& maps, const PassBlock& at, char* held_smem) {
    using namespace fwd;
    char* smem = swizzleAligned(held_smem);
    uint64_t* bars = reinterpret_cast<uint64_t*>(smem + kBar);
    if (threadIdx.x < kStages) barInit(bars + threadIdx.x);
    const PassSite site(p, segmentOf(p, at.rank, reinterpret_cast<int*>(smem + kSeg)), at.h, at.tile); // (a block barrier)
    const Warp w;
    float S[8][4];
    zero(S);
    HeldClock clk;
    for (int i = 0; i < kStages - 1; ++i) stageChunk(site, maps, smem + i * kStage, bars + i, site.first + i);
    for (int c = site.first; c < site.end; ++c) {
        const int i = c - site.first;
        barWait(bars + i % kStages, i / kStages % 2);
        __syncthreads(); // chunk c landed for every thread; chunk c - 1's stage and swaps are read
        clk.note();
        const int next = (i + kStages - 1) % kStages;
        stageChunk(site, maps, smem + next * kStage, bars + next, c + kStages - 1);
        clk.note();
        chunkStep(w, site, smem + i % kStages * kStage, smem, S, c, clk);
    }
    if (p.final_state) writeFinal(w, site, S);
}

} // namespace sightline::gdn::held
#endif
