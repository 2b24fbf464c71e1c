#pragma once
// The tensor-core form of gdn_block.h's mm, on the GPU only: C (+)= alpha A B with fp32
// accumulation (mma.sync: m16n8k16 on bf16 where both operands are bf16 with K along memory,
// m16n8k8 in TF32 otherwise), each warp of the block one tile of C at a time: 16 x 16, or 16 x 32 where the block
// has wide tiles (the chunk gradients and the output) and the product has one for every warp
// (mmaTiles). Each thread loads its own fragment elements straight from the operands' strides
// (shared or global memory, any layout; a group along K at once where K runs along memory), so a
// product qualifies by its sizes: M and N whole tiles of 16, K a multiple of the step (and the
// groups' strides aligned). The kernels use it when their inputs are bf16 (gdn.cu), whose
// rounding is far coarser than TF32's; fp32 inputs keep the plain path, which the bf16 path is
// checked against. Operands are fp32 or bf16 (the scratch the kernels leave each other on that
// path, gdn_bodies.h): a bf16 element is a TF32 operand exactly, so a product of two bf16
// operands is the same in either step. A product of two bf16 operands in shared memory (RowMajorS,
// TransposedS: the state passes') loads its fragments by ldmatrix instead, in either layout
// (ldsmTiles). Where an operand is triangular (Product::tri), a tile runs only the K steps that
// can meet its nonzeros.
#if defined(__CUDACC__)
#include <cstdint>
#include <type_traits>

