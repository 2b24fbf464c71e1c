#pragma once
// The gated delta rule's output (gdn_bodies.h), every chunk at once once the state pass has run:
// grid (chunks, hv, dv / 64), each block chunk c of value head h and 64 value columns,
// O = (Q exp(gamma)) S + P V' from the state S entering the chunk and V' (both written by the
// pass: V' in U's place, on the bf16 scratch's path in bf16 only, Params::vn_keep) and the prep's
// Q and P (on that path its bf16 P, Params::pb, so that both products take ldmatrix bf16 steps).
// Out of the pass, the output's two products no longer wait in its sequential loop. Every operand
// is staged into shared memory first (16-byte copies). On the bf16 scratch's path the staged rows
// are bf16 rows (stageRow) and V' has a region of its own, staged with the rest so that it lands
// while Q S is made: about 72 KB at dk = 128, three blocks an SM; in fp32 (about 104 KB, two blocks)
// V' takes S's place once S is used.
#include "gdn_bodies.h"
#include "gdn_stage.h"

namespace sightline::gdn {

constexpr int kOutV = 64; // value columns a block of the output makes

// A staged row of `cols` elements of the scratch's type, in floats.
SL_GDN_HD constexpr int outRow(int cols, bool bf16) { return bf16 ? stageRow(cols, 2) : padded(cols); }

// The output's shared memory: Q [64 x dk], S's columns [dk x 64], V''s [64 x 64] (in S's place
// in fp32), P [64 x 64], all staged in the scratch's type with rows of lq and ls floats; O [64 x
// 64] in fp32; gamma's decays.
struct OutSmem {
    float *q, *s, *v, *pm, *o, *eg;
    int lq, ls;
};
SL_GDN_HD constexpr int64_t outSFloats(int dk, bool bf16) { return carved(int64_t(bf16 || dk > kChunk ? dk : kChunk) * outRow(kOutV, bf16)); }
SL_GDN_HD constexpr int64_t outFloats(int dk, bool bf16) {
    const int ls = outRow(kOutV, bf16);
    return carved(int64_t(kChunk) * outRow(dk, bf16)) + outSFloats(dk, bf16) + (bf16 ? 2 : 1) * carved(kChunk * ls) + carved(kChunk * padded(kOutV)) +
        carved(kChunk);
}
SL_GDN_FN OutSmem carveOut(float* smem, int dk, bool bf16) {
    Carver c{smem};
    OutSmem m;
    m.lq = outRow(dk, bf16), m.ls = outRow(kOutV, bf16);
    m.q = c.take(int64_t(kChunk) * m.lq);
    m.s = c.take(outSFloats(dk, bf16));
    m.v = bf16 ? c.take(kChunk * m.ls) : m.s;
    m.pm = c.take(kChunk * m.ls);
    m.o = c.take(kChunk * padded(kOutV));
    m.eg = c.take(kChunk);
    return m;
}

template <class Block>
SL_GDN_FN void outputBody(Block& b, const Params& p, int c, int h, int tile, float* smem) {
    constexpr int C = kChunk, L = padded(kOutV);
    const int dk = p.dk, dv = p.dv, j0 = tile * kOutV, nj = tileWidth(dv, j0, kOutV);
    const bool bf16 = p.bf16_scratch;
    const OutSmem m = carveOut(smem, dk, bf16);
    const ChunkPos pos = chunkAt(p, c);
    const int64_t base = slotBase(p, h, c);
    const auto stageV = [&](int tid, int n) {
        stage(tid, n, m.v, m.ls * 4, bf16 ? elementRows(p.vn_keep.p, 2, dv, base, j0, C, nj) : floatRows(static_cast<const float*>(p.u), dv, base, j0, C, nj));
        commitStaged();
    };
    b.phase([&](int tid, int n) {
        stage(tid, n, m.q, m.lq * 4, scratchRows(p, p.qn, keyBase(p, h, c), dk));
        stage(tid, n, m.s, m.ls * 4, stateRows(p, h, c, j0, nj));
        stage(tid, n, m.pm, m.ls * 4, bf16 ? scratchRows(p, p.pb, base, C) : floatRows(p.p + chunkMatrix(p, h, c), C, 0, 0, C, C));
        commitStaged();
        if (bf16) stageV(tid, n); // its own region: it lands during Q S
        for (int r = tid; r < C; r += n) m.eg[r] = expf_(p.gamma[base + r]);
        if (bf16) waitStaged<1>();
        else waitStaged<0>();
    });
    withScratchType(p, [&](auto e) { // (Q S, Q and S staged in the scratch's type: in bf16 by ldmatrix)
        using E = decltype(e);
        mm<4, 4>(b, C, nj, dk, sharedRowMajorAs<E>(m.q, stagedLdOf<E>(m.lq)), sharedRowMajorAs<E>(m.s, stagedLdOf<E>(m.ls)), m.o, L, 1.0f, false);
    });
    b.phase([&](int tid, int n) { // S is used: in fp32 V''s columns take its place
        if (!bf16) stageV(tid, n);
        forEach(tid, n, C, nj, [&](int r, int j) { m.o[r * L + j] *= m.eg[r]; }); // (Q exp(gamma)) S
        waitStaged<0>();
    });
    withScratchType(p, [&](auto e) { // P lower, P and V' staged in the scratch's type
        using E = decltype(e);
        mm<4, 4>(b, C, nj, C, sharedRowMajorAs<E>(m.pm, stagedLdOf<E>(m.ls)), sharedRowMajorAs<E>(m.v, stagedLdOf<E>(m.ls)), m.o, L, 1.0f, true, kAll, kLowerA);
    });
    b.phase([&](int tid, int n) { // four columns a store where the sizes allow (copyRows)
        copyRows(tid, n, In{m.o, false}, 0, L, pos.len, pos.len, nj, p.o, (int64_t(pos.start) * p.hv + h) * dv + j0, int64_t(p.hv) * dv);
        forUncovered(p, int64_t(c) * n + tid, int64_t(p.chunks) * n, nj, [&](int64_t t, int j) { p.o.set((t * p.hv + h) * dv + j0 + j, 0.0f); });
    });
}

} // namespace sightline::gdn
