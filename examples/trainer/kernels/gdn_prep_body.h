#pragma once
// The gated delta rule's prep kernel (gdn_bodies.h has the rule): every chunk of every value head
// at once, its normalised q and k, decays, T, W, U and P into the scratch; in the backward also V'
// from the entering states the forward kept. Its products take operands of the scratch's element
// type E in shared memory (bf16 on the tensor cores' path, where they load their fragments by
// ldmatrix: gdn_tc.h; fp32 on the plain path): q and k rounded once normalised, as the scratch
// keeps them for the other kernels; V's rows as v has them; T's columns scaled by beta and by
// beta exp(gamma) rounded, so that U = (T beta) V and W = (T beta exp(gamma)) K need no scaled
// copy of V or K.
#include "gdn_bodies.h"
#include "gdn_stage.h"

namespace sightline::gdn {

// The triangular inverse's block size, and its scratch in floats (unitLowerInverse).
constexpr int kInvBlock = 16;
constexpr int kInvScratch = (kChunk / kInvBlock - 1) * kInvBlock * kInvBlock;

// The prep's shared memory in floats, for heads dk and dv and the scratch's elements of es bytes.
// Rows: ld floats (q, k and W in fp32, max(dk, dv) columns), L (the [64 x 64] fp32 matrices), se
// and te floats (rows of E of max(dk, dv) and of 64 elements: stageRow's, ldmatrix's). Regions
// hold one thing after another, each taken once the phase of its last reader is done:
//   [0, main): q and k in fp32 as loaded (then prepLoad's row sums right after them); then T (t),
//     A = beta K K^T . decay (a), Q K^T (qk) and the inverse's y; then W in fp32 from 0 and T's
//     two scaled forms from tb (past both W and T), where the backward then stages the state;
//   qe: q normalised, in E, then V's rows; ke: k normalised, in E;
//   vec: gamma, beta, beta exp(gamma), and the norms' 128 scales.
struct PrepLayout {
    int ld = 0, L = 0, se = 0, te = 0;
    int t = 0, a = 0, qk = 0, y = 0, tb = 0, tbe = 0, main = 0, red = 0, qe = 0, ke = 0, vec = 0, floats = 0;
};
SL_GDN_HD constexpr int maxOf(int x, int y) { return x > y ? x : y; }
SL_GDN_HD constexpr PrepLayout prepLayout(int dk, int dv, int es) {
    const int d = dk > dv ? dk : dv, C = kChunk;
    PrepLayout s{padded(d), padded(C), stageRow(d, es), stageRow(C, es)};
    s.t = 0, s.a = C * s.L, s.qk = 2 * C * s.L, s.y = 3 * C * s.L;
    s.tb = C * maxOf(s.ld, s.L), s.tbe = s.tb + C * s.te;
    s.main = maxOf(maxOf(2 * C * s.ld, s.y + kInvScratch), s.tbe + C * s.te);
    s.red = 2 * C * s.ld;
    s.qe = s.main, s.ke = s.qe + C * s.se, s.vec = s.ke + C * s.se;
    s.floats = s.vec + 5 * C;
    return s;
}
constexpr int64_t prepFloats(int dk, int dv, int es) { return prepLayout(dk, dv, es).floats; }
// Every head up to kMaxDim: the row sums (2 x 64 rows of kRedStride) end before vec, and the state
// the backward stages from tb ([dk x dv] in rows of ld) does too.
constexpr bool prepFits() {
    for (int d = 1; d <= kMaxDim; ++d)
        for (int es = 2; es <= 4; es += 2) {
            const PrepLayout s = prepLayout(d, d, es);
            if (s.red + 2 * kChunk * kRedStride > s.vec || s.tb + int64_t(d) * s.ld > s.vec) return false;
        }
    return true;
}
static_assert(prepFits(), "the prep's regions overlap");

// The prep's regions in a block's shared memory, E the scratch's element type: each where the
// layout puts it.
template <class E>
struct PrepSmem {
    float* smem;
    PrepLayout s;
    SL_GDN_FN float* q() const { return smem; }
    SL_GDN_FN float* red() const { return smem + s.red; }
    SL_GDN_FN float* t() const { return smem + s.t; }
    SL_GDN_FN float* a() const { return smem + s.a; }
    SL_GDN_FN float* qk() const { return smem + s.qk; }
    SL_GDN_FN float* y() const { return smem + s.y; }
    SL_GDN_FN float* w() const { return smem; }
    SL_GDN_FN float* st() const { return smem + s.tb; }
    SL_GDN_FN E* qe() const { return reinterpret_cast<E*>(smem + s.qe); }
    SL_GDN_FN E* ke() const { return reinterpret_cast<E*>(smem + s.ke); }
    SL_GDN_FN E* vb() const { return qe(); }
    SL_GDN_FN E* tb() const { return reinterpret_cast<E*>(smem + s.tb); }
    SL_GDN_FN E* tbe() const { return reinterpret_cast<E*>(smem + s.tbe); }
    SL_GDN_FN float* gam() const { return smem + s.vec; }
    SL_GDN_FN float* bet() const { return gam() + kChunk; }
    SL_GDN_FN float* be() const { return bet() + kChunk; }
    SL_GDN_FN float* sc() const { return be() + kChunk; }
    SL_GDN_FN int le() const { return stagedLdOf<E>(s.se); } // E elements a row of qe, ke, vb
    SL_GDN_FN int lt() const { return stagedLdOf<E>(s.te); } // of tb, tbe
};

// gamma's cumulative sum over the chunk's rows in place, and be = beta exp(gamma), as a phase's
// share. On the GPU the block's last warp, two rows a lane and a scan across lanes by shuffles
// (one thread's 64 rows in turn were most of a 13.7% phase of the prep's block by the phase clock,
// the H100, session 44); in the CPU emulation its last thread, the rows in order.
SL_GDN_FN void cumulateGamma(int tid, int n, float* gam, const float* bet, float* be) {
#if defined(__CUDA_ARCH__)
    static_assert(kChunk == 64, "two rows a lane of one warp");
    if (tid < n - 32) return;
    const int lane = tid & 31;
    const float g0 = gam[2 * lane], g1 = gam[2 * lane + 1];
    float upto = g0 + g1; // rows 0 .. 2 lane + 1, once the scan is done
    for (int s = 1; s < 32; s *= 2) {
        const float below = __shfl_up_sync(0xffffffffu, upto, s);
        if (lane >= s) upto += below;
    }
    float before = __shfl_up_sync(0xffffffffu, upto, 1);
    if (lane == 0) before = 0.0f;
    const float c0 = before + g0;
    gam[2 * lane] = c0;
    gam[2 * lane + 1] = upto;
    be[2 * lane] = bet[2 * lane] * expf_(c0);
    be[2 * lane + 1] = bet[2 * lane + 1] * expf_(upto);
#else
    if (tid != n - 1) return;
    float acc = 0.0f;
    for (int r = 0; r < kChunk; ++r) {
        acc += gam[r];
        gam[r] = acc;
        be[r] = bet[r] * expf_(acc);
    }
#endif
}

// v's rows of the chunk into vs by value head (where set: the backward's chunk gradients read
// them), zero past the segment's end, as a phase's share.
SL_GDN_FN void copyV(int tid, int n, const Params& p, const ChunkPos& pos, int h, int64_t base) {
    const int dv = p.dv;
    if (p.vs) copyRows(tid, n, p.v, pos.start * p.v_tok + h * dv, p.v_tok, kChunk, pos.len, dv, scratchOut(p, p.vs), base * dv, dv);
}

// Loads chunk c of value head h: q and k in fp32 (not where qk is false), L2-normalised (q scaled)
// into qe and ke; v's rows straight to the scratch (vs, where set: the backward's chunk gradients
// read them); gamma cumulated, beta, beta exp(gamma).
template <class E, class Block>
SL_GDN_FN void prepLoad(Block& b, const Params& p, const ChunkPos& pos, int h, const PrepSmem<E>& m, int64_t base, bool qk) {
    const int dk = p.dk, kh = keyHead(p, h), ld = m.s.ld;
    b.phase([&](int tid, int n) {
        if (qk) {
            loadRows(tid, n, p.q, pos.start * p.q_tok + kh * dk, p.q_tok, kChunk, pos.len, dk, m.q(), ld);
            loadRows(tid, n, p.k, pos.start * p.k_tok + kh * dk, p.k_tok, kChunk, pos.len, dk, m.q() + kChunk * ld, ld);
        }
        copyV(tid, n, p, pos, h, base);
        for (int r = tid; r < kChunk; r += n) {
            m.gam()[r] = r < pos.len ? p.g[int64_t(pos.start + r) * p.hv + h] : 0.0f;
            m.bet()[r] = r < pos.len ? p.beta[int64_t(pos.start + r) * p.hv + h] : 0.0f;
        }
    });
    // rows 0..63 of q, then of k (contiguous): their norms, then the scaling
    if (qk)
        rowSums(
            b, 2 * kChunk, dk, m.red(), [&](int r, int d) { return m.q()[r * ld + d] * m.q()[r * ld + d]; },
            [&](int r, float ss) { m.sc()[r] = rsqrtf_(ss + 1e-6f) * (r < kChunk ? p.scale : 1.0f); });
    b.phase([&](int tid, int n) {
        if (qk) forEach(tid, n, 2 * kChunk, dk, [&](int r, int d) {
            E* x = r < kChunk ? m.qe() + r * m.le() : m.ke() + (r - kChunk) * m.le();
            storeElement(x + d, m.q()[r * ld + d] * m.sc()[r]);
        });
        cumulateGamma(tid, n, m.gam(), m.bet(), m.be());
    });
}

// T = (I + A)^-1 for A strictly lower, in 16 x 16 blocks (7 phases, not 64): the four diagonal
// blocks by forward substitution in one phase (a thread a column of one block, its rows in order:
// a column of T_ii depends on that column alone, so it is held in registers); then the blocks
// below, a sub-diagonal at a time, T_ij = -T_ii Y_ij with Y_ij = sum_{j <= m < i} A_im T_mj (two
// phases each); y holds the Y of a sub-diagonal (3 x 256 floats).
template <class Block>
SL_GDN_FN void unitLowerInverse(Block& b, const float* a, float* t, float* y) {
    constexpr int C = kChunk, B = kInvBlock, NB = C / B, L = padded(kChunk); // a and t have rows of L
    b.phase([&](int tid, int n) {
        for (int e = tid; e < NB * B; e += n) {
            const int i0 = (e / B) * B, j = e % B;
            float col[B];
            SL_GDN_UNROLL_ALL
            for (int r = 0; r < B; ++r) {
                float s = 0.0f;
                SL_GDN_UNROLL_ALL
                for (int m = 0; m < r; ++m)
                    if (m >= j) s += a[(i0 + r) * L + i0 + m] * col[m];
                col[r] = j < r ? -s : (j == r ? 1.0f : 0.0f);
                t[(i0 + r) * L + i0 + j] = col[r];
            }
        }
        for (int e = tid; e < C * C; e += n) // the blocks above the diagonal, which no phase reads
            if ((e % C) / B > (e / C) / B) t[at(e, C, L)] = 0.0f;
    });
    for (int s = 1; s < NB; ++s) {
        b.phase([&](int tid, int n) {
            for (int e = tid; e < (NB - s) * B * B; e += n) {
                const int j0 = (e / (B * B)) * B, i0 = j0 + s * B, r = (e / B) % B, c = e % B;
                float sum = 0.0f;
                for (int m = j0; m < i0; ++m) sum += a[(i0 + r) * L + m] * t[m * L + j0 + c];
                y[e] = sum;
            }
        });
        b.phase([&](int tid, int n) {
            for (int e = tid; e < (NB - s) * B * B; e += n) {
                const int j0 = (e / (B * B)) * B, i0 = j0 + s * B, r = (e / B) % B, c = e % B;
                const float* yb = y + (e / (B * B)) * B * B;
                float sum = 0.0f;
                for (int m = 0; m <= r; ++m) sum += t[(i0 + r) * L + i0 + m] * yb[m * B + c];
                t[(i0 + r) * L + j0 + c] = -sum;
            }
        });
    }
}

// The backward's V' = U - W S (U already in V''s place), with W in shared memory at w and the
// entering state the forward kept staged at st (rows of ld; PrepLayout::tb on, free by now).
template <class Block>
SL_GDN_FN void prepVn(Block& b, const Params& p, int c, int h, const float* w, float* st, int ld) {
    b.phase([&](int tid, int n) {
        stage(tid, n, st, ld * 4, stateRows(p, h, c, 0, p.dv));
        commitStaged();
        waitStaged<0>();
    });
    float* vn = p.vn + slotBase(p, h, c) * p.dv;
    withScratchType(p, [&](auto e) {
        using E = decltype(e);
        mm<4, 4>(b, kChunk, p.dv, p.dk, rowMajor(w, ld), stagedRowMajor<E>(st, ld), vn, p.dv, -1.0f, true);
    });
}
// The forward's V' where it was kept in fp32, copied to vn (the chunk gradients read bf16 V' in place).
template <class Block>
SL_GDN_FN void prepKeptVn(Block& b, const Params& p, int64_t base) {
    if (p.vn_given.bf16) return;
    b.phase([&](int tid, int n) { loadRows(tid, n, p.vn_given, base * p.dv, p.dv, kChunk, kChunk, p.dv, p.vn + base * p.dv, p.dv); });
}

// One phase: K K^T (strictly lower, where T is to be made) and Q K^T (lower) where W and P are to be
// made; the key head's first value head (`first`) copies the normalised q and k to the scratch;
// gamma and beta to the scratch.
template <class E, class Block>
SL_GDN_FN void prepScores(Block& b, const Params& p, const PrepSmem<E>& m, int c, int h, int64_t base, bool first) {
    constexpr int C = kChunk;
    const int dk = p.dk, L = m.s.L;
    const bool bf16 = sizeof(E) == 2;
    b.phase([&](int tid, int n) {
        if (!p.wp_given) {
            const auto kt = sharedTransposed(m.ke(), m.le());
            if (!p.t_given) productShare<4, 4>(b, tid, n, product(C, C, dk, sharedRowMajor(m.ke(), m.le()), kt, m.a(), L, 1.0f, false, kStrictlyLower));
            productShare<4, 4>(b, tid, n, product(C, C, dk, sharedRowMajor(m.qe(), m.le()), kt, m.qk(), L, 1.0f, false, kLower));
        }
        if (first) {
            const int64_t key = keyBase(p, h, c);
            copyRows(tid, n, In{m.qe(), bf16}, 0, m.le(), C, C, dk, scratchOut(p, p.qn), key * dk, dk);
            copyRows(tid, n, In{m.ke(), bf16}, 0, m.le(), C, C, dk, scratchOut(p, p.kn), key * dk, dk);
        }
        for (int r = tid; r < C; r += n) {
            p.gamma[base + r] = m.gam()[r];
            p.beta_s[base + r] = m.bet()[r];
        }
    });
}

// One phase: the decays into A = beta K K^T . decay (strictly lower, in place; where T is to be
// made) and into P = Q K^T . decay (to the scratch); V's rows from v into vb (for U; v's values
// exactly, in E as the scratch keeps them: on the tensor cores' path v is bf16).
template <class E, class Block>
SL_GDN_FN void prepDecays(Block& b, const Params& p, const PrepSmem<E>& m, const ChunkPos& pos, int h, int64_t mat, bool make_u) {
    constexpr int C = kChunk;
    const int L = m.s.L, dv = p.dv;
    b.phase([&](int tid, int n) {
        if (make_u) copyRows(tid, n, p.v, pos.start * p.v_tok + h * dv, p.v_tok, C, pos.len, dv, Out{m.vb(), sizeof(E) == 2}, 0, m.le());
        for (int e = tid; e < C * C; e += n) {
            const int i = e / C, j = e % C;
            const float d = j <= i ? expf_(m.gam()[i] - m.gam()[j]) : 0.0f;
            if (!p.t_given) m.a()[i * L + j] = j < i ? m.bet()[i] * m.a()[i * L + j] * d : 0.0f;
            const float pij = m.qk()[i * L + j] * d;
            if (p.p) p.p[mat + e] = pij;
            if (p.pb) static_cast<uint16_t*>(p.pb)[mat + e] = floatToBf16(pij);
        }
    });
}

// One phase: T's columns scaled by beta (for U) and by beta exp(gamma) (for W), in E, from T made
// here (which goes to the scratch) or the forward's (t_given).
template <class E, class Block>
SL_GDN_FN void prepScaledT(Block& b, const Params& p, const PrepSmem<E>& m, int64_t mat, bool make_u) {
    b.phase([&](int tid, int n) {
        forEach(tid, n, kChunk, kChunk, [&](int i, int j) {
            const int e = i * kChunk + j;
            const float x = p.t_given ? p.t[mat + e] : m.t()[i * m.s.L + j];
            if (make_u) storeElement(m.tb() + i * m.lt() + j, x * m.bet()[j]);
            storeElement(m.tbe() + i * m.lt() + j, x * m.be()[j]);
            if (!p.t_given) p.t[mat + e] = x;
        });
    });
}

// U = (T beta) V (into u, or in the backward into vn, where V' then takes its place) and W = (T
// beta exp(gamma)) K in one phase: W straight to the scratch (rounded once from the product's fp32
// sums, as the copy from shared memory rounded them), or where the backward makes V' from it
// (w_kept: prepVn) into w and then to the scratch in a second phase.
template <class E, class Block>
SL_GDN_FN void prepWU(Block& b, const Params& p, const PrepSmem<E>& m, int64_t base, bool make_u, bool w_kept) {
    constexpr int C = kChunk;
    const int dk = p.dk, dv = p.dv;
    const int64_t w0 = base * dk;
    const Out w = w_kept ? Out{m.w()} : scratchOut(p, p.w, w0);
    b.phase([&](int tid, int n) {
        const Out u = p.vn ? Out{p.vn + base * dv, false} : scratchOut(p, p.u, base * dv);
        if (make_u) productShare<4, 4>(b, tid, n, product(C, dv, C, sharedRowMajor(m.tb(), m.lt()), sharedRowMajor(m.vb(), m.le()), u, dv, 1.0f, false, kAll, kLowerA));
        productShare<4, 4>(b, tid, n, product(C, dk, C, sharedRowMajor(m.tbe(), m.lt()), sharedRowMajor(m.ke(), m.le()), w, w_kept ? m.s.ld : dk, 1.0f, false, kAll, kLowerA));
    });
    if (w_kept) b.phase([&](int tid, int n) { copyRows(tid, n, In{m.w()}, 0, m.s.ld, C, C, dk, scratchOut(p, p.w), w0, dk); });
}

// Grid (chunks, hv): the chunk's normalised inputs, decays, T (or the forward's, t_given), W, U
// and P into scratch; in the backward V' (or the forward's, vn_given) in U's place.
template <class E, class Block>
SL_GDN_FN void prepBodyOf(Block& b, const Params& p, int c, int h, float* smem) {
    const PrepSmem<E> m{smem, prepLayout(p.dk, p.dv, int(sizeof(E)))};
    const ChunkPos pos = chunkAt(p, c);
    const int64_t base = slotBase(p, h, c), mat = chunkMatrix(p, h, c);
    if (p.qk_given) { // the backward given the forward's normalised q and k, decays, W, P, T and V'
        b.phase([&](int tid, int n) { copyV(tid, n, p, pos, h, base); });
        prepKeptVn(b, p, base);
        return;
    }
    // the key head's first value head writes its normalised q and k; given the forward's W and P
    // the others need neither
    const bool first = h % (p.hv / p.hk) == 0;
    prepLoad(b, p, pos, h, m, base, first || !p.wp_given);
    prepScores(b, p, m, c, h, base, first);
    // given the forward's W and P (and so its V' and T: gdn_op.h), the backward's prep makes no
    // product: the loads, norms and decays above are all it does
    if (p.wp_given) {
        prepKeptVn(b, p, base);
        return;
    }
    // the backward, given the forward's V', makes no U; else it takes U in V''s place
    const bool make_u = !p.vn_given.p;
    prepDecays(b, p, m, pos, h, mat, make_u);
    if (!p.t_given) unitLowerInverse(b, m.a(), m.t(), m.y());
    prepScaledT(b, p, m, mat, make_u);
    const bool w_kept = p.vn && make_u; // the backward makes V' from W
    prepWU(b, p, m, base, make_u, w_kept);
    if (!make_u) prepKeptVn(b, p, base);
    if (w_kept) prepVn(b, p, c, h, m.w(), m.st(), m.s.ld);
}
template <class Block>
SL_GDN_FN void prepBody(Block& b, const Params& p, int c, int h, float* smem) {
    // not through withScratchType: its lambda, this large, stayed a call, with the Fixed form's
    // parameters in local memory and none of their constants folded
    if (p.bf16_scratch) prepBodyOf<uint16_t>(b, p, c, h, smem);
    else prepBodyOf<float>(b, p, c, h, smem);
}

} // namespace sightline::gdn
