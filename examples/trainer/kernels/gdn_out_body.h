#pragma once
// The gated delta rule's output (gdn_bodies.h), every chunk at once once the state pass has run:
// grid (chunks, hv), each block chunk c of value head h, O = (Q exp(gamma)) S + P V' from the
// state S entering the chunk and V' (both written by the pass, V' in U's place) and the prep's Q
// and P. Out of the pass, the output's two products no longer wait in its sequential loop.
#include "gdn_bodies.h"
#include "gdn_stage.h"

namespace sightline::gdn {

// The output's shared memory: the chunk's [64 x dv] output (rows of padded(dv)).
inline int64_t outFloats(int dv) { return carved(int64_t(kChunk) * padded(dv)); }

template <class Block>
SL_GDN_FN void outputBody(Block& b, const Params& p, int c, int h, float* smem) {
    constexpr int C = kChunk;
    const int dk = p.dk, dv = p.dv, ld = padded(dv);
    const ChunkPos pos = chunkAt(p, c);
    const int64_t base = slotBase(p, h, c);
    float* o = smem;
    mm<4, 4>(b, C, dv, dk, rowMajor(p.qn + base * dk, dk), rowMajor(p.states + stateBase(p, h, c), dv), o, ld, 1.0f, false);
    b.phase([&](int tid, int n) {
        forEach(tid, n, C, dv, [&](int r, int d) { o[r * ld + d] *= expf_(p.gamma[base + r]); }); // (Q exp(gamma)) S
    });
    mm<4, 4>(b, C, dv, C, rowMajor(p.p + chunkMatrix(p, h, c), C), rowMajor(p.u + base * dv, dv), o, ld, 1.0f, true);
    b.phase([&](int tid, int n) {
        forEach(tid, n, pos.len, dv, [&](int r, int d) { p.o.set((int64_t(pos.start + r) * p.hv + h) * dv + d, o[r * ld + d]); });
    });
}

} // namespace sightline::gdn
