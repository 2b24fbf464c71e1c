#pragma once
// The output with its tile held in registers (GPU only): sightline_gdn_out_held (gdn.cu), the
// output at heads of 128 on the tensor cores' path, launched in place of sightline_gdn_out where
// its operands allow (gdn.cu's heldOutput; docs/trainer.md, sessions 49 and 50). Where the
// output's forms (gdn_out_body.h's outputBody) keep O in shared memory between its products and a
// block makes 64 value columns, here a block makes chunk c of value head h whole, [64 tokens x 128
// columns], eight warps each a [32 x 32] tile as the fp32 accumulators of eight m16n8k16 tiles:
//   O = e^gamma (Q S) + P V'
// from the prep's Q and P (bf16), the entering state S and V' the state pass kept (bf16), all
// staged as the tensor memory accelerator's tiles (gdn_held_tiles.h; gamma a bulk row), ten
// copies issued by one thread in two parts, each with its mbarrier: Q, S and gamma for the first
// product, P and V' landing while it runs (a row a copy, 321 copies, until session 50). Same
// roundings as the general form (bf16 operands, fp32 sums, O rounded once to bf16), so that the
// GPU checks hold it to the same reference. Two blocks an SM.
#if defined(__CUDACC__)
#include "gdn_held_tiles.h"

namespace sightline::gdn::held {

namespace out {

constexpr int kThreads = 256;
constexpr int kRowOut = 272; // bytes a row of the tile going out (128 bf16 and 16: no bank conflicts)
constexpr int kQ = 0, kS = kQ + kTileBytes, kP = kS + 2 * kTileBytes, kV = kP + kBoxBytes, kG = kV + kTileBytes;
constexpr int kO = kG + kChunk * 4, kBar = kO + kChunk * kRowOut, kBytes = kBar + 16 + kSwizzleAlign; // (and the alignment's slack)

// A warp's place: tokens 32 wm .. + 32, value columns 32 wn .. + 32.
struct Tile {
    int wm, wn, lane, g, t;
    __device__ Tile() : wm(int(threadIdx.x) / 128), wn(int(threadIdx.x) / 32 % 4), lane(int(threadIdx.x) % 32), g(lane / 4), t(lane % 4) {}
};

// The block's operands, issued by thread 0: Q, S (tiles) and gamma (a bulk row) completing
// bars[0], P and V' (tiles) bars[1].
__device__ __forceinline__ void stageAll(const Params& p, const Maps& m, int c, int h, char* smem, uint64_t* bars) {
    if (threadIdx.x != 0) return;
    const int64_t base = slotBase(p, h, c), state = stateRow(p, h, c);
    const Rows g = floatRows(p.gamma, kChunk, base / kChunk, 0, 1, kChunk);
    barExpect(bars, 3 * kTileBytes + g.row_bytes);
    barExpect(bars + 1, kBoxBytes + kTileBytes);
    tileRows(smem + kQ, m.q, keyBase(p, h, c), bars);
    tileRows(smem + kS, m.s, state, bars);
    tileRows(smem + kS + kTileBytes, m.s, state + 64, bars);
    bulkRow(smem + kG, g, bars);
    tileBox(smem + kP, m.p, 0, int(base), bars + 1);
    tileRows(smem + kV, m.v, base, bars + 1);
}

// O += A B over `steps` K steps of 16: A's rows are the warp's tokens, by ldmatrix; B's rows by
// ldmatrix, transposed, at the warp's columns (each swizzled boxes, gdn_held_tiles.h: LB a
// state's 128 rows). kLower: A lower (P), a tile of A above its diagonal skipped.
template <bool kLower, class LB>
__device__ __forceinline__ void product(const Tile& w, const char* A, const char* B, int steps, float (&O)[2][4][4]) {
    const uint32_t aBase = sharedAddr(A), bBase = sharedAddr(B);
#pragma unroll
    for (int ks = 0; ks < steps; ++ks) {
        if (kLower && ks > 2 * w.wm + 1) break; // the warp's tokens all above these
        uint32_t b[2][4];
#pragma unroll
        for (int pr = 0; pr < 2; ++pr)
            ldsm4<true>(b[pr], LB::at(bBase, 16 * ks + w.lane % 8 + (w.lane / 8 % 2) * 8, 32 * w.wn + 16 * pr + (w.lane / 16) * 8));
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
            if (kLower && ks > 2 * w.wm + mt) continue;
            uint32_t a[4];
            ldsm4<false>(a, SwizzledRows::at(aBase, 32 * w.wm + 16 * mt + w.lane % 16, 16 * ks + (w.lane / 16) * 8));
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) mma16n8k16(O[mt][nt], a, b[nt / 2][2 * (nt % 2)], b[nt / 2][2 * (nt % 2) + 1]);
        }
    }
}