namespace sightline::gdn {

// x as a TF32 operand: its fp32 bits as they are; the tensor cores read the upper 19 bits and drop
// the rest (rounding toward zero, at most one TF32 unit in the last place, 2^-10 of the value,
// still finer than bf16's 2^-8). Rounding to nearest took one add an operand register: three for
// every mma of a wide tile, 11% of the chunk gradients' instructions (Nsight Compute, session 18).
__device__ __forceinline__ uint32_t tf32(float x) { return __float_as_uint(x); }
// A bf16 element as a TF32 operand, exactly: its bits are the upper half of the fp32 it stands for.
__device__ __forceinline__ uint32_t tf32(uint16_t x) { return uint32_t(x) << 16; }

// d (+)= a b for one m16n8k8 tile: a the thread's four elements of A's 16 x 8, b its two of B's 8 x 8.
__device__ __forceinline__ void mma16n8k8(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// d (+)= a b for one m16n8k16 tile of bf16 operands: a the thread's four registers of A's 16 x 16
// (two elements each), b its two of B's 16 x 8.
__device__ __forceinline__ void mma16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two adjacent elements of a bf16 C at c, rounded once from fp32 (with acc added to those there), as
// one 4-byte access where aligned.
__device__ __forceinline__ void storePairBf16(uint16_t* c, float2 v, bool acc, bool pairs) {
    if (acc) {
        v.x += bf16ToFloat(c[0]);
        v.y += bf16ToFloat(c[1]);
    }
    if (pairs) *reinterpret_cast<uint32_t*>(c) = bf16Pair(v.x, v.y);
    else c[0] = floatToBf16(v.x), c[1] = floatToBf16(v.y);
}

// Writes a warp's tile of 16 x 8 kN (kN n8 pieces) into C at (i0, j0): this thread's rows i0 + g
// and i0 + g + 8, columns j0 + 8 n + 2 t and the one after, as one 8-byte access (4 in bf16) where
// C's rows allow it.
template <int kN>
__device__ __forceinline__ void storeTile(const float (&d)[kN][4], Out out, int ldc, int i0, int j0, float alpha, bool acc, Mask mask,
                                          const float* cs) {
    const int lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
    float* const C = static_cast<float*>(out.p);
    const bool pairs = ldc % 2 == 0 && reinterpret_cast<uintptr_t>(C) % (out.bf16 ? 4 : 8) == 0;
#pragma unroll
    for (int n = 0; n < kN; ++n)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int i = i0 + g + 8 * h, j = j0 + 8 * n + 2 * t;
            float2 v{masked(mask, i, j) ? 0.0f : alpha * d[n][2 * h], masked(mask, i, j + 1) ? 0.0f : alpha * d[n][2 * h + 1]};
            if (cs) {
                v.x *= cs[j];
                v.y *= cs[j + 1];
            }
            if (out.bf16) {
                storePairBf16(static_cast<uint16_t*>(out.p) + int64_t(i) * ldc + j, v, acc, pairs);
                continue;
            }
            float* c = C + int64_t(i) * ldc + j;
            if (pairs) {
                if (acc) {
                    const float2 old = *reinterpret_cast<const float2*>(c);
                    v.x += old.x;
                    v.y += old.y;
                }
                *reinterpret_cast<float2*>(c) = v;
            } else {
                c[0] = acc ? c[0] + v.x : v.x;
                c[1] = acc ? c[1] + v.y : v.y;
            }
        }
}

// Thread (g, t) of a warp holds, for a K step at k, A's elements (g, k + 2t), (g + 8, k + 2t),
// (g, k + 2t + 1), (g + 8, k + 2t + 1) and B's (k + 2t, g), (k + 2t + 1, g) and the same 8 columns
// on: the K order within a step permuted alike for A and B (the sum does not change), so that an
// operand whose K runs along memory loads each pair of elements as one 8-byte load (kVecA, kVecB).
template <bool kVec>
__device__ __forceinline__ void loadPair(const float* p, int step, uint32_t& lo, uint32_t& hi) {
    if constexpr (kVec) {
        const float2 x = *reinterpret_cast<const float2*>(p);
        lo = tf32(x.x);
        hi = tf32(x.y);
    } else {
        lo = tf32(p[0]);
        hi = tf32(p[step]);
    }
}
// The same of bf16 elements: a pair as one 4-byte load.
template <bool kVec>
__device__ __forceinline__ void loadPair(const uint16_t* p, int step, uint32_t& lo, uint32_t& hi) {
    if constexpr (kVec) {
        const uint32_t x = *reinterpret_cast<const uint32_t*>(p);
        lo = x << 16;
        hi = x & 0xffff0000u;
    } else {
        lo = tf32(p[0]);
        hi = tf32(p[step]);
    }
}

// A K step of bf16 products (m16n8k16) permutes K alike: thread (g, t) holds A's elements at K
// 4t and 4t + 1 in its first register and 4t + 2 and 4t + 3 in its second (of row g; the other two
// of row g + 8), and B's the same, so that an operand whose K runs along memory loads the four as
// one 8-byte load. Only such operands take bf16 steps (tcShare).
__device__ __forceinline__ void loadQuad(const uint16_t* p, uint32_t& lo, uint32_t& hi) {
    const uint2 x = *reinterpret_cast<const uint2*>(p);
    lo = x.x;
    hi = x.y;
}

// A K step's shape: TF32 (8 elements of K, a thread's two at 2t and 2t + 1 of them) or bf16, both
// operands bf16 (16 elements, a thread's four from 4t).
template <bool kBf16>
struct KStep {
    static constexpr int k = 8, own = 2;
    template <bool kVec, class E>
    __device__ __forceinline__ static void load(const E* p, int step, uint32_t& lo, uint32_t& hi) { loadPair<kVec>(p, step, lo, hi); }
    __device__ __forceinline__ static void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) { mma16n8k8(d, a, b0, b1); }
};
template <>
struct KStep<true> {
    static constexpr int k = 16, own = 4;
    template <bool kVec>
    __device__ __forceinline__ static void load(const uint16_t* p, int, uint32_t& lo, uint32_t& hi) {
        static_assert(kVec, "bf16 steps load groups along K");
        loadQuad(p, lo, hi);
    }
    __device__ __forceinline__ static void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) { mma16n8k16(d, a, b0, b1); }
};

