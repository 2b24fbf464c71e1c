#pragma once
// The tensor-core form of gdn_block.h's mm, on the GPU only: C (+)= alpha A B in TF32 with fp32
// accumulation (nvcuda::wmma, 16 x 16 x 8 tiles), each warp of the block one 16 x 16 tile of C at a
// time. It takes a product when both operands are unit-stride one way (row- or column-major, a
// transpose being the other layout), have sizes in whole tiles, and sit
// 32-byte aligned with leading dimensions a multiple of 4; otherwise mm runs its plain fp32 form.
// The kernels use it when their inputs are bf16 (gdn.cu), whose rounding is far coarser than
// TF32's; fp32 inputs keep the plain path, which the bf16 path is checked against.
#if defined(__CUDACC__)
#include <mma.h>

#include <cstdint>

namespace sightline::gdn {

namespace tc = nvcuda::wmma;

struct TcOperand {
    const float* p;
    unsigned ld;
    bool row_major;
};

SL_GDN_FN bool tcOperand(const Mat& m, TcOperand& out) {
    if (m.cs == 1) out = {m.p, unsigned(m.rs), true};
    else if (m.rs == 1) out = {m.p, unsigned(m.cs), false};
    else return false;
    return out.ld % 4 == 0 && reinterpret_cast<uintptr_t>(m.p) % 32 == 0;
}

// Element (r, c) of an operand as the pointer wmma loads a tile from.
SL_GDN_FN const float* tcAt(const TcOperand& m, int r, int c) {
    return m.row_major ? m.p + int64_t(r) * m.ld + c : m.p + r + int64_t(c) * m.ld;
}

// Loads of a tile's K steps go out kBatch at a time before their products, so that a warp waits on
// one round trip to memory per batch instead of one per step (the operands are often in global
// memory, and a block has few warps to hide latency with).
template <int kBatch, class LA, class LB>
__device__ void tcTiles(int M, int N, int K, const TcOperand& A, const TcOperand& B, float* C, int ldc, float alpha, bool acc,
                        Mask mask) {
    const int warp = int(threadIdx.x) / 32, warps = int(blockDim.x) / 32, tn = N / 16;
    for (int t = warp; t < (M / 16) * tn; t += warps) {
        const int i0 = (t / tn) * 16, j0 = (t % tn) * 16;
        tc::fragment<tc::accumulator, 16, 16, 8, float> d, d2; // even and odd K steps: two chains, not one
        tc::fill_fragment(d, 0.0f);
        tc::fill_fragment(d2, 0.0f);
        const bool zero = mask != kAll && j0 > i0 + 15; // the whole tile lies above the diagonal
        for (int k0 = 0; k0 < K && !zero; k0 += 8 * kBatch) {
            tc::fragment<tc::matrix_a, 16, 16, 8, tc::precision::tf32, LA> a[kBatch];
            tc::fragment<tc::matrix_b, 16, 16, 8, tc::precision::tf32, LB> bf[kBatch];
#pragma unroll
            for (int u = 0; u < kBatch; ++u)
                if (k0 + 8 * u < K) {
                    tc::load_matrix_sync(a[u], tcAt(A, i0, k0 + 8 * u), A.ld);
                    tc::load_matrix_sync(bf[u], tcAt(B, k0 + 8 * u, j0), B.ld);
                }
#pragma unroll
            for (int u = 0; u < kBatch; ++u)
                if (k0 + 8 * u < K) {
                    for (int e = 0; e < a[u].num_elements; ++e) a[u].x[e] = tc::__float_to_tf32(a[u].x[e]);
                    for (int e = 0; e < bf[u].num_elements; ++e) bf[u].x[e] = tc::__float_to_tf32(bf[u].x[e]);
                    if (u % 2 == 0) tc::mma_sync(d, a[u], bf[u], d);
                    else tc::mma_sync(d2, a[u], bf[u], d2);
                }
        }
        for (int e = 0; e < d.num_elements; ++e) d.x[e] += d2.x[e];
        float* c = C + int64_t(i0) * ldc + j0;
        if (acc) {
            tc::fragment<tc::accumulator, 16, 16, 8, float> old;
            tc::load_matrix_sync(old, c, unsigned(ldc), tc::mem_row_major);
            for (int e = 0; e < d.num_elements; ++e) d.x[e] = old.x[e] + alpha * d.x[e];
        } else {
            for (int e = 0; e < d.num_elements; ++e) d.x[e] *= alpha;
        }
        tc::store_matrix_sync(c, d, unsigned(ldc), tc::mem_row_major);
    }
}

// Runs the product on the tensor cores and returns true, or returns false (nothing done) where it
// does not qualify. Masked entries are zeroed in a second phase (masks come only without acc).
template <class Block>
__device__ bool tcProduct(Block& b, int M, int N, int K, const Mat& A, const Mat& B, float* C, int ldc, float alpha, bool acc,
                          Mask mask) {
    TcOperand a, bo;
    if (M % 16 || N % 16 || K % 8 || ldc % 4 || reinterpret_cast<uintptr_t>(C) % 32) return false;
    if ((mask != kAll && acc) || !tcOperand(A, a) || !tcOperand(B, bo)) return false;
    b.phase([&](int, int) {
        constexpr int B = Block::batch;
        if (a.row_major && bo.row_major) tcTiles<B, tc::row_major, tc::row_major>(M, N, K, a, bo, C, ldc, alpha, acc, mask);
        else if (a.row_major) tcTiles<B, tc::row_major, tc::col_major>(M, N, K, a, bo, C, ldc, alpha, acc, mask);
        else if (bo.row_major) tcTiles<B, tc::col_major, tc::row_major>(M, N, K, a, bo, C, ldc, alpha, acc, mask);
        else tcTiles<B, tc::col_major, tc::col_major>(M, N, K, a, bo, C, ldc, alpha, acc, mask);
    });
    if (mask != kAll)
        b.phase([&](int tid, int n) {
            for (int e = tid; e < M * N; e += n) {
                const int i = e / N, j = e % N;
                if ((mask == kLower && j > i) || (mask == kStrictlyLower && j >= i)) C[int64_t(i) * ldc + j] = 0.0f;
            }
        });
    return true;
}

} // namespace sightline::gdn
#endif
