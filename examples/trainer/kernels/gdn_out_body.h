#pragma once
// The gated delta rule's output (gdn_bodies.h), every chunk at once once the state pass has run:
// grid (chunks, hv, dv / 64), each block chunk c of value head h and 64 value columns,
// O = (Q exp(gamma)) S + P V' from the state S entering the chunk and V' (both written by the
// pass: V' in U's place, on the bf16 scratch's path in bf16 only, Params::vn_keep) and the prep's
// Q and P (on that path its bf16 P, Params::pb, so that both products take ldmatrix bf16 steps).
// Out of the pass, the output's two products no longer wait in its sequential loop. Every operand
// is staged into shared memory first (16-byte copies), V' into S's place once S is used; about
// 103 KB at dk = 128, so two blocks an SM.
#include "gdn_bodies.h"
#include "gdn_stage.h"

namespace sightline::gdn {

constexpr int kOutV = 64; // value columns a block of the output makes

// The output's shared memory: Q [64 x dk], S's columns [dk x 64] then V''s [64 x 64], P [64 x 64],
// O [64 x 64], gamma's decays (rows of padded(cols)).
struct OutSmem {
    float *q, *sv, *pm, *o, *eg;
};
constexpr int64_t outFloats(int dk) {
    return carved(int64_t(kChunk) * padded(dk)) + carved(int64_t(dk > kChunk ? dk : kChunk) * padded(kOutV)) +
        2 * carved(kChunk * padded(kOutV)) + carved(kChunk);
}
SL_GDN_FN OutSmem carveOut(float* smem, int dk) {
    Carver c{smem};
    OutSmem m;
    m.q = c.take(int64_t(kChunk) * padded(dk));
    m.sv = c.take(int64_t(dk > kChunk ? dk : kChunk) * padded(kOutV));
    m.pm = c.take(kChunk * padded(kOutV));
    m.o = c.take(kChunk * padded(kOutV));
    m.eg = c.take(kChunk);
    return m;
}

template <class Block>
SL_GDN_FN void outputBody(Block& b, const Params& p, int c, int h, int tile, float* smem) {
    constexpr int C = kChunk, L = padded(kOutV);
    const int dk = p.dk, dv = p.dv, j0 = tile * kOutV, nj = tileWidth(dv, j0, kOutV);
    const OutSmem m = carveOut(smem, dk);
    const ChunkPos pos = chunkAt(p, c);
    const int64_t base = slotBase(p, h, c);
    b.phase([&](int tid, int n) {
        stage(tid, n, m.q, padded(dk) * 4, scratchRows(p, p.qn, keyBase(p, h, c), dk));
        stage(tid, n, m.sv, L * 4, stateRows(p, h, c, j0, nj));
        stage(tid, n, m.pm, L * 4, p.bf16_scratch ? scratchRows(p, p.pb, base, C) : floatRows(p.p + chunkMatrix(p, h, c), C, 0, 0, C, C));
        commitStaged();
        for (int r = tid; r < C; r += n) m.eg[r] = expf_(p.gamma[base + r]);
        waitStaged<0>();
    });
    withScratchType(p, [&](auto e) { // (Q S, Q and S staged in the scratch's type: in bf16 by ldmatrix)
        using E = decltype(e);
        mm<4, 4>(b, C, nj, dk, sharedRowMajorAs<E>(m.q, stagedLdOf<E>(padded(dk))), sharedRowMajorAs<E>(m.sv, stagedLdOf<E>(L)), m.o, L, 1.0f, false);
    });
    b.phase([&](int tid, int n) { // S is used: V''s columns take its place
        stage(tid, n, m.sv, L * 4, p.bf16_scratch ? elementRows(p.vn_keep.p, 2, dv, base, j0, C, nj) : floatRows(p.u, dv, base, j0, C, nj));
        commitStaged();
        forEach(tid, n, C, nj, [&](int r, int j) { m.o[r * L + j] *= m.eg[r]; }); // (Q exp(gamma)) S
        waitStaged<0>();
    });
    withScratchType(p, [&](auto e) { // P lower, P and V' staged in the scratch's type
        using E = decltype(e);
        mm<4, 4>(b, C, nj, C, sharedRowMajorAs<E>(m.pm, stagedLdOf<E>(L)), sharedRowMajorAs<E>(m.sv, stagedLdOf<E>(L)), m.o, L, 1.0f, true, kAll, kLowerA);
    });
    b.phase([&](int tid, int n) {
        forEach(tid, n, pos.len, nj, [&](int r, int j) { p.o.set((int64_t(pos.start + r) * p.hv + h) * dv + j0 + j, m.o[r * L + j]); });
    });
}

} // namespace sightline::gdn