// A warp's tiles of 16 x 16 kW (the block's `warps` taking the tiles in turn), in K steps of
// KStep<kBf16>: loads of kBatch K steps go out together before their products, so that the warp
// waits on one round trip per batch instead of one per step; a wide tile (kW = 2) loads its A
// fragments once for twice the columns, and halves a warp's round trips where the block has a
// wide tile for each warp. K is a whole number of batches (mmaBatches). Offsets are 32-bit (a
// product's operands span far fewer than 2^31 elements; tcShare checks) and the operand pointers
// advance by a batch at a time, so that the loop spends its integer instructions on little more
// than the loads' addresses. A bf16 step holds twice the K of a TF32 one in the same registers: a
// batch of four covers 64 (one round trip for a product over the chunk, two over a head of 128).
template <bool kBf16, int kBatch, int kW, bool kVecA, bool kVecB, class MA, class MB>
__device__ __forceinline__ void mmaTiles(int warps, const Product<MA, MB>& p) {
    using S = KStep<kBf16>;
    constexpr int kN = 2 * kW; // n8 pieces a tile
    const MA& A = p.A;
    const MB& B = p.B;
    const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
    const int g = lane / 4, t = lane % 4, tn = p.N / (16 * kW);
    const int ars = int(A.rs), acs = int(A.cs), brs = int(B.rs), bcs = int(B.cs);
    const int a8 = 8 * ars, b8 = 8 * bcs, ak = S::k * acs, bk = S::k * brs; // A 8 rows on, B 8 columns on; a K step of each
    for (int tile = warp; tile < (p.M / 16) * tn; tile += warps) {
        const int i0 = (tile / tn) * 16, j0 = (tile % tn) * 16 * kW;
        float d[kN][4] = {};
        const bool zero = p.mask != kAll && j0 > i0 + 15; // the whole tile lies above the diagonal
        int from, to;
        triRange(p.tri, p.K, i0, j0, 16 * kW, S::k * kBatch, from, to);
        const int steps = from / S::k;
        const auto* pa = A.p + (i0 + g) * ars + S::own * t * acs + steps * ak; // A (i0 + g, own t), B (own t, j0 + g)
        const auto* pb = B.p + S::own * t * brs + (j0 + g) * bcs + steps * bk;
        for (int k0 = from; k0 < to && !zero; k0 += S::k * kBatch, pa += kBatch * ak, pb += kBatch * bk) {
            uint32_t fa[kBatch][4], fb[kBatch][2 * kN];
#pragma unroll
            for (int u = 0; u < kBatch; ++u) {
                const auto* a = pa + u * ak;
                const auto* b = pb + u * bk;
                S::template load<kVecA>(a, acs, fa[u][0], fa[u][2]);
                S::template load<kVecA>(a + a8, acs, fa[u][1], fa[u][3]);
#pragma unroll
                for (int n = 0; n < kN; ++n) S::template load<kVecB>(b + n * b8, brs, fb[u][2 * n], fb[u][2 * n + 1]);
            }
#pragma unroll
            for (int u = 0; u < kBatch; ++u)
#pragma unroll
                for (int n = 0; n < kN; ++n) S::mma(d[n], fa[u], fb[u][2 * n], fb[u][2 * n + 1]);
        }
        storeTile<kN>(d, p.C, p.ldc, i0, j0, p.alpha, p.acc, p.mask, p.cs);
    }
}

// mmaTiles in batches of kBatch K steps where K is a whole number of them (every product of the
// kernels at heads of 64 or 128), else one step at a time in narrow tiles: a tile that guarded
// each step of a batch against K's end took the chunk gradients to 128 registers with spills (96
// without, none spilled).
template <bool kBf16, int kBatch, int kW, bool kVecA, bool kVecB, class MA, class MB>
__device__ void mmaBatches(int warps, const Product<MA, MB>& p) {
    if (p.K % (KStep<kBf16>::k * kBatch) == 0) mmaTiles<kBf16, kBatch, kW, kVecA, kVecB>(warps, p);
    else mmaTiles<kBf16, 1, 1, kVecA, kVecB>(warps, p);
}

// Four 8 x 8 tiles of bf16 from shared memory into a warp's fragments (ldmatrix): lane l gives the
// address of row l % 8 of tile l / 8 (16 bytes, aligned); thread (g, t) receives elements (g, 2t)
// and (g, 2t + 1) of each tile, or with kTrans (2t, g) and (2t + 1, g).
template <bool kTrans>
__device__ __forceinline__ void ldsm4(uint32_t (&r)[4], uint32_t addr) {
    if constexpr (kTrans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(addr));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(addr));
}

