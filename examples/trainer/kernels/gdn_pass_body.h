#pragma once
// The gated delta rule's state passes (gdn_bodies.h): a block per segment, value head and 32 value
// columns, the state's slice (or its gradient's) in shared memory, looping over the segment's
// chunks: forwards for V' and the entering states (the output is made from them afterwards, every
// chunk at once: gdn_out_body.h), backwards for the gradients of the states and of V'. A chunk's
// operands are staged into shared memory (gdn_stage.h) while the chunk before it computes, in
// groups, each issued as soon as the products that read its regions are done. Both passes fit
// twice an SM on the tensor cores' path (two [64 x dk] bf16 stages each: 86 KB forwards, 100 KB
// backwards at heads of 128). Measured on the H200 (session 35): the products' K loops were half
// of both passes, while waiting for the stages cost nothing (without the waits neither ran
// faster), so the copies below feed ldmatrix rather than the stages being deepened.
#include "gdn_bodies.h"
#include "gdn_stage.h"

namespace sightline::gdn {

// The chunk's decays from gamma: exp(gamma_L - gamma), exp(gamma_L) (one phase's share).
SL_GDN_FN void chunkDecays(int tid, int n, const float* gam, float* egap, float* a) {
    for (int r = tid; r < kChunk; r += n) egap[r] = expf_(gam[kChunk - 1] - gam[r]);
    if (tid == 0) a[0] = expf_(gam[kChunk - 1]);
}

// f(r, j) for the elements of a [rows x cols] tile, cols <= 32, as one phase's share: a thread
// keeps its column j = tid % 32. forEach does the same with a column count known only at run time
// and loops unrolled by four; with it both passes spill registers (ptxas: 48 and 32 bytes), with
// this neither does.
template <class F>
SL_GDN_FN void forTile(int tid, int n, int rows, int cols, F&& f) {
    const int j = tid % kTileV;
    if (j >= cols) return;
    for (int r = tid / kTileV; r < rows; r += n / kTileV) f(r, j);
}

// The passes' blocks, one a segment, value head and tile, go out longest segment first: block i
// takes the segment of rank i / (hv tiles) by chunk count, most chunks first (ties in segment
// order), so that the last blocks to start are the shortest, not a long segment's blocks left
// waiting behind every shorter one (as when the segment varied fastest). On packed rows of the
// benchmark's lengths a list-scheduling model of 264 blocks at a time puts a pass at 62 chunk
// times against 82, the bound of its work 58 (bench/gdn_pass_schedule.py); on the H200 both
// passes took 21% less of a step, the mixed lengths' layer 9% (session 28).
struct PassBlock {
    int rank, h, tile;
};
SL_GDN_HD inline int passTiles(const Params& p) { return (p.dv + kTileV - 1) / kTileV; }
SL_GDN_HD constexpr PassBlock passBlock(int64_t i, int hv, int tiles) {
    return {int(i / (int64_t(hv) * tiles)), int(i % hv), int(i / hv % tiles)};
}
// Segment s's rank: the segments with more chunks, or as many and before it.
SL_GDN_FN int segmentRank(const int* chunk_off, int segments, int s) {
    const int mine = chunk_off[s + 1] - chunk_off[s];
    int rank = 0;
    for (int t = 0; t < segments; ++t) {
        const int theirs = chunk_off[t + 1] - chunk_off[t];
        rank += theirs > mine || (theirs == mine && t < s);
    }
    return rank;
}

// The passes' shared memory: the state's [dk x 32] slice (zeroed), [64 x 32] fp32 tiles (x: V'
// forwards, the output gradient backwards, only in fp32 stages; y and pdo: dV''s two products,
// only in the reverse), the chunk's decays, the block's segment; the stages: gamma, two [64 x dk]
// ones (s1 and s2) and a [64 x 32] tile (U's columns, or the output gradient's as they come); and
// the products' operands from the running fp32 regions in the scratch's type (c1: the state's or
// its gradient's [dk x 32]; c2, and c3 in the reverse: [64 x 32]). Three [64 x dk] stages and P's
// [64 x 64] made the reverse 162 KB, one block an SM (it ran at half the forward's speed a
// chunk); with two it was 112 KB in fp32 stages, and P was read from global memory. In bf16
// stages the reverse has room for P's bf16 copy (pt, Params::pb: 9 KB), staged a chunk ahead with
// K: the pass is a chain of chunks, and P^T dO's reads of P from L2 were 17% of it (session 35);
// its output gradient is then read as staged (bf16 beside bf16 P), so x gives pdo its room.
struct PassSmem {
    float *state, *x, *y, *egap, *a, *gam, *s1, *s2, *tile, *c1, *c2, *c3, *pt, *pdo;
    int* seg;
    int sld, cld; // the stages' rows and the copies' rows, in elements of the scratch's type
};
constexpr int kPassL = padded(kTileV); // rows of the fp32 [.. x 32] regions
// Whether the reverse pass has room for P's bf16 copy (bf16 scratch: es = 2), and whether it
// stages it (Params::pb set, as the backward sets it on that path).
SL_GDN_HD constexpr bool stagesP(bool forward, int es) { return !forward && es == 2; }
SL_GDN_FN bool stagesP(const Params& p) { return stagesP(false, scratchBytes(p)) && p.pb; }
// The fp32 [64 x 32] tiles: x forwards and in fp32 stages; y and pdo backwards.
SL_GDN_HD constexpr bool hasX(bool forward, int es) { return forward || es == 4; }
constexpr int64_t passFloats(int dk, bool forward, int es) {
    const int tiles = (hasX(forward, es) ? 1 : 0) + (forward ? 1 : 3), copies = forward ? 1 : 2; // [64 x 32] tiles, fp32 and copied
    return carved(int64_t(dk) * kPassL) + tiles * carved(kChunk * kPassL) + 2 * carved(kChunk) + carved(4) + carved(1) +
        2 * carved(int64_t(kChunk) * stageRow(dk, es)) + carved(int64_t(dk) * stageRow(kTileV, es)) +
        copies * carved(kChunk * stageRow(kTileV, es)) + (stagesP(forward, es) ? carved(kChunk * stageRow(kChunk, es)) : 0);
}
// Carves the regions, zeroes the state and finds the segment of the block's rank (m.seg).
template <class Block>
SL_GDN_FN PassSmem carvePass(Block& b, const Params& p, int rank, float* smem, bool forward) {
    const int dk = p.dk, es = scratchBytes(p), srow = stageRow(dk, es), crow = stageRow(kTileV, es);
    Carver c{smem};
    PassSmem m;
    m.state = c.take(int64_t(dk) * kPassL);
    m.x = hasX(forward, es) ? c.take(kChunk * kPassL) : nullptr;
    m.y = forward ? nullptr : c.take(kChunk * kPassL);
    m.pdo = forward ? nullptr : c.take(kChunk * kPassL);
    m.tile = c.take(kChunk * kPassL);
    m.egap = c.take(kChunk);
    m.gam = c.take(kChunk);
    m.a = c.take(4);
    m.seg = reinterpret_cast<int*>(c.take(1));
    m.s1 = c.take(int64_t(kChunk) * srow);
    m.s2 = c.take(int64_t(kChunk) * srow);
    m.c1 = c.take(int64_t(dk) * crow);
    m.c2 = c.take(kChunk * crow);
    m.c3 = forward ? nullptr : c.take(kChunk * crow);
    m.pt = stagesP(forward, es) ? c.take(kChunk * stageRow(kChunk, es)) : nullptr;
    m.sld = srow * 4 / es;
    m.cld = crow * 4 / es;
    b.phase([&](int tid, int n) {
        for (int e = tid; e < dk * kPassL; e += n) m.state[e] = 0.0f;
        for (int s = tid; s < p.segments; s += n)
            if (segmentRank(p.chunk_off, p.segments, s) == rank) m.seg[0] = s;
    });
    return m;
}

// Where a block of the passes works (its segment's chunks [first, end) and tokens [tok0, tok1),
// read once), and its chunks' scratch rows as stage sources.
// The tile's width nj is a constant where dv is a multiple of 32 (the Fixed forms: gdn.cu), and the
// key head is found once, so that no division by a value known only at run time is left in the
// chunks' loop (the tile's width divided the staging's and the products' loops, the key head's
// count every chunk's key rows: 7% of the forward pass's instructions, Nsight Compute, session 35).
struct PassSite {
    const Params& p;
    int seg, h, kh, j0, nj, first, end, tok0, tok1;
    SL_GDN_FN PassSite(const Params& params, int s, int head, int tile)
        : p(params), seg(s), h(head), kh(keyHead(p, head)), j0(tile * kTileV),
          nj(tileWidth(p.dv, j0, kTileV)), first(p.chunk_off[s]), end(p.chunk_off[s + 1]),
          tok0(p.cu[s]), tok1(p.cu[s + 1]) {}
    SL_GDN_FN ChunkPos chunk(int c) const { return chunkIn(seg, tok0, tok1, first, c); }
    SL_GDN_FN int64_t base(int c) const { return slotBase(p, h, c); }
    // Chunk c's rows of W (by value head), and of qn or kn (x; by key head)
    SL_GDN_FN Rows wRows(int c) const { return scratchRows(p, p.w, base(c), p.dk); }
    SL_GDN_FN Rows keyRows(const void* x, int c) const { return scratchRows(p, x, slotBase(p, kh, c), p.dk); }
    SL_GDN_FN Rows gammaRows(int c) const { return floatRows(p.gamma, kChunk, base(c) / kChunk, 0, 1, kChunk); }
    SL_GDN_FN bool has(int c) const { return c >= first && c < end; }
    // The output gradient's tile stages where its rows are whole 4-byte words (else it is read
    // directly): bf16 rows of an even dv (so an even tile width, the tiles starting at multiples of 32).
    SL_GDN_FN bool stagesDout() const { return !p.dout.bf16 || p.dv % 2 == 0; }
};
// A chunk's [64 x dk] rows into one of the stages (rows of m.sld elements, as carvePass has them).
SL_GDN_FN void stageDk(int tid, int n, const PassSite& s, const PassSmem& m, float* dst, const Rows& src) {
    stage(tid, n, dst, m.sld * scratchBytes(s.p), src);
}

// One phase: the G groups of chunk c (issue(tid, n, group, c) issues one and commits it), the
// first of them waited for.
template <int G, class Block, class Issue>
SL_GDN_FN void stageFirst(Block& b, const Issue& issue, int c) {
    b.phase([&](int tid, int n) {
        for (int g = 0; g < G; ++g) issue(tid, n, g, c);
        waitStaged<G - 1>();
    });
}
// One phase: group g of chunk c, then the wait that lands the oldest of the G groups in flight.
template <int G, class Block, class Issue>
SL_GDN_FN void stageNext(Block& b, const Issue& issue, int g, int c) {
    b.phase([&](int tid, int n) {
        issue(tid, n, g, c);
        waitStaged<G - 1>();
    });
}

// The forward's two groups for chunk c (nothing outside the segment, but always a group):
// 0: W, U's tile and gamma; 1: K.
SL_GDN_FN void stageForward(int tid, int n, const PassSite& s, const PassSmem& m, int group, int c) {
    if (s.has(c)) {
        const Params& p = s.p;
        if (group == 0) {
            stageDk(tid, n, s, m, m.s1, s.wRows(c));
            stage(tid, n, m.tile, kPassL * 4, elementRows(p.u, scratchBytes(p), p.dv, s.base(c), s.j0, kChunk, s.nj)); // rows kPassL floats apart
            stage(tid, n, m.gam, kChunk * 4, s.gammaRows(c));
        } else {
            stageDk(tid, n, s, m, m.s2, s.keyRows(p.kn, c));
        }
    }
    commitStaged();
}

// Segments x hv x dv / 32 blocks (passBlock): the state pass over the segment's chunks for value
// columns [32 tile, + 32): V' (written in U's place, which the block has staged before, and where
// set in v's dtype for the output and the backward: on the bf16 scratch's path that copy alone),
// every chunk's entering state (the output is made from
// both: gdn_out_body.h) and (when set) the final state. The products read the state and V' from
// copies in the scratch's type (c1, c2): in bf16 on the tensor cores' path, as the state is kept
// for the output and the backward, and V' for the backward.
template <class Block>
SL_GDN_FN void statePassBody(Block& b, const Params& p, int rank, int h, int tile, float* smem) {
    constexpr int C = kChunk, L = kPassL;
    const PassSmem m = carvePass(b, p, rank, smem, true);
    const int seg = m.seg[0];
    const PassSite site(p, seg, h, tile);
    const auto issue = [&](int tid, int n, int g, int c) { stageForward(tid, n, site, m, g, c); };
    const int dk = p.dk, dv = p.dv, j0 = site.j0, nj = site.nj;
    float *S = m.state, *vn = m.x;
    const Out sc = scratchOut(p, m.c1), vc = scratchOut(p, m.c2); // S's copy, V''s
    stageFirst<2>(b, issue, site.first);
    for (int c = site.first; c < site.end; ++c) {
        const int64_t st = stateBase(p, h, c), base = site.base(c);
        b.phase([&](int tid, int n) {
            chunkDecays(tid, n, m.gam, m.egap, m.a);
            const uint16_t* ub = reinterpret_cast<const uint16_t*>(m.tile); // U staged in bf16 (its rows as fp32's)
            forTile(tid, n, C, nj, [&](int r, int j) { vn[r * L + j] = p.bf16_scratch ? bf16ToFloat(ub[r * 2 * L + j]) : m.tile[r * L + j]; });
            forTile(tid, n, dk, nj, [&](int r, int j) {
                scratchOut(p, p.states).set(st + r * dv + j0 + j, S[r * L + j]);
                sc.set(r * m.cld + j, S[r * L + j]);
            });
        });
        withScratchType(p, [&](auto e) { // V' = U - W S
            using E = decltype(e);
            mm<2, 4>(b, C, nj, dk, sharedRowMajorAs<E>(m.s1, m.sld), sharedRowMajorAs<E>(m.c1, m.cld), vn, L, -1.0f, true);
        });
        b.phase([&](int tid, int n) {
            forTile(tid, n, C, nj, [&](int r, int j) {
                const int64_t e = (base + r) * dv + j0 + j;
                if (!p.bf16_scratch) static_cast<float*>(p.u)[e] = vn[r * L + j]; // for the output (in bf16 below on that path)
                if (p.vn_keep.p) p.vn_keep.set(e, vn[r * L + j]);                 // for the output and the backward
                vc.set(r * m.cld + j, vn[r * L + j] * m.egap[r]);                 // for the state's update below
            });
            forTile(tid, n, dk, nj, [&](int r, int j) { S[r * L + j] *= m.a[0]; });
            issue(tid, n, 0, c + 1);
            waitStaged<1>();
        });
        withScratchType(p, [&](auto e) {
            using E = decltype(e);
            mm<2, 4>(b, dk, nj, C, sharedTransposedAs<E>(m.s2, m.sld), sharedRowMajorAs<E>(m.c2, m.cld), S, L, 1.0f, true);
        });
        stageNext<2>(b, issue, 1, c + 1);
    }
    if (p.final_state)
        b.phase([&](int tid, int n) {
            forTile(tid, n, dk, nj, [&](int r, int j) { p.final_state[((int64_t(seg) * p.hv + h) * dk + r) * dv + j0 + j] = S[r * L + j]; });
        });
}

// Gamma and the output gradient's tile of chunk c (the tile where it stages, else it is read directly).
SL_GDN_FN void stageChunkInputs(int tid, int n, const PassSite& s, const PassSmem& m, int c) {
    if (!s.has(c)) return;
    const Params& p = s.p;
    stage(tid, n, m.gam, kChunk * 4, s.gammaRows(c));
    const ChunkPos pos = s.chunk(c);
    const int es = p.dout.bf16 ? 2 : 4; // bytes an element
    if (s.stagesDout())
        stage(tid, n, m.tile, kPassL * 4,
              Rows{static_cast<const char*>(p.dout.p) + ((int64_t(pos.start) * p.hv + s.h) * p.dv + s.j0) * es, int64_t(p.hv) * p.dv * es,
                   pos.len, s.nj * es});
}

// The reverse pass's stages, one group each, of chunk c into dst (nothing outside the segment,
// but always a group).
enum class Staged {
    kK, // K, with P in bf16 stages
    kW, // W, with gamma and the output gradient's tile of chunk c - 1
    kQ, // Q
};
SL_GDN_FN Rows stagedRows(const PassSite& s, Staged what, int c) {
    if (what == Staged::kW) return s.wRows(c);
    return s.keyRows(what == Staged::kK ? s.p.kn : s.p.qn, c);
}
SL_GDN_FN void stageReverse(int tid, int n, const PassSite& s, const PassSmem& m, Staged what, float* dst, int c) {
    if (s.has(c)) stageDk(tid, n, s, m, dst, stagedRows(s, what, c));
    // P with K (its P^T dO is done by then), from its chunk's first slot (a row of P a slot)
    if (what == Staged::kK && stagesP(s.p) && s.has(c)) stage(tid, n, m.pt, stageRow(kChunk, 2) * 4, scratchRows(s.p, s.p.pb, s.base(c), kChunk));
    if (what == Staged::kW) stageChunkInputs(tid, n, s, m, c - 1);
    commitStaged();
}

// Where element (r, j) of the output gradient's staged tile lies, in elements of its type.
SL_GDN_FN int doutTileAt(bool bf16, int r, int j) { return r * (bf16 ? 2 * kPassL : kPassL) + j; }
// Element (r, j) of chunk c's output gradient tile, from the stage (or directly); 0 past the segment.
SL_GDN_FN float doutAt(const PassSite& s, const PassSmem& m, const ChunkPos& pos, int r, int j) {
    const Params& p = s.p;
    if (r >= pos.len) return 0.0f;
    if (!s.stagesDout()) return p.dout[(int64_t(pos.start + r) * p.hv + s.h) * p.dv + s.j0 + j];
    if (p.dout.bf16) return bf16ToFloat(reinterpret_cast<const uint16_t*>(m.tile)[doutTileAt(true, r, j)]);
    return m.tile[doutTileAt(false, r, j)];
}

// One phase's share of entering chunk c (none past the segment's first): its decays and output
// gradient from the stages (landed; the gradient's copy for the state's update scaled by
// exp(gamma), its staged rows past the chunk's tokens zeroed where P^T dO reads them in place, its
// fp32 tile where the stages are fp32), and the gradient of the state leaving it (whole) stored
// for the chunk gradients and copied for the products.
SL_GDN_FN void enterReverse(int tid, int n, const PassSite& s, const PassSmem& m, int c) {
    if (c < s.first) return;
    constexpr int L = kPassL;
    const Params& p = s.p;
    const ChunkPos pos = s.chunk(c);
    const int64_t st = stateBase(p, s.h, c);
    const Out sc = scratchOut(p, m.c1), oc = scratchOut(p, m.c2);
    chunkDecays(tid, n, m.gam, m.egap, m.a);
    forTile(tid, n, kChunk, s.nj, [&](int r, int j) {
        const float d = doutAt(s, m, pos, r, j);
        if (m.x) m.x[r * L + j] = d;
        else if (r >= pos.len) Out{m.tile, p.dout.bf16}.set(doutTileAt(p.dout.bf16, r, j), 0.0f);
        oc.set(r * m.cld + j, d * expf_(m.gam[r]));
    });
    forTile(tid, n, p.dk, s.nj, [&](int r, int j) {
        scratchOut(p, p.dstates).set(st + r * p.dv + s.j0 + j, m.state[r * L + j]);
        sc.set(r * m.cld + j, m.state[r * L + j]);
    });
}

// One phase: dV''s two products, (K dS) into y and P^T dO into pdo (P^T upper): P staged in bf16
// and the output gradient as staged (zero past the chunk's tokens: enterReverse), else P from
// the prep's scratch and the gradient's fp32 tile x.
template <class Block>
SL_GDN_FN void reverseProducts(Block& b, const PassSite& s, const PassSmem& m, const float* kw, int c) {
    constexpr int C = kChunk, L = kPassL;
    const Params& p = s.p;
    const int nj = s.nj;
    withScratchType(p, [&](auto e) {
        using E = decltype(e);
        const auto kds = product(C, nj, p.dk, sharedRowMajorAs<E>(kw, m.sld), sharedRowMajorAs<E>(m.c1, m.cld), m.y, L, 1.0f, false);
        const auto pdo = [&](const auto& A, const auto& B) { return product(C, nj, C, A, B, m.pdo, L, 1.0f, false, kAll, kUpperA); };
        if (m.x) mmPhase<2, 4>(b, kds, pdo(transposed(p.p + chunkMatrix(p, s.h, c), C), rowMajor(m.x, L)));
        else if (p.dout.bf16) mmPhase<2, 4>(b, kds, pdo(sharedTransposedAs<uint16_t>(m.pt, stageRow(C, 2) * 2), sharedRowMajorAs<uint16_t>(m.tile, 2 * L)));
        else mmPhase<2, 4>(b, kds, pdo(sharedTransposedAs<uint16_t>(m.pt, stageRow(C, 2) * 2), rowMajor(m.tile, L)));
    });
}

// Segments x hv x dv / 32 blocks (passBlock): backwards over the segment's chunks, the gradient
// dS of the state leaving each chunk (stored) and of V' (stored): dV' = P^T dO + (K exp(gamma_L -
// gamma)) dS, then dS <- exp(gamma_L) dS + (Q exp(gamma))^T dO - W^T dV'. Six phases a chunk,
// three of them products (dV''s two share one, each into its own tile). The two [64 x dk] stages trade
// places every chunk: `kw` holds K, then W; `q` holds Q, then the chunk before's K (staged once Q
// is used, landing while W's product runs), and Q of the chunk before goes into kw once W is
// used; so the next chunk's K is in q's stage and its Q in kw's, and they swap. The products read
// dS, dO exp(gamma) and dV' from copies in the scratch's type (c1, c2, c3: bf16 on the tensor
// cores' path, as dS and dV' are kept for the chunk gradients).
template <class Block>
SL_GDN_FN void reversePassBody(Block& b, const Params& p, int rank, int h, int tile, float* smem) {
    constexpr int C = kChunk, L = kPassL;
    const PassSmem m = carvePass(b, p, rank, smem, false);
    const PassSite site(p, m.seg[0], h, tile);
    const auto issue = [&](int tid, int n, Staged what, float* dst, int c) { stageReverse(tid, n, site, m, what, dst, c); };
    const int dk = p.dk, dv = p.dv, j0 = site.j0, nj = site.nj;
    float *dS = m.state, *dvn = m.y, *kw = m.s1, *q = m.s2;
    const Out vc = scratchOut(p, m.c3); // dV''s copy
    // the first chunk's K, Q, gamma and tile, landed; then entered
    b.phase([&](int tid, int n) {
        issue(tid, n, Staged::kK, kw, site.end - 1);
        issue(tid, n, Staged::kQ, q, site.end - 1);
        stageChunkInputs(tid, n, site, m, site.end - 1);
        commitStaged();
        waitStaged<0>();
    });
    b.phase([&](int tid, int n) { enterReverse(tid, n, site, m, site.end - 1); });
    for (int c = site.end - 1; c >= site.first; --c) {
        const int64_t base = site.base(c);
        reverseProducts(b, site, m, kw, c);
        b.phase([&](int tid, int n) { // dV'; K, P and the tile are used: W, gamma and the tile come next; Q lands
            forTile(tid, n, C, nj, [&](int r, int j) {
                const float x = dvn[r * L + j] * m.egap[r] + m.pdo[r * L + j];
                scratchOut(p, p.dvn).set((base + r) * dv + j0 + j, x);
                vc.set(r * m.cld + j, x);
            });
            forTile(tid, n, dk, nj, [&](int r, int j) { dS[r * L + j] *= m.a[0]; });
            issue(tid, n, Staged::kW, kw, c);
            waitStaged<1>();
        });
        withScratchType(p, [&](auto e) {
            using E = decltype(e);
            mm<2, 4>(b, dk, nj, C, sharedTransposedAs<E>(q, m.sld), sharedRowMajorAs<E>(m.c2, m.cld), dS, L, 1.0f, true);
        });
        b.phase([&](int tid, int n) { // Q is used: the next chunk's K into its place; W landed
            issue(tid, n, Staged::kK, q, c - 1);
            waitStaged<1>();
        });
        withScratchType(p, [&](auto e) {
            using E = decltype(e);
            mm<2, 4>(b, dk, nj, C, sharedTransposedAs<E>(kw, m.sld), sharedRowMajorAs<E>(m.c3, m.cld), dS, L, -1.0f, true);
        });
        b.phase([&](int tid, int n) { // W is used: the next chunk's Q into its place; its K lands; dS is whole
            issue(tid, n, Staged::kQ, kw, c - 1);
            waitStaged<1>();
            enterReverse(tid, n, site, m, c - 1);
        });
        float* next_kw = q;
        q = kw;
        kw = next_kw;
    }
}

} // namespace sightline::gdn