// The warp's tile in bf16 into its rows of the out region (stmatrix), then its tokens' rows that
// the chunk has to the output (16-byte stores).
__device__ __forceinline__ void writeTile(const Tile& w, const Params& p, const ChunkPos& pos, int h, char* o, const float (&O)[2][4][4]) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int pr = 0; pr < 2; ++pr) {
            const int m = w.lane / 8;
            const uint32_t r[4] = {bf16Pair(O[mt][2 * pr][0], O[mt][2 * pr][1]), bf16Pair(O[mt][2 * pr][2], O[mt][2 * pr][3]),
                                   bf16Pair(O[mt][2 * pr + 1][0], O[mt][2 * pr + 1][1]), bf16Pair(O[mt][2 * pr + 1][2], O[mt][2 * pr + 1][3])};
            const int row = 32 * w.wm + 16 * mt + (m % 2) * 8 + w.lane % 8, col = 32 * w.wn + 16 * pr + (m / 2) * 8;
            stsm4<false>(sharedAddr(o + row * kRowOut + col * 2), r);
        }
    __syncwarp();
    uint16_t* dst = static_cast<uint16_t*>(p.o.p);
#pragma unroll
    for (int e = w.lane; e < 32 * 4; e += 32) { // 32 rows of 4 pieces of 16 bytes
        const int r = 32 * w.wm + e / 4, col = 32 * w.wn + 8 * (e % 4);
        if (r < pos.len)
            *reinterpret_cast<uint4*>(dst + (int64_t(pos.start + r) * p.hv + h) * p.dv + col) = *reinterpret_cast<const uint4*>(o + r * kRowOut + col * 2);
    }
}

} // namespace out
constexpr int kOutputBytes = out::kBytes, kOutputThreads = out::kThreads;

// The block's chunk c of value head h; the tokens no segment covers zeroed too (forUncovered).
__device__ __forceinline__ void output(const Params& p, const Maps& maps, int c, int h, char* held_smem) {
    using namespace out;
    char* smem = swizzleAligned(held_smem);
    uint64_t* bars = reinterpret_cast<uint64_t*>(smem + kBar);
    if (threadIdx.x < 2) barInit(bars + threadIdx.x);
    __syncthreads();
    stageAll(p, maps, c, h, smem, bars);
    const Tile w;
    float O[2][4][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) O[mt][nt][0] = O[mt][nt][1] = O[mt][nt][2] = O[mt][nt][3] = 0.0f;
    barWait(bars, 0);
    product<false, SwizzledTall>(w, smem + kQ, smem + kS, kDk / 16, O);
    const float* gam = reinterpret_cast<const float*>(smem + kG);
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
        const int r = 32 * w.wm + 16 * mt + w.g;
        const float e0 = expf_(gam[r]), e1 = expf_(gam[r + 8]);
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) O[mt][nt][0] *= e0, O[mt][nt][1] *= e0, O[mt][nt][2] *= e1, O[mt][nt][3] *= e1;
    }
    barWait(bars + 1, 0);
    product<true, SwizzledRows>(w, smem + kP, smem + kV, kChunk / 16, O);
    writeTile(w, p, chunkAt(p, c), h, smem + kO, O);
    forUncovered(p, int64_t(c) * out::kThreads + threadIdx.x, int64_t(p.chunks) * out::kThreads, kDk,
                 [&](int64_t t, int j) { p.o.set((t * p.hv + h) * p.dv + j, 0.0f); });
}

} // namespace sightline::gdn::held
#endif