// A warp's tiles of 16 x 16 of a product of two bf16 operands in shared memory, in m16n8k16 steps
// of the standard K order (thread (g, t) holds K 2t, 2t + 1, 2t + 8, 2t + 9), each step's
// fragments two ldmatrix: A's 16 x 16 and B's 16 x 16 (both n8 pieces), loaded transposed where K
// does not run along memory (kTransA: A stored [K][M]; kTransB: B stored [K][N]). A thread's
// elements then take one instruction a step for each operand where a step of scalar loads took six
// (two of A's pairs and four of B's elements, fp32 B, TF32 steps of half the K). kBatch steps'
// loads go out together, as in mmaTiles.
template <int kBatch, bool kTransA, bool kTransB, class MA, class MB>
__device__ void ldsmTiles(int warps, const Product<MA, MB>& p) {
    const MatOf<uint16_t>&A = p.A, &B = p.B;
    const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32, q = lane / 8, r = lane % 8, tn = p.N / 16;
    const int lda = int(kTransA ? A.cs : A.rs), ldb = int(kTransB ? B.rs : B.cs); // the strided dimension's step
    // this lane's row address within a step's tiles, in elements: A's tiles (rows 0-7, 8-15) x (K 0-7,
    // 8-15) in the fragment's register order, B's (K 0-7, 8-15) x (columns 0-7, 8-15)
    const int ao = kTransA ? (r + 8 * (q / 2)) * lda + 8 * (q % 2) : (lane % 16) * lda + 8 * (lane / 16);
    const int bo = kTransB ? (r + 8 * (q % 2)) * ldb + 8 * (q / 2) : (r + 8 * (q / 2)) * ldb + 8 * (q % 2);
    const int ak = 2 * 16 * (kTransA ? lda : 1), bk = 2 * 16 * (kTransB ? ldb : 1); // a K step, in bytes
    const uint32_t a0 = uint32_t(__cvta_generic_to_shared(A.p)), b0 = uint32_t(__cvta_generic_to_shared(B.p));
    for (int tile = warp; tile < (p.M / 16) * tn; tile += warps) {
        const int i0 = (tile / tn) * 16, j0 = (tile % tn) * 16;
        float d[2][4] = {};
        const bool zero = p.mask != kAll && j0 > i0 + 15; // the whole tile lies above the diagonal
        int from, to;
        triRange(p.tri, p.K, i0, j0, 16, 16 * kBatch, from, to);
        uint32_t pa = a0 + 2 * (ao + (kTransA ? i0 : i0 * lda)) + from / 16 * ak, pb = b0 + 2 * (bo + (kTransB ? j0 : j0 * ldb)) + from / 16 * bk;
        for (int k0 = from; k0 < to && !zero; k0 += 16 * kBatch, pa += kBatch * ak, pb += kBatch * bk) {
            uint32_t fa[kBatch][4], fb[kBatch][4];
#pragma unroll
            for (int u = 0; u < kBatch; ++u) {
                ldsm4<kTransA>(fa[u], pa + u * ak);
                ldsm4<kTransB>(fb[u], pb + u * bk);
            }
#pragma unroll
            for (int u = 0; u < kBatch; ++u) {
                mma16n8k16(d[0], fa[u], fb[u][0], fb[u][1]);
                mma16n8k16(d[1], fa[u], fb[u][2], fb[u][3]);
            }
        }
        storeTile<2>(d, p.C, p.ldc, i0, j0, p.alpha, p.acc, p.mask, p.cs);
    }
}

// ldsmTiles where both operands are bf16 in shared memory (RowMajorS, TransposedS) and their sizes
// and rows allow (M, N, K multiples of 16; rows of whole 16-byte groups, aligned): true, or false
// (nothing done). A product with a triangular operand over K of one batch (the prep's U and W,
// the reverse pass's P^T dO: K = 64) takes batches of two steps, whose tiles then skip the half of
// K that meets only zeros where it can (triRange): the prep 418 -> 412 us a call on average, one
// layer's forward+backward 0.3-1.1% faster on an H100 (session 42, two rounds alternated).
template <class Block, class MA, class MB>
__device__ bool ldsmShare(Block& b, const Product<MA, MB>& p) {
    constexpr bool ta = std::is_same_v<MA, TransposedS>, tb = std::is_same_v<MB, RowMajorS>;
    const int64_t lda = ta ? p.A.cs : p.A.rs, ldb = tb ? p.B.rs : p.B.cs;
    const bool fits = p.M % 16 == 0 && p.N % 16 == 0 && p.K % 16 == 0 && lda % 8 == 0 && ldb % 8 == 0 && lda < (1 << 20) &&
        ldb < (1 << 20) && reinterpret_cast<uintptr_t>(p.A.p) % 16 == 0 && reinterpret_cast<uintptr_t>(p.B.p) % 16 == 0;
    if (!fits) return false;
    if (p.tri != kFull && p.K % 32 == 0 && p.K / (16 * Block::batch) < 2) ldsmTiles<2, ta, tb>(b.n / 32, p);
    else if (p.K % (16 * Block::batch) == 0) ldsmTiles<Block::batch, ta, tb>(b.n / 32, p);
    else ldsmTiles<1, ta, tb>(b.n / 32, p);
    return true;
}
template <class M>
constexpr bool kSharedBf16 = std::is_same_v<M, RowMajorS> || std::is_same_v<M, TransposedS>;

