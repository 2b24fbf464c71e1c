#pragma once
// The gated delta rule's kernels (docs/trainer.md), as block bodies that gdn.cu launches on the GPU
// and gdn_kernel_cpu.cpp runs on the CPU (gdn_block.h). The rule per value head, over chunks of 64
// tokens that never cross a segment (q, k L2-normalised, q scaled by dk^-1/2, gamma the cumulative
// log decay within the chunk, decay(i, j) = exp(gamma_i - gamma_j) for j <= i):
//   T = (I + strictly_lower(beta K K^T . decay))^-1, W = T (beta exp(gamma) K), U = T (beta V),
//   P = Q K^T . decay (lower, diagonal included);
//   per chunk in order, from the state S entering it: V' = U - W S,
//   O = (Q exp(gamma)) S + P V', S <- exp(gamma_L) S + (K exp(gamma_L - gamma))^T V'.
// Four kernels: prep (gdn_prep_body.h: every chunk at once: norms, decays, T, W, U, P into
// scratch; in the backward also V' from the entering states the forward kept), the state pass and
// the reverse state pass (gdn_pass_body.h) and the chunk gradients (gdn_grad_body.h); here what
// they share.
#include "gdn_block.h"
#include "gdn_stage.h"

namespace sightline::gdn {

struct Params {
    In q, k, v, g, beta;                     // q, k [T, hk, dk], v [T, hv, dv], g, beta [T, hv]
    int64_t q_tok = 0, k_tok = 0, v_tok = 0; // elements from one token of q, k, v to the next (views of a wider tensor)
    const int* cu = nullptr;                 // [segments + 1] token offsets of the segments
    const int* chunk_off = nullptr;          // [segments + 1] chunk offsets (segment s has chunks [off[s], off[s + 1]))
    int segments = 0, chunks = 0, hk = 1, hv = 1, dk = 0, dv = 0;
    int64_t tokens = 0;        // T, the rows of the per-token outputs (o and the gradients)
    float scale = 1.0f;        // dk^-1/2
    bool tensor_cores = false; // the products in TF32 on the tensor cores (GPU, bf16 inputs; gdn_tc.h)
    bool wide_tiles = false;   // the prep's, the chunk gradients' and the output's products in wide tiles where they qualify (gdn_tc.h)
    // The chunk gradients read and add their rows four elements at a time (load4, addTo4): q, k,
    // the scratch and the gradients 16-byte aligned, heads and token strides multiples of 4 (set
    // by the backward's host side; the Fixed form's launch requires it and takes it as given)
    bool fours = false;
    // Scratch by value head: per slot [hv][chunks * 64][d] (vs, w, u), per slot [hv][chunks * 64]
    // (gamma, beta_s), per chunk [hv][chunks][64][64] (t, p); by key head, per slot [hk][chunks * 64][dk]
    // (qn, kn: the same for each of a key head's value heads, written by the first of them);
    // padding slots hold zeros (gamma: the last's).
    // qn, kn, vs (v's rows by value head; the backward's alone), w and u are of the scratch's type
    // (bf16_scratch). U in bf16 is rounded once from the prep's fp32 sums (as flash-linear-attention
    // keeps it, in the inputs' dtype); in fp32 the forward's state pass overwrites it with V', which
    // the output kernel reads (on the bf16 path V' goes to vn_keep).
    void* u = nullptr;
    float *gamma = nullptr, *beta_s = nullptr, *t = nullptr, *p = nullptr;
    // [hv][chunks][64][64] P in bf16 where set: written by the prep (in the forward where kept for the
    // backward); the reverse pass stages it and the chunk gradients read it (the backward's fp32 p unset)
    void* pb = nullptr;
    // w and P (pb on the bf16 scratch's path, else p) hold the forward's: the backward's prep makes neither
    bool wp_given = false;
    // qn, kn, gamma and beta_s hold the forward's (with wp_given): the backward's prep copies v's rows alone
    bool qk_given = false;
    void *qn = nullptr, *kn = nullptr, *vs = nullptr, *w = nullptr;
    // The scratch that one kernel writes and another reads (qn, kn, vs, w, states, dvn, dstates)
    // in bf16 on the tensor cores' path (q, k and v bf16; session 30 measured the rounding against
    // the checks' limits, and v's rows lose nothing), else fp32. The passes keep their own running
    // state in fp32.
    bool bf16_scratch = false;
    Out o;                        // [T, hv, dv], written when set (every token: forUncovered)
    float* final_state = nullptr; // [segments][hv][dk][dv], written when set
    void* states = nullptr;       // [hv][chunks][dk][dv] each chunk's entering state: the pass writes it, the output and the backward read it
    float* vn = nullptr;          // [hv][chunks * 64][dv] V', made by the backward's prep when set (not where vn_given is bf16)
    bool t_given = false;         // t holds the forward's T: the prep reads it rather than make it again
    Out vn_keep;                  // [hv][chunks * 64][dv] V' in v's dtype, written by the forward's state pass when set
    In vn_given;                  // the same, kept by the forward: the chunk gradients read it where it is bf16, else the
                                  // backward's prep copies it to vn rather than make it
    // backward
    In dout;                 // [T, hv, dv]
    void* dvn = nullptr;     // [hv][chunks * 64][dv] the gradient of V' (the reverse pass's, for the chunk gradients)
    void* dstates = nullptr; // [hv][chunks][dk][dv] the gradient of each chunk's leaving state (the same)
    // [T, hk, dk]: fp32, zeroed, each value head adding its share (addTo); or where pair, in q's
    // dtype, written once: the chunk gradients' blocks of a key head's two value heads run as a
    // cluster (GPU, the Fixed form: gdn.cu), and the second's shares of dq and dk (before the L2
    // norms' gradients) are added to the first's in shared memory (no fp32 sums, fill or cast)
    Out grad_q, grad_k;
    bool pair = false;
    Out grad_v;                                    // [T, hv, dv] (every token: forUncovered)
    float *grad_g = nullptr, *grad_beta = nullptr; // [T, hv] (the same)
    float* grad_scratch = nullptr;                 // [hv][chunks][gradScratchFloats] the chunk gradients' working matrices
};

// f(x from element off on) for x of fp32 or bf16 elements: as const float* or const uint16_t*, so
// that a product or a sum over it compiles for the one it is.
template <class F>
SL_GDN_FN void withScratch(const void* x, bool bf16, int64_t off, F&& f) {
    if (bf16) f(static_cast<const uint16_t*>(x) + off);
    else f(static_cast<const float*>(x) + off);
}
// f(E{}) with E the element type of the kernels' scratch (Params::bf16_scratch): uint16_t (bf16) or
// float; typed<E>(x, off) is that scratch from element off on.
template <class F>
SL_GDN_FN void withScratchType(const Params& p, F&& f) {
    if (p.bf16_scratch) f(uint16_t{});
    else f(0.0f);
}
template <class E>
SL_GDN_FN const E* typed(const void* x, int64_t off) { return static_cast<const E*>(x) + off; }
SL_GDN_FN In scratchIn(const Params& p, const void* x) { return In{x, p.bf16_scratch}; }
SL_GDN_FN Out scratchOut(const Params& p, void* x) { return Out{x, p.bf16_scratch}; }
// Bytes an element of the scratch.
SL_GDN_HD inline int scratchBytes(const Params& p) { return p.bf16_scratch ? 2 : 4; }
// Scratch x (the scratch's type) from element i on.
SL_GDN_FN Out scratchOut(const Params& p, void* x, int64_t i) { return Out{static_cast<char*>(x) + i * scratchBytes(p), p.bf16_scratch}; }
// Rows staged from the scratch into rows of ld floats' bytes, as a row-major operand of elements E
// (their leading dimension twice ld for bf16: stagedLdOf).
template <class E>
SL_GDN_HD constexpr int stagedLdOf(int ld) { return ld * int(sizeof(float) / sizeof(E)); }
template <class E>
SL_GDN_FN auto stagedRowMajor(const float* x, int ld) { return rowMajor(reinterpret_cast<const E*>(x), stagedLdOf<E>(ld)); }

SL_GDN_FN int64_t slotBase(const Params& p, int h, int c) { return (int64_t(h) * p.chunks + c) * kChunk; }
// The key head of value head h, and where its chunk c starts in qn and kn.
SL_GDN_FN int keyHead(const Params& p, int h) { return h / (p.hv / p.hk); }
SL_GDN_FN int64_t keyBase(const Params& p, int h, int c) { return slotBase(p, keyHead(p, h), c); }
// The 64 rows of `cols` elements of scratch x (the scratch's type) from row r0, as rows to stage.
SL_GDN_FN Rows scratchRows(const Params& p, const void* x, int64_t r0, int cols) {
    return elementRows(x, scratchBytes(p), cols, r0, 0, kChunk, cols);
}
SL_GDN_FN int64_t chunkMatrix(const Params& p, int h, int c) { return (int64_t(h) * p.chunks + c) * kChunk * kChunk; }
// The first of the dk rows (of dv elements) of the state entering chunk c of value head h, and its first element.
SL_GDN_FN int64_t stateRow(const Params& p, int h, int c) { return (int64_t(h) * p.chunks + c) * p.dk; }
SL_GDN_FN int64_t stateBase(const Params& p, int h, int c) { return stateRow(p, h, c) * p.dv; }
// Columns [j0, j0 + cols) of the state entering chunk c of value head h, as rows to stage.
// Staged into rows of ld floats' bytes, as kept (stagedRowMajor<E>).
SL_GDN_FN Rows stateRows(const Params& p, int h, int c, int j0, int cols) {
    return elementRows(p.states, scratchBytes(p), p.dv, stateRow(p, h, c), j0, p.dk, cols);
}

// The width of the tile of w value columns from j0 a block takes: a constant where dv is a
// multiple of w (the Fixed forms: gdn.cu), so that no division by a value known only at run time
// is left in the loops it bounds.
SL_GDN_HD constexpr int tileWidth(int dv, int j0, int w) { return dv % w == 0 || dv - j0 >= w ? w : dv - j0; }

struct ChunkPos {
    int seg, start, len;
};
// Chunk c of a segment whose tokens are [tok0, tok1) and whose first chunk is `first`: chunk
// first + j starts at token tok0 + 64 j.
SL_GDN_FN ChunkPos chunkIn(int seg, int tok0, int tok1, int first, int c) {
    const int start = tok0 + (c - first) * kChunk, left = tok1 - start;
    return {seg, start, left < kChunk ? left : kChunk};
}
SL_GDN_FN ChunkPos chunkOf(const Params& p, int seg, int c) { return chunkIn(seg, p.cu[seg], p.cu[seg + 1], p.chunk_off[seg], c); }
// The tokens outside every segment, [0, cu[0]) and [cu[segments], T): no chunk covers them, so the
// kernels that write a per-token output (the output kernel, the chunk gradients) zero them rather
// than a fill ahead of them (of the whole output, about 21 us a fill of o or dv at 8,192 tokens
// and 32 value heads of 128 on the H100, session 46). f(token, e) for the elements e < width of
// each such token, element by element from `first` on in steps of `step` (a block's threads and
// the grid's: tid + n * block, n * blocks), so that the grid shares them.
template <class F>
SL_GDN_FN void forUncovered(const Params& p, int64_t first, int64_t step, int width, F&& f) {
    const int64_t lead = p.cu[0], rest = p.cu[p.segments], count = (lead + p.tokens - rest) * width;
    for (int64_t e = first; e < count; e += step) {
        const int64_t i = e / width;
        f(i < lead ? i : rest + (i - lead), int(e % width));
    }
}

// The segment of chunk c: the last s with chunk_off[s] <= c (empty segments come before it).
SL_GDN_FN ChunkPos chunkAt(const Params& p, int c) {
    int lo = 0, hi = p.segments - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (p.chunk_off[mid] <= c) lo = mid;
        else hi = mid - 1;
    }
    return chunkOf(p, lo, c);
}

