#pragma once
// The gated delta rule's chunk gradients (gdn_bodies.h): grid (chunks, hv), each block one chunk
// of one value head, from its entering state S, the gradient dS of the state it leaves, V' and dV'
// (the state passes) and the prep's scratch. With dO the output's gradient:
//   dQd = dO S^T, dP = tril(dO V'^T), dW = -dV' S^T, dKend = V' dS^T, da = sum(S . dS),
//   dBV = T^T dV', dBK = T^T dW, dT = dV' (beta V)^T + dW (beta exp(gamma) K)^T,
//   dA = -strictly_lower(T^T dT T^T); nP = dP . decay, nA = dA . decay;
//   dq = nP K + dQd exp(gamma), dk = nP^T Q + nA^T (beta K) + beta (nA K) + dKend exp(gamma_L - gamma)
//   + dBK beta exp(gamma), dv = dBV beta, dbeta and dgamma from the row sums, dg = the reverse
//   cumulative sum of dgamma within the chunk; dq and dk through the L2 norms (each value head
//   adds its share to its key head's; where Params::pair the two value heads' blocks of a key head
//   are a cluster, and the first adds the second's share to its own in shared memory: keyGrad).
#include "gdn_bodies.h"
#include "gdn_stage.h"

namespace sightline::gdn {

namespace detail {

// Two blocks an SM: shared memory holds the staged rows (gradFloats: dO and K, in bf16 side by
// side, in fp32 K in dO's place once dO is used), x1, m1, m2 (nA, read by most of the products
// that follow it), the row vectors and red; x2, x3 (rows of ld = padded(max(dk, dv)) elements, bf16 on the bf16 scratch's path) and
// np (rows of L = padded(64)) are the block's own slice of global scratch
// (Params::grad_scratch; written and read back by the same block, so from L2), and S (sst) and dS
// are read where the passes left them. Against the whole working set in shared memory (one block
// an SM): the scratch in L2 cost 0.75 ms a layer at one block an SM, and the second block an SM
// saved 1.2 (one layer's forward+backward on 1 x 8,192 8.59 -> 8.13 ms; session 22). m2 came back
// to shared memory when the row sums went to 16 lanes a row (half their space): 8.00 -> 7.67 ms
// (session 23).
// In bf16 (the tensor cores' path) the regions carry the products' operands, each staged
// (gdn_stage.h) while the phases before its product run, so that the products read shared memory
// rather than L2 (the Nsight Compute profile of session 34: a third of the stall samples waited on
// global memory):
//   dO's half  dO (dQd, dP) -> T in fp32 (gradWy) -> V' (dKend) -> Q (nP^T Q)
//   K's half   K, throughout
//   m2         V' (dP) -> dT, nA -> N + N^T (its product with K, in gradK)
//   m1         dP, nP (nP K) -> dV' (dW, dBV, dT) -> nP again, kept in np meanwhile (nP^T Q)
//   x1         dq -> dW (bf16: dT's second part by ldmatrix) -> T^T dT, K K^T (rows of L) -> dk
// dP and K K^T, both operands bf16 in shared memory, load their fragments by ldmatrix (gdn_tc.h).
struct GradRegions {
    float *dO, *x1, *x2, *x3, *m1, *m2, *gam, *eg, *egap, *bet, *be, *dga, *dba, *tmp, *tmp2, *red, *kst;
    float* vst;     // V' staged in bf16 (in m2, for dP), or null: read where it was kept
    float* np;      // nP's copy in the global scratch (bf16: m1 holds dV' through gradWy's first products)
    bool xb;        // x2 and x3 in bf16 (the bf16 scratch's path: half the bytes through L2), rows of ld elements
    const float* t; // T: staged (bf16 scratch) or where the prep left it
    int64_t sst;    // where the entering state starts in Params::states
    int ld, L;      // the rows of x1..x3, of m1, m2 and np (S has rows of dv floats)
    int sl, tl;     // the rows of dO, K and V' staged, in elements of the scratch's type; of T
};

// Whether the chunk gradients stage V' (kept by the forward in bf16, on the bf16 scratch's path).
SL_GDN_FN bool stagesVn(const Params& p) { return p.bf16_scratch && p.vn_given.bf16 && p.dv % 2 == 0; }

SL_GDN_FN GradRegions carveGrad(float* s, const Params& p, int c, int h) {
    constexpr int C = kChunk;
    const int d = p.dk > p.dv ? p.dk : p.dv, ld = padded(d), L = padded(C);
    const bool h16 = p.bf16_scratch;
    GradRegions g;
    g.dO = s;
    g.kst = h16 ? s + gradHalf(d) : s;
    g.x1 = s + gradStaged(d);
    g.m1 = g.x1 + gradX1(d);
    g.m2 = g.m1 + C * L;
    g.gam = g.m2 + C * L;
    g.eg = g.gam + C;
    g.egap = g.eg + C;
    g.bet = g.egap + C;
    g.be = g.bet + C;
    g.dga = g.be + C;
    g.dba = g.dga + C;
    g.tmp = g.dba + C;
    g.tmp2 = g.tmp + C;
    g.red = g.tmp2 + C; // kGradRed floats
    g.vst = stagesVn(p) ? g.m2 : nullptr;
    g.x2 = p.grad_scratch + (int64_t(h) * p.chunks + c) * gradScratchFloats(p.dk, p.dv);
    g.x3 = g.x2 + C * ld;
    g.np = g.x3 + C * ld;
    g.xb = h16;
    g.sst = stateBase(p, h, c);
    g.t = h16 ? s : p.t + chunkMatrix(p, h, c);
    g.ld = ld;
    g.L = L;
    g.sl = h16 ? 2 * stageRow(d, 2) : ld;
    g.tl = h16 ? L : C;
    return g;
}

// f(V' of chunk c of value head h): the forward's bf16 copy where it was kept so (read in place), else
// the prep's fp32 one.
template <class F>
SL_GDN_FN void withVn(const Params& p, int c, int h, F&& f) {
    const int64_t off = slotBase(p, h, c) * p.dv;
    withScratch(p.vn_given.bf16 ? p.vn_given.p : p.vn, p.vn_given.bf16, off, f);
}

// This thread's share of the output's gradient into dO in the scratch's type E, zero past the
// segment's end, in rows of sl elements: fp32 as loadRows has them; bf16 staged as they are where
// the gradient is bf16 (the caller commits and waits), else rounded one by one. dO's products (dQd
// and dP) then take bf16 steps where their other operand is bf16 too (gdn_tc.h).
template <class E>
SL_GDN_FN void loadGradOut(int tid, int n, const Params& p, const ChunkPos& pos, int h, const GradRegions& s) {
    const int dv = p.dv, len = pos.len, lo = s.sl;
    const int64_t r0 = (int64_t(pos.start) * p.hv + h) * dv, rs = int64_t(p.hv) * dv;
    if constexpr (sizeof(E) == sizeof(float)) {
        loadRows(tid, n, p.dout, r0, rs, kChunk, len, dv, s.dO, lo);
    } else {
        uint16_t* o = reinterpret_cast<uint16_t*>(s.dO);
        if (p.dout.bf16 && dv % 2 == 0) {
            stage(tid, n, o, lo * 2, elementRows(p.dout.p, 2, rs, pos.start, h * dv, len, dv));
            forEach(tid, n, kChunk - len, dv, [&](int r, int d) { o[(len + r) * lo + d] = 0; });
        } else {
            forEach(tid, n, kChunk, dv, [&](int r, int d) { o[r * lo + d] = r < len ? floatToBf16(p.dout[r0 + r * rs + d]) : 0; });
        }
    }
}

// This thread's share of the first staged groups: dO (where staged) with V' (where staged), then
// K in bf16 (in fp32 it takes dO's place later: gradQ), each group committed.
template <class E>
SL_GDN_FN void stageGradIn(int tid, int n, const Params& p, const ChunkPos& pos, int c, int h, const GradRegions& s) {
    loadGradOut<E>(tid, n, p, pos, h, s);
    if (s.vst) stage(tid, n, s.vst, s.sl * 2, scratchRows(p, p.vn_given.p, slotBase(p, h, c), p.dv));
    commitStaged();
    if constexpr (sizeof(E) == sizeof(uint16_t)) {
        stage(tid, n, s.kst, s.sl * 2, scratchRows(p, p.kn, keyBase(p, h, c), p.dk));
        commitStaged();
    }
}

// The decays, beta, zeroed accumulators and the output's gradient (zero past the segment's end);
// V' and K staged in bf16 (K may land later: gradQ waits for it).
template <class Block>
SL_GDN_FN void gradLoad(Block& b, const Params& p, const ChunkPos& pos, int c, int h, const GradRegions& s) {
    constexpr int C = kChunk;
    const int64_t base = slotBase(p, h, c);
    b.phase([&](int tid, int n) {
        withScratchType(p, [&](auto e) { stageGradIn<decltype(e)>(tid, n, p, pos, c, h, s); });
        for (int r = tid; r < C; r += n) {
            const float* gam = p.gamma + base;
            s.gam[r] = gam[r];
            s.bet[r] = p.beta_s[base + r];
            s.eg[r] = expf_(gam[r]);
            s.egap[r] = expf_(gam[C - 1] - gam[r]);
            s.be[r] = s.bet[r] * s.eg[r];
            s.dga[r] = 0.0f;
            s.dba[r] = 0.0f;
        }
        if (p.bf16_scratch) waitStaged<1>(); // dO and V', where staged; K may be in flight
        else waitStaged<0>();
    });
}

// A staged region of the chunk gradients (dO, K, V') as elements of the scratch's type E.
template <class E>
SL_GDN_FN const E* stagedAs(const float* x) {
    return reinterpret_cast<const E*>(x);
}

// dQd = dO S^T and dP = dO V'^T, in one phase; dP from V' staged where it is (both operands then
// bf16 in shared memory: ldmatrix), else from where V' was kept.
template <class Block>
SL_GDN_FN void gradOutProducts(Block& b, const Params& p, int c, int h, const GradRegions& s) {
    constexpr int C = kChunk;
    const int dk = p.dk, dv = p.dv;
    withVn(p, c, h, [&](const auto* vn) {
        withScratchType(p, [&](auto e) {
            using E = decltype(e);
            const auto dQd = product(C, dk, dv, rowMajor(stagedAs<E>(s.dO), s.sl), transposed(typed<E>(p.states, s.sst), dv), s.x1, s.ld, 1.0f, false);
            if constexpr (sizeof(E) == sizeof(uint16_t)) {
                if (s.vst) {
                    mmPhase<4, 4>(b, dQd, product(C, C, dv, sharedRowMajorAs<E>(s.dO, s.sl), sharedTransposedAs<E>(s.vst, s.sl), s.m1, s.L, 1.0f, false, kLower));
                    return;
                }
            }
            mmPhase<4, 4>(b, dQd, product(C, C, dv, rowMajor(stagedAs<E>(s.dO), s.sl), transposed(vn, dv), s.m1, s.L, 1.0f, false, kLower));
        });
    });
}

// dq or dk (dst: Params::grad_q or grad_k) from this value head's share before the L2 norm's
// gradient (x1), of x (rows from x0, xs apart, normalised and scaled by `scale`): each value head
// adds its share's gradient to dst's fp32 rows; where Params::pair the cluster's second block's
// share is first added to the first's (shared memory to shared memory), and the first alone stores
// the whole gradient into dst. also(tid, n) runs in the last phase either way.
template <class Block, class Also = NoStage>
SL_GDN_FN void keyGrad(Block& b, const Params& p, const ChunkPos& pos, int h, const In& x, int64_t x0, int64_t xs, float scale,
                       const Out& dst, const GradRegions& s, const Also& also = {}) {
    const int dk = p.dk, ld = s.ld;
    const int64_t row0 = (int64_t(pos.start) * p.hk + keyHead(p, h)) * dk, stride = int64_t(p.hk) * dk;
    if (!p.pair) {
        l2normGrad<kGradLanes>(b, p.fours, x, x0, xs, pos.len, dk, s.x1, ld, scale, AddRows{static_cast<float*>(dst.p) + row0, stride}, s.red, s.tmp,
                               s.tmp2, also);
        return;
    }
    const bool first = h % 2 == 0;
    clusterSync(); // both shares made
    if (first) b.phase([&](int tid, int n) {
        const float* theirs = clusterShared(s.x1, 1);
        forEach(tid, n, pos.len, dk / 4, [&](int r, int g) {
            float mine[4], other[4];
            load4(In{s.x1, false}, r * ld + 4 * g, mine);
            load4(In{theirs, false}, r * ld + 4 * g, other);
            for (int k = 0; k < 4; ++k) mine[k] += other[k];
            store4(Out{s.x1, false}, r * ld + 4 * g, mine);
        });
    });
    clusterSync(); // the second's share read: its x1 is its own again
    if (!first) {
        b.phase(also);
        return;
    }
    l2normGrad<kGradLanes>(b, true, x, x0, xs, pos.len, dk, s.x1, ld, scale, StoreRows{dst, row0, stride}, s.red, s.tmp, s.tmp2, also);
}

// dq: nP K + dQd exp(gamma); leaves nP in m1; adds the shares of dgamma through Qd and P.
template <class Block>
SL_GDN_FN void gradQ(Block& b, const Params& p, const ChunkPos& pos, int c, int h, const GradRegions& s) {
    constexpr int C = kChunk;
    const int64_t mat = chunkMatrix(p, h, c), key = keyBase(p, h, c);
    const int dk = p.dk, kh = keyHead(p, h);
    const In qn = scratchIn(p, p.qn);
    // P: bf16 on the bf16 scratch's path (the prep's pb, which the reverse pass stages too), else fp32
    const In pm{p.bf16_scratch ? p.pb : static_cast<const void*>(p.p), p.bf16_scratch};
    const int ld = s.ld, L = s.L;
    gradOutProducts(b, p, c, h, s);
    rowDots<kGradLanes>(b, p.fours, C, dk, s.red, RowsOf{In{s.x1, false}, 0, ld}, RowsOf{qn, key * dk, dk},
                        [&](int r, float sum) { s.dga[r] += sum * s.eg[r]; });
    b.phase([&](int tid, int n) {
        forEach(tid, n, C, dk, [&](int r, int d) { s.x1[r * ld + d] *= s.eg[r]; });
    });
    // dO's last use is behind: T's staging (bf16, K landed) or K's (fp32) starts in its place
    b.phase([&](int tid, int n) {
        if (p.bf16_scratch) {
            waitStaged<0>();
            stage(tid, n, s.dO, L * 4, floatRows(p.t + mat, C, 0, 0, C, C));
        } else {
            stage(tid, n, s.kst, ld * 4, scratchRows(p, p.kn, key, dk));
        }
        commitStaged();
        for (int e = tid; e < C * C; e += n) {
            const int i = e / C, j = e % C;
            const float dp = s.m1[i * L + j], np = j <= i ? dp * expf_(s.gam[i] - s.gam[j]) : 0.0f;
            s.m2[i * L + j] = dp * pm[mat + e];
            s.m1[i * L + j] = np;
            if (p.bf16_scratch) s.np[i * L + j] = np; // back in m1 for gradK once dV' is used (gradWy)
        }
    });
    // row r's sum and column r's, side by side (a thread's column loop alone took 64 steps)
    rowSumsN<2, kGradLanes>(
        b, C, C, s.red,
        [&](int r, int j, float* acc) {
            acc[0] += s.m2[r * L + j];
            acc[1] += s.m2[j * L + r];
        },
        [&](int r, const float* sums) { s.dga[r] += sums[0] - sums[1]; });
    withScratchType(p, [&](auto e) { // nP lower; K staged in bf16, else from the scratch
        using E = decltype(e);
        const auto k = sizeof(E) == sizeof(uint16_t) ? rowMajor(stagedAs<E>(s.kst), s.sl) : rowMajor(typed<E>(p.kn, key * dk), dk);
        mm<4, 4>(b, C, dk, C, rowMajor(s.m1, L), k, s.x1, ld, 1.0f, true, kAll, kLowerA);
    });
    // nP is used (and kept in the scratch): in bf16 dV' staged into its place for gradWy
    const auto stageDvn = [&](int tid, int n) {
        if (!p.bf16_scratch) return;
        stage(tid, n, s.m1, s.sl * 2, scratchRows(p, p.dvn, slotBase(p, h, c), p.dv));
        commitStaged();
    };
    keyGrad(b, p, pos, h, p.q, pos.start * p.q_tok + kh * dk, p.q_tok, p.scale, p.grad_q, s, stageDvn);
}

// Through the WY form: dW (x1), dBK (x2), dBV (x3), dT = dV' (beta V)^T + dW (beta exp(gamma) K)^T
// (m2: each part's scale by column folded into its product's stores, in two phases), then nA (m2)
// and K K^T (in x1); adds beta's and gamma's shares through A = beta K K^T . decay.
template <class Block>
SL_GDN_FN void gradWy(Block& b, const Params& p, int c, int h, const GradRegions& s) {
    constexpr int C = kChunk;
    const int dk = p.dk, dv = p.dv;
    const int64_t base = slotBase(p, h, c);
    const float* tm = s.t;
    const int ld = s.ld, L = s.L, tl = s.tl;
    b.phase([&](int, int) { waitStaged<0>(); }); // T and dV' staged (bf16) or K (fp32)
    // dvn staged in bf16 (m1), else read; S and v's rows read; K staged; in the scratch's type
    // dW in the scratch's type E in x1 (rows of ld floats, or of sl bf16 beside K's staged rows), so
    // that in bf16 dT's second part takes both operands by ldmatrix
    withScratchType(p, [&](auto e) {
        using E = decltype(e);
        const bool h16 = sizeof(E) == sizeof(uint16_t);
        const auto dvn = h16 ? rowMajor(stagedAs<E>(s.m1), s.sl) : rowMajor(typed<E>(p.dvn, base * dv), dv);
        const E *st = typed<E>(p.states, s.sst), *vs = typed<E>(p.vs, base * dv);
        const int lw = h16 ? s.sl : ld;
        mmPhase<4, 4>(b, product(C, dk, dv, dvn, transposed(st, dv), Out{s.x1, h16}, lw, -1.0f, false),            // dW
                      product(C, dv, C, transposed(tm, tl), dvn, Out{s.x3, s.xb}, ld, 1.0f, false, kAll, kUpperA), // dBV (T^T upper)
                      scaledColumns(product(C, C, dv, dvn, transposed(vs, dv), s.m2, L, 1.0f, false), s.bet));     // dT's first part
        const auto dW = [&] {
            if constexpr (sizeof(E) == sizeof(uint16_t)) return sharedRowMajorAs<E>(s.x1, lw);
            else return rowMajor(s.x1, ld);
        }();
        const auto kt = [&] {
            if constexpr (sizeof(E) == sizeof(uint16_t)) return sharedTransposedAs<E>(s.kst, s.sl);
            else return transposed(stagedAs<E>(s.kst), s.sl);
        }();
        // dV' is used: in bf16 nP goes back into m1 meanwhile (gradK waits)
        b.phase([&](int tid, int n) {
            if (h16) {
                stage(tid, n, s.m1, L * 4, floatRows(s.np, L, 0, 0, C, C));
                commitStaged();
            }
            productShare<4, 4>(b, tid, n, product(C, dk, C, transposed(tm, tl), rowMajor(stagedAs<E>(s.x1), lw), Out{s.x2, s.xb}, ld, 1.0f, false, kAll, kUpperA)); // dBK
            productShare<4, 4>(b, tid, n, scaledColumns(product(C, C, dk, dW, kt, s.m2, L, 1.0f, true), s.be));                                                     // dT's second part
        });
    });
    // dW is used: x1 holds T^T dT and then K K^T (rows of L) in shared memory
    float* const xm = s.x1;
    mm<4, 4>(b, C, C, C, transposed(tm, tl), rowMajor(s.m2, L), xm, L, 1.0f, false, kAll, kUpperA);
    mm<4, 4>(b, C, C, C, rowMajor(xm, L), transposed(tm, tl), s.m2, L, -1.0f, false, kStrictlyLower, kUpperB); // dA
    b.phase([&](int tid, int n) {
        if (stagesVn(p)) { // T is used: V' into its place, for dKend (gradDecay; gradV waits)
            stage(tid, n, s.dO, s.sl * 2, scratchRows(p, p.vn_given.p, base, dv));
            commitStaged();
        }
        for (int e = tid; e < C * C; e += n) {
            const int i = e / C, j = e % C;
            s.m2[i * L + j] = j < i ? s.m2[i * L + j] * expf_(s.gam[i] - s.gam[j]) : 0.0f; // nA
        }
    });
    withScratchType(p, [&](auto e) { // K K^T (bf16: ldmatrix)
        using E = decltype(e);
        mm<4, 4>(b, C, C, dk, sharedRowMajorAs<E>(s.kst, s.sl), sharedTransposedAs<E>(s.kst, s.sl), xm, L, 1.0f, false);
    });
    rowSumsN<2, kGradLanes>(
        b, C, C, s.red,
        [&](int r, int j, float* acc) {
            acc[0] += s.m2[r * L + j] * xm[r * L + j];
            acc[1] += s.m2[j * L + r] * s.bet[j] * xm[j * L + r];
        },
        [&](int r, const float* sums) {
            s.dba[r] += sums[0];
            s.dga[r] += s.bet[r] * sums[0] - sums[1];
        });
}

// The state's gradient dS [dk x dv] of chunk c into x1 (free once K K^T is used) in rows of sl, in
// bf16, for dKend (one phase's share; committed).
SL_GDN_FN void stageDs(int tid, int n, const Params& p, int c, int h, const GradRegions& s) {
    stage(tid, n, s.x1, s.sl * 2, elementRows(p.dstates, 2, p.dv, stateRow(p, h, c), 0, p.dk, p.dv));
    commitStaged();
}

// dv = dBV beta; beta's shares from dBV . V and dBK . K exp(gamma), gamma's from dBK . beta exp(gamma) K.
// In bf16 dS is staged meanwhile (gradDecay).
template <class Block>
SL_GDN_FN void gradV(Block& b, const Params& p, const ChunkPos& pos, int c, int h, const GradRegions& s) {
    const int dk = p.dk, dv = p.dv;
    const int64_t base = slotBase(p, h, c);
    const In vs = scratchIn(p, p.vs), kn = scratchIn(p, s.kst);
    const int lk = s.sl; // K's staged rows
    const RowsOf x2{In{s.x2, s.xb}, 0, s.ld}, x3{In{s.x3, s.xb}, 0, s.ld}, v{vs, base * dv, dv}, k{kn, 0, lk};
    const int64_t g0 = (int64_t(pos.start) * p.hv + h) * dv, gs = int64_t(p.hv) * dv; // dv's rows
    b.phase([&](int tid, int n) {                                                     // dBV (x3) from L2: four elements a load where the sizes allow
        if (p.fours) {
            forEach(tid, n, pos.len, dv / 4, [&](int r, int g) {
                float x[4];
                x3.load4(r, 4 * g, x);
                for (int e = 0; e < 4; ++e) x[e] *= s.bet[r];
                store4(p.grad_v, g0 + r * gs + 4 * g, x);
            });
        } else {
            forEach(tid, n, pos.len, dv, [&](int r, int d) { p.grad_v.set(g0 + r * gs + d, x3.at(r, d) * s.bet[r]); });
        }
        if (stagesVn(p)) waitStaged<0>(); // V' (gradWy)
        if (p.bf16_scratch) stageDs(tid, n, p, c, h, s);
    });
    const auto out = [&](int r, const float* sums) {
        s.dba[r] += sums[0] + s.eg[r] * sums[1];
        s.dga[r] += s.be[r] * sums[1];
    };
    const auto waitDs = [&](int, int) {
        if (p.bf16_scratch) waitStaged<0>(); // dS
    };
    if (p.fours) { // dBV . V over dv columns and dBK . K over dk, in one pass (both multiples of 4)
        rowSumsN4<2, kGradLanes>(
            b, kChunk, dk > dv ? dk : dv, s.red,
            [&](int r, int d, float* acc) {
                if (d < dv) acc[0] += dot4(x3, v, r, d);
                if (d < dk) acc[1] += dot4(x2, k, r, d);
            },
            out, waitDs);
        return;
    }
    rowSumsN<2, kGradLanes>(
        b, kChunk, dk > dv ? dk : dv, s.red,
        [&](int r, int d, float* acc) {
            if (d < dv) acc[0] += x3.at(r, d) * v.at(r, d);
            if (d < dk) acc[1] += x2.at(r, d) * k.at(r, d);
        },
        out, waitDs);
}

// Value head h's dv, dg and dbeta of the tokens outside every segment, the block's share
// (forUncovered); where Params::pair, the first of a pair also its key head's dq and dk.
SL_GDN_FN void zeroUncovered(const Params& p, int c, int h, int tid, int n) {
    const int dv = p.dv, dk = p.dk;
    const int64_t first = int64_t(c) * n + tid, step = int64_t(p.chunks) * n;
    if (!p.pair) {
        forUncovered(p, first, step, dv + 2, [&](int64_t t, int e) {
            const int64_t row = t * p.hv + h;
            if (e < dv) p.grad_v.set(row * dv + e, 0.0f);
            else (e == dv ? p.grad_g : p.grad_beta)[row] = 0.0f;
        });
        return;
    }
    // one pass for both (in two, the pairs' form kept 8 more bytes of its frame)
    const int keys = h % 2 == 0 ? 2 * dk : 0;
    forUncovered(p, first, step, dv + 2 + keys, [&](int64_t t, int e) {
        const int64_t row = t * p.hv + h, key = (t * p.hk + keyHead(p, h)) * dk;
        if (e < dv) p.grad_v.set(row * dv + e, 0.0f);
        else if (e < dv + 2) (e == dv ? p.grad_g : p.grad_beta)[row] = 0.0f;
        else if (e < dv + 2 + dk) p.grad_q.set(key + e - dv - 2, 0.0f);
        else p.grad_k.set(key + e - dv - 2 - dk, 0.0f);
    });
}

#if defined(__CUDA_ARCH__)
// The chunk's last steps by the block's first warp, two rows a lane: da (the sum of the block's n
// partials in red) and the gap decays' shares (s.tmp) into the last row of dgamma; dg, the reverse
// cumulative sum of dgamma, by a scan across lanes (shuffles), and dbeta out. (One thread's 64
// rows in turn were 3.5% of the block by the phase clock, the H100, session 44; the CPU emulation
// keeps that form.)
SL_GDN_FN void decayTail(int tid, int n, const Params& p, const ChunkPos& pos, int h, const GradRegions& s) {
    static_assert(kChunk == 64, "two rows a lane of one warp");
    constexpr unsigned all = 0xffffffffu;
    if (tid >= 32) return;
    const int lane = tid;
    float da = 0.0f, last = s.tmp[2 * lane] + s.tmp[2 * lane + 1];
    for (int u = lane; u < n; u += 32) da += s.red[u];
    for (int o = 16; o > 0; o /= 2) {
        da += __shfl_xor_sync(all, da, o);
        last += __shfl_xor_sync(all, last, o);
    }
    const float d0 = s.dga[2 * lane], d1 = s.dga[2 * lane + 1] + (lane == 31 ? last + da * expf_(s.gam[kChunk - 1]) : 0.0f);
    float from = d0 + d1; // rows 2 lane .. 63, once the scan is done
    for (int o = 1; o < 32; o *= 2) {
        const float above = __shfl_down_sync(all, from, o);
        if (lane + o < 32) from += above;
    }
    float after = __shfl_down_sync(all, from, 1); // rows 2 lane + 2 .. 63
    if (lane == 31) after = 0.0f;
    const float sum[2] = {after + d1 + d0, after + d1};
    for (int e = 0; e < 2; ++e) {
        const int r = 2 * lane + e;
        if (r >= pos.len) continue;
        const int64_t at = int64_t(pos.start + r) * p.hv + h;
        p.grad_g[at] = e == 0 ? sum[0] : sum[1];
        p.grad_beta[at] = s.dba[r];
    }
}
#endif

// da = sum(S . dS) and the gap decays' share (s.tmp) into dgamma; then dg (the reverse cumulative
// sum of dgamma) and dbeta out. Q is staged in bf16 once V' is used, for gradK.
template <class Block>
SL_GDN_FN void gradStateDecay(Block& b, const Params& p, const ChunkPos& pos, int c, int h, const GradRegions& s) {
    constexpr int C = kChunk;
    const int dk = p.dk, dv = p.dv;
    const int64_t st = stateBase(p, h, c);
    // da's partial products, a float a thread, four elements a load where the state's size allows
    // (a warp's load 256 bytes of bf16, not 64); the gap decays' share leaves dgamma's rows
    const In state = scratchIn(p, p.states), dstate = scratchIn(p, p.dstates);
    b.phase([&](int tid, int n) {
        if (p.bf16_scratch) { // V' is used: Q into its place (gradK waits)
            stage(tid, n, s.dO, s.sl * 2, scratchRows(p, p.qn, keyBase(p, h, c), dk));
            commitStaged();
        }
        const int size = dk * dv, fours = size % 4 == 0 && aligned4(state.p, state.bf16) && aligned4(dstate.p, dstate.bf16) ? size / 4 : 0;
        float part = 0.0f;
        SL_GDN_UNROLL
        for (int i = tid; i < fours; i += n) {
            float x[4], y[4];
            load4(state, st + 4 * i, x);
            load4(dstate, st + 4 * i, y);
            part += x[0] * y[0] + x[1] * y[1] + x[2] * y[2] + x[3] * y[3];
        }
        for (int i = 4 * fours + tid; i < size; i += n) part += state[st + i] * dstate[st + i];
        s.red[tid] = part;
        if (tid < C) s.dga[tid] -= s.tmp[tid];
    });
#if defined(__CUDA_ARCH__)
    b.phase([&](int tid, int n) {
        zeroUncovered(p, c, h, tid, n);
        decayTail(tid, n, p, pos, h, s);
    });
#else
    // the partials summed 32 at a time by several threads, not all by one (one thread summing the
    // block's 512 partials held 4.3% of the kernel's stall samples, Nsight Compute, session 18)
    constexpr int kParts = kGradThreads / 32;
    static_assert(kGradThreads + kParts + 1 <= kGradRed, "the partials' sums do not fit in red");
    float* sums = s.red + kGradThreads; // kParts + 1 floats after the partials
    b.phase([&](int tid, int n) {
        if (tid < kParts) {
            float acc = 0.0f;
            for (int u = tid; u < n; u += kParts) acc += s.red[u];
            sums[tid] = acc;
        } else if (tid == kParts) {
            float last = 0.0f;
            for (int r = 0; r < C; ++r) last += s.tmp[r];
            sums[kParts] = last;
        }
        zeroUncovered(p, c, h, tid, n);
    });
    b.phase([&](int tid, int) {
        if (tid != 0) return;
        float da = 0.0f;
        for (int t = 0; t < kParts; ++t) da += sums[t];
        s.dga[C - 1] += sums[kParts] + da * expf_(s.gam[C - 1]);
        float acc = 0.0f;
        for (int r = C - 1; r >= 0; --r) {
            acc += s.dga[r];
            if (r < pos.len) {
                p.grad_g[int64_t(pos.start + r) * p.hv + h] = acc;
                p.grad_beta[int64_t(pos.start + r) * p.hv + h] = s.dba[r];
            }
        }
    });
#endif
}

// dKend = V' dS^T (x3; V' staged where stagesVn, dS in bf16) and the gap decays' share of
// dgamma, then gradStateDecay.
template <class Block>
SL_GDN_FN void gradDecay(Block& b, const Params& p, const ChunkPos& pos, int c, int h, const GradRegions& s) {
    constexpr int C = kChunk;
    const int dk = p.dk, dv = p.dv;
    const int64_t st = stateBase(p, h, c);
    const In kn = scratchIn(p, s.kst);
    const int lk = s.sl; // K's staged rows
    withVn(p, c, h, [&](const auto* vn) {
        withScratchType(p, [&](auto e) {
            using E = decltype(e);
            if constexpr (sizeof(E) == sizeof(uint16_t)) { // dS staged; with V' too, both by ldmatrix
                const auto dS = sharedTransposedAs<E>(s.x1, s.sl);
                if (stagesVn(p)) mmPhase<4, 4>(b, product(C, dk, dv, sharedRowMajorAs<E>(s.dO, s.sl), dS, Out{s.x3, s.xb}, s.ld, 1.0f, false));
                else mmPhase<4, 4>(b, product(C, dk, dv, rowMajor(vn, dv), dS, Out{s.x3, s.xb}, s.ld, 1.0f, false));
            } else {
                mmPhase<4, 4>(b, product(C, dk, dv, rowMajor(vn, dv), transposed(typed<E>(p.dstates, st), dv), Out{s.x3, s.xb}, s.ld, 1.0f, false));
            }
        });
    });
    rowDots<kGradLanes>(b, p.fours, C, dk, s.red, RowsOf{In{s.x3, s.xb}, 0, s.ld}, RowsOf{kn, 0, lk},
                        [&](int r, float sum) { s.tmp[r] = sum * s.egap[r]; });
    gradStateDecay(b, p, pos, c, h, s);
}

// dk = nP^T Q + nA^T (beta K) + beta (nA K) + dKend exp(gamma_L - gamma) + dBK beta exp(gamma), through the L2 norm.
template <class Block>
SL_GDN_FN void gradK(Block& b, const Params& p, const ChunkPos& pos, int c, int h, const GradRegions& s) {
    constexpr int C = kChunk;
    const int dk = p.dk, kh = keyHead(p, h);
    const int64_t key = keyBase(p, h, c);
    const int ld = s.ld, L = s.L;
    // nA^T (beta K) + beta (nA K) = (N + N^T) K with N = nA's rows times beta: one product, not
    // two; N + N^T in nA's place (symmetric: a thread takes (i, j) and (j, i) together)
    b.phase([&](int tid, int n) {
        for (int e = tid; e < C * C; e += n) {
            const int i = e / C, j = e % C;
            if (j < i) continue;
            const float v = s.m2[i * L + j] * s.bet[i] + s.m2[j * L + i] * s.bet[j];
            s.m2[i * L + j] = v;
            s.m2[j * L + i] = v;
        }
        if (p.bf16_scratch) waitStaged<0>(); // nP (gradWy) and Q (gradDecay)
    });
    withScratchType(p, [&](auto e) { // Q and K staged in bf16 (Q from the scratch in fp32), in the scratch's type
        using E = decltype(e);
        const auto q = sizeof(E) == sizeof(uint16_t) ? rowMajor(stagedAs<E>(s.dO), s.sl) : rowMajor(typed<E>(p.qn, key * dk), dk);
        mmPhase<4, 4>(b, product(C, dk, C, transposed(s.m1, L), q, s.x1, ld, 1.0f, false, kAll, kUpperA),
                      product(C, dk, C, rowMajor(s.m2, L), rowMajor(stagedAs<E>(s.kst), s.sl), s.x1, ld, 1.0f, true));
    });
    b.phase([&](int tid, int n) { // x2 and x3 in L2: four elements a load where the sizes allow
        const In x2{s.x2, s.xb}, x3{s.x3, s.xb};
        if (p.fours) {
            forEach(tid, n, C, dk / 4, [&](int r, int g) {
                const int i = r * ld + 4 * g;
                float x[4], a[4], e[4];
                load4(In{s.x1, false}, i, x);
                load4(x3, i, a);
                load4(x2, i, e);
                for (int k = 0; k < 4; ++k) x[k] += a[k] * s.egap[r] + e[k] * s.be[r];
                store4(Out{s.x1, false}, i, x);
            });
            return;
        }
        forEach(tid, n, C, dk, [&](int r, int d) {
            const int i = r * ld + d;
            s.x1[i] += x3[i] * s.egap[r] + x2[i] * s.be[r];
        });
    });
    keyGrad(b, p, pos, h, p.k, pos.start * p.k_tok + kh * dk, p.k_tok, 1.0f, p.grad_k, s);
}

} // namespace detail

// Grid (chunks, hv): every gradient of chunk c of value head h.
template <class Block>
SL_GDN_FN void chunkGradBody(Block& b, const Params& p, int c, int h, float* smem) {
    const detail::GradRegions s = detail::carveGrad(smem, p, c, h);
    const ChunkPos pos = chunkAt(p, c);
    detail::gradLoad(b, p, pos, c, h, s);
    detail::gradQ(b, p, pos, c, h, s);
    detail::gradWy(b, p, c, h, s);
    detail::gradV(b, p, pos, c, h, s);
    detail::gradDecay(b, p, pos, c, h, s);
    detail::gradK(b, p, pos, c, h, s);
}

} // namespace sightline::gdn