// Whether an operand's K runs along memory in groups of `own` elements (pairs of fp32 or bf16 for
// TF32, fours of bf16 for bf16 steps): step 1 along K, the other stride a multiple of it, the
// start aligned to a group.
template <class E>
SL_GDN_FN bool kGroups(const E* p, int64_t k_step, int64_t other, int own) {
    return k_step == 1 && other % own == 0 && reinterpret_cast<uintptr_t>(p) % (own * sizeof(E)) == 0;
}

// This thread's share of the product on the tensor cores, returning true; or false (nothing done)
// where its sizes do not qualify, or where an operand whose layout runs K along memory (A
// row-major, B transposed) is not laid out in groups of K (an odd stride): such products take the
// plain path. Two bf16 operands in shared memory take ldsmShare first, where their rows allow.
// Products of two bf16 operands whose K runs along memory take bf16 steps, which compute exactly
// what TF32 steps do on them (a bf16 element is a TF32 operand exactly; both
// accumulate in fp32) in half the instructions and round trips; they need K a multiple of 16 and
// strides of four elements (heads of 32, 64 and 128 have them; other heads may take the plain
// path for these products). The rest take TF32 steps. Measured on the H200 (session 34, one
// layer's forward+backward on 1 x 8,192 / 8 x 1,024 / mixed): the chunk gradients' six such
// products on bf16 steps 5.84 / 5.44 / 5.39 -> 5.40 / 4.99 / 5.00 ms; every product on bf16 steps,
// fp32 operands rounded to bf16 as they load, 5.80 / 5.41 / 5.42; the output kernel's product with
// S row-major in shared memory (strided along K: two-way bank conflicts at four elements a
// thread) on bf16 steps made the forward 1-2% slower. The groups are known from the operands'
// types, so a product compiles one layout of loads, not four (all four at each of the chunk
// gradients' products made its code 712 KB, and 17% of its warps' stall samples waited for
// instructions: Nsight Compute, session 21). Wide tiles where the block has them
// (Block::wide_batch) and where there are enough of them for every warp to have one. Every thread
// of the block decides alike.
template <class Block, class MA, class MB>
__device__ bool tcShare(Block& b, const Product<MA, MB>& p) {
    if constexpr (kSharedBf16<MA> && kSharedBf16<MB>) {
        if (ldsmShare(b, p)) return true;
    }
    constexpr bool va = std::is_same_v<MA, RowMajor> || std::is_same_v<MA, RowMajorH>;
    constexpr bool vb = std::is_same_v<MB, Transposed> || std::is_same_v<MB, TransposedH>;
    constexpr bool bf16 = std::is_same_v<MA, RowMajorH> && std::is_same_v<MB, TransposedH>;
    constexpr int own = KStep<bf16>::own;
    const int M = p.M, N = p.N, K = p.K;
    if (M % 16 || N % 16 || K % KStep<bf16>::k) return false;
    constexpr int64_t kSpan = int64_t(1) << 24; // mmaTiles' 32-bit offsets: strides far below 2^31 / 128
    const MA& A = p.A;
    const MB& B = p.B;
    if (A.rs >= kSpan || A.cs >= kSpan || B.rs >= kSpan || B.cs >= kSpan) return false;
    if ((va && !kGroups(A.p, A.cs, A.rs, own)) || (vb && !kGroups(B.p, B.rs, B.cs, own))) return false;
    const bool wide = b.wide && N % 32 == 0 && (M / 16) * (N / 32) >= b.n / 32;
    if constexpr (Block::wide_batch > 0) {
        if (wide) {
            mmaBatches<bf16, Block::wide_batch, 2, va, vb>(b.n / 32, p);
            return true;
        }
    }
    mmaBatches<bf16, Block::batch, 1, va, vb>(b.n / 32, p);
    return true;
}

} // namespace sightline::gdn
#endif