// The chunk gradients' kernel, the prep and the two state passes run 16 warps a block, two blocks
// an SM (the output kernel 8): at 64 registers a thread the register file holds no more. The chunk
// gradients at 8 warps and 128 registers (batches of 4 or 8 K steps) took one layer's
// forward+backward from 6.59 / 6.16 / 6.12 to 7.10 / 6.72 / 6.74 ms on the bench's three cases
// (session 30). The passes at 16 warps (batches of 4 K steps, against 8 warps with batches of 8):
// 6.46 / 6.03 / 6.01 -> 6.37 / 6.04 / 6.02 ms, two rounds alternated (session 31): one sequence
// of 8,192 tokens, whose pass is one block of chunks after another, gains; the packed cases hold.
constexpr int kGradThreads = 512, kPrepThreads = 512, kPassThreads = 512;

// Shared memory of each body, in floats (the prep's: gdn_prep_body.h).
// The chunk gradients' row sums: 16 lanes a row (half the 32 lanes' space, which lets m2 stay in
// shared memory at two blocks an SM), 2 * 64 * 17 floats (rowSumsN<2>), at least a float a thread.
constexpr int kGradLanes = 16;
constexpr int kGradSums = 2 * (kGradLanes + 1) * kChunk;
constexpr int kGradRed = kGradSums > kGradThreads ? kGradSums : kGradThreads;
// The chunk gradients' staged rows (gdn_grad_body.h's carveGrad), of d = max(dk, dv) columns: in
// bf16 the output's gradient and K side by side, half the region each, rows of stageRow (T's fp32
// rows take the first half once the output's gradient is used); in fp32 one after the other in
// rows of padded(d).
constexpr int64_t gradHalf(int d) {
    return int64_t(kChunk) * (stageRow(d, 2) > padded(kChunk) ? stageRow(d, 2) : padded(kChunk));
}
constexpr int64_t gradStaged(int d) { return kChunk * padded(d) > 2 * gradHalf(d) ? kChunk * padded(d) : 2 * gradHalf(d); }
// The chunk gradients' x1: [64 x d] rows of padded(d), [64 x 64] ones of padded(64) (gradWy), or
// in bf16 the state's gradient [d x d] in rows of stageRow (gradDecay).
constexpr int64_t gradX1(int d) {
    const int64_t rows = int64_t(kChunk) * (d > kChunk ? padded(d) : padded(kChunk)), ds = int64_t(2 * kChunk) * stageRow(d, 2);
    return rows > ds ? rows : ds;
}
// The chunk gradients' shared memory and their global scratch a block (carveGrad).
constexpr int64_t gradFloats(int dk, int dv) {
    const int d = dk > dv ? dk : dv;
    return gradStaged(d) + gradX1(d) + 2 * kChunk * padded(kChunk) + 9 * kChunk + kGradRed;
}
constexpr int64_t gradScratchFloats(int dk, int dv) { return 2 * kChunk * padded(dk > dv ? dk : dv) + kChunk * padded(kChunk); }

// Where l2normGrad's rows go, row i's element e at i * stride + e: added to fp32 rows (each of a
// key head's value heads adds its share), or stored (one block has the key head's whole gradient:
// Params::pair) from element o0 on. Two types, so that each form's code has its own alone.
struct AddRows {
    float* add;
    int64_t stride;
    SL_GDN_FN void put(int i, int e, float v) const { addTo(add + i * stride + e, v); }
    SL_GDN_FN void put4(int i, int e, const float (&v)[4]) const { addTo4(add + i * stride + e, v); }
};
struct StoreRows {
    Out out;
    int64_t o0, stride;
    SL_GDN_FN void put(int i, int e, float v) const { out.set(o0 + i * stride + e, v); }
    SL_GDN_FN void put4(int i, int e, const float (&v)[4]) const { store4(out, o0 + i * stride + e, v); }
};

// dx of y = l2norm(x) * scale for the chunk's first len rows, from dy (shared memory, rows of dys
// floats): dx = r (dy scale - x r dot), r = 1/|x|, dot = r scale (x . dy). Row (i, e) of x is at
// x[x0 + i xs + e], of dx goes to dx (AddRows or StoreRows); rr and dd hold 64 floats each, red 2 * 64 * (Lanes
// + 1) (rowSumsN). also(tid, n) runs first in the last phase (staging issued there lands while the
// adds go out). With fours (Params::fours: d, xs, dys and dx's stride multiples of 4, x, dy and
// dx aligned), four columns a load and an add (x from global memory: a round trip a load).
template <int Lanes, class Block, class Rows, class Also = NoStage>
SL_GDN_FN void l2normGrad(Block& b, bool fours, const In& x, int64_t x0, int64_t xs, int len, int d, const float* dy, int dys, float scale,
                          const Rows& dx, float* red, float* rr, float* dd, const Also& also = {}) {
    const RowsOf xr{x, x0, xs}, yr{In{dy, false}, 0, dys};
    const auto norms = [&](int i, const float* s) { // |x|^2 and x . dy
        rr[i] = rsqrtf_(s[0] + 1e-6f);
        dd[i] = rr[i] * scale * s[1];
    };
    const auto grad = [&](int i, float xv, float yv) { return rr[i] * (yv * scale - xv * rr[i] * dd[i]); };
    if (fours) {
        rowSumsN4<2, Lanes>(
            b, kChunk, d, red,
            [&](int i, int e, float* acc) {
                float xv[4] = {}, yv[4];
                if (i < len) xr.load4(i, e, xv);
                yr.load4(i, e, yv);
                for (int k = 0; k < 4; ++k) acc[0] += xv[k] * xv[k], acc[1] += xv[k] * yv[k];
            },
            norms);
        b.phase([&](int tid, int n) {
            also(tid, n);
            forEach(tid, n, len, d / 4, [&](int i, int g) {
                float xv[4], yv[4], v[4];
                xr.load4(i, 4 * g, xv);
                yr.load4(i, 4 * g, yv);
                for (int k = 0; k < 4; ++k) v[k] = grad(i, xv[k], yv[k]);
                dx.put4(i, 4 * g, v);
            });
        });
        return;
    }
    rowSumsN<2, Lanes>(
        b, kChunk, d, red,
        [&](int i, int e, float* acc) {
            const float xv = i < len ? xr.at(i, e) : 0.0f;
            acc[0] += xv * xv;
            acc[1] += xv * dy[i * dys + e];
        },
        norms);
    b.phase([&](int tid, int n) {
        also(tid, n);
        forEach(tid, n, len, d, [&](int i, int e) { dx.put(i, e, grad(i, xr.at(i, e), dy[i * dys + e])); });
    });
}

} // namespace sightline::gdn
