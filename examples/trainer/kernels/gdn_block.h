#pragma once
// The building blocks of the gated delta rule's kernels (gdn_bodies.h), compiled twice: by nvcc for
// the CUDA kernels (gdn.cu), where a block's threads run each phase at once and meet at a barrier,
// and by the host compiler for the CPU (gdn_kernel_cpu.cpp), where the same code runs thread by
// thread, phase by phase. So the CPU tests execute the kernels' own indexing and arithmetic.
// Rules the bodies keep for that to hold: everything that lives from one phase to the next is in
// the block's shared memory (or global memory), never in a thread's locals; within a phase no
// thread writes what another reads.
#include <cstdint>
#include <cstring>

#include "gdn_phase_clock.h"

// SL_GDN_UNROLL before a loop that reads global memory: its iterations' loads go out together,
// not one round trip each. SL_GDN_UNROLL_ALL before a loop of constant bounds that indexes an
// array meant for registers.
#if defined(__CUDACC__)
#include <cooperative_groups.h>
#define SL_GDN_FN __device__ __forceinline__
#define SL_GDN_HD __host__ __device__
#define SL_GDN_UNROLL _Pragma("unroll 4")
#define SL_GDN_UNROLL_ALL _Pragma("unroll")
#else
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <vector>
#define SL_GDN_FN inline
#define SL_GDN_HD
#define SL_GDN_UNROLL
#define SL_GDN_UNROLL_ALL
#endif

namespace sightline::gdn {

constexpr int kChunk = 64;    // tokens a chunk
constexpr int kThreads = 256; // threads a block, on the GPU and in the CPU emulation
constexpr int kTileV = 32;    // value columns a block of the state passes carries
constexpr int kMaxDim = 128;  // the largest key or value head dimension the kernels take

SL_GDN_FN float expf_(float x) {
#if defined(__CUDACC__)
    return expf(x);
#else
    return std::exp(x);
#endif
}
SL_GDN_FN float rsqrtf_(float x) {
#if defined(__CUDACC__)
    return rsqrtf(x);
#else
    return 1.0f / std::sqrt(x);
#endif
}

// bf16 is the upper half of an fp32; rounding to it is to the nearest even, as PyTorch's.
SL_GDN_FN float bf16ToFloat(uint16_t h) {
    const uint32_t u = uint32_t(h) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
// On the GPU one instruction (cvt.rn): the integer rounding below took about seven, and in the
// state passes' held forms (gdn_held_warp.h), where a warp issues every instruction of its chain
// in turn, one layer's forward+backward took 3-9% longer with it (session 45, call 3).
SL_GDN_FN uint16_t floatToBf16(float f) {
#if defined(__CUDA_ARCH__)
    uint16_t r;
    asm("cvt.rn.bf16.f32 %0, %1;\n"
        : "=h"(r)
        : "f"(f));
    return r;
#else
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u); // NaN stays NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
#endif
}
// Two floats as a bf16 pair, lo in the low half (one instruction on the GPU).
SL_GDN_FN uint32_t bf16Pair(float lo, float hi) {
#if defined(__CUDA_ARCH__)
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n"
        : "=r"(r)
        : "f"(hi), "f"(lo));
    return r;
#else
    return floatToBf16(lo) | uint32_t(floatToBf16(hi)) << 16;
#endif
}

// *p += v where other blocks add to the same element: an atomic add on the GPU and in the CPU
// emulation (whose blocks run on several threads). Two adds onto a zero commute exactly, so the
// sum of two blocks' shares does not depend on their order.
SL_GDN_FN void addTo(float* p, float v) {
#if defined(__CUDACC__)
    atomicAdd(p, v);
#else
    std::atomic_ref<float>(*p).fetch_add(v, std::memory_order_relaxed);
#endif
}
// addTo of four adjacent elements (p 16-byte aligned): one vector atomic on the GPU (sm_90).
SL_GDN_FN void addTo4(float* p, const float (&v)[4]) {
#if defined(__CUDACC__)
    atomicAdd(reinterpret_cast<float4*>(p), make_float4(v[0], v[1], v[2], v[3]));
#else
    for (int k = 0; k < 4; ++k) addTo(p + k, v[k]);
#endif
}

// A cluster of blocks (GPU only: the CPU emulation runs none, and stops here if asked to): a
// barrier of every thread of every block of the cluster, whose shared memory writes before it the
// other blocks see after it; and x's place in the shared memory of the cluster's block `rank`.
SL_GDN_FN void clusterSync() {
#if defined(__CUDA_ARCH__)
    cooperative_groups::this_cluster().sync();
#elif !defined(__CUDACC__)
    std::abort();
#endif
}
SL_GDN_FN const float* clusterShared(const float* x, unsigned rank) {
#if defined(__CUDA_ARCH__)
    return cooperative_groups::this_cluster().map_shared_rank(const_cast<float*>(x), rank);
#else
    (void)rank;
#if !defined(__CUDACC__)
    std::abort();
#endif
    return x;
#endif
}

// A tensor the kernels read or write, fp32 or bf16, by flat index.
struct In {
    const void* p = nullptr;
    bool bf16 = false;
    SL_GDN_FN float operator[](int64_t i) const {
        return bf16 ? bf16ToFloat(static_cast<const uint16_t*>(p)[i]) : static_cast<const float*>(p)[i];
    }
};
struct Out {
    void* p = nullptr;
    bool bf16 = false;
    SL_GDN_FN void set(int64_t i, float v) const {
        if (bf16) static_cast<uint16_t*>(p)[i] = floatToBf16(v);
        else static_cast<float*>(p)[i] = v;
    }
    SL_GDN_FN float get(int64_t i) const {
        return bf16 ? bf16ToFloat(static_cast<const uint16_t*>(p)[i]) : static_cast<const float*>(p)[i];
    }
};

// Matrices in shared memory have rows of cols + kPad floats: consecutive rows then start 4 banks
// apart, so that the tensor-core fragments' scalar loads (gdn_tc.h) meet no bank conflicts, and
// their pair loads at most two-way ones, where rows of 64 or 128 floats would all start in bank 0.
constexpr int kPad = 4;
SL_GDN_HD constexpr int padded(int cols) { return cols + kPad; }
// Where element e of a matrix of `cols` columns, counted row by row, lies with leading dimension ld.
SL_GDN_FN int at(int e, int cols, int ld) { return (e / cols) * ld + e % cols; }

// A matrix operand of fp32 (E = float) or bf16 (E = uint16_t) elements: element (i, k) =
// p[i * rs + k * cs]; transposes are strides.
SL_GDN_FN float elementValue(float x) { return x; }
SL_GDN_FN float elementValue(uint16_t x) { return bf16ToFloat(x); }
// *x = v as an fp32 or a bf16 element (rounded to the nearest even).
SL_GDN_FN void storeElement(float* x, float v) { *x = v; }
SL_GDN_FN void storeElement(uint16_t* x, float v) { *x = floatToBf16(v); }
template <class E>
struct MatOf {
    const E* p;
    int64_t rs, cs;
    SL_GDN_FN float at(int i, int k) const { return elementValue(p[i * rs + k * cs]); }
};
// Row-major with leading dimension ld, and its transpose: the layout is the operand's type too, so
// that a tensor-core product compiles only the fragment loads its operands' layouts can take
// (gdn_tc.h), not every combination at every product. The H forms are bf16 (the forward's V',
// read where it was kept rather than copied to fp32).
struct RowMajor : MatOf<float> {};
struct Transposed : MatOf<float> {};
struct RowMajorH : MatOf<uint16_t> {};
struct TransposedH : MatOf<uint16_t> {};
SL_GDN_FN RowMajor rowMajor(const float* p, int64_t ld) { return RowMajor{{p, ld, 1}}; }
SL_GDN_FN Transposed transposed(const float* p, int64_t ld) { return Transposed{{p, 1, ld}}; }
SL_GDN_FN RowMajorH rowMajor(const uint16_t* p, int64_t ld) { return RowMajorH{{p, ld, 1}}; }
SL_GDN_FN TransposedH transposed(const uint16_t* p, int64_t ld) { return TransposedH{{p, 1, ld}}; }
// bf16 operands in shared memory: the tensor cores load their fragments by ldmatrix (gdn_tc.h),
// either layout. The fp32 forms of sharedRowMajor and sharedTransposed are the plain types.
struct RowMajorS : MatOf<uint16_t> {};
struct TransposedS : MatOf<uint16_t> {};
SL_GDN_FN RowMajorS sharedRowMajor(const uint16_t* p, int64_t ld) { return RowMajorS{{p, ld, 1}}; }
SL_GDN_FN TransposedS sharedTransposed(const uint16_t* p, int64_t ld) { return TransposedS{{p, 1, ld}}; }
SL_GDN_FN RowMajor sharedRowMajor(const float* p, int64_t ld) { return rowMajor(p, ld); }
SL_GDN_FN Transposed sharedTransposed(const float* p, int64_t ld) { return transposed(p, ld); }

#if defined(__CUDACC__)
// Batch: how many K steps of a tensor-core product load at once (gdn_tc.h), as registers allow;
// WideBatch the same for tiles of twice the columns (0: none).
template <int Batch, int WideBatch = 0>
struct DeviceBlock {
    static constexpr int batch = Batch, wide_batch = WideBatch;
    int tid, n;
    bool tensor_cores; // mm's products on the tensor cores where they qualify (gdn_tc.h)
    bool wide = false; // wide tiles where they qualify and WideBatch > 0 (gdn_tc.h)
#if defined(SIGHTLINE_GDN_PHASE_CLOCK)
    long long mark = phase_clock::start(); // the instrument's (gdn_phase_clock.h): the last barrier's cycle
    int no = 0;                            // and the phases passed
    template <class F>
    __device__ void phase(F&& f, int line = __builtin_LINE()) {
        f(tid, n);
        __syncthreads();
        phase_clock::note(tid, mark, no, line);
    }
#else
    template <class F>
    __device__ void phase(F&& f) {
        f(tid, n);
        __syncthreads();
    }
#endif
};
#else
// The CPU emulation's staged copies (gdn_stage.h), each thread's kept until its wait covers them,
// as late as cp.async may land them: a body that reads a staged region before the wait that
// covers it reads what was there before, on the CPU as it may on the GPU.
struct HostStaging {
    struct Copy {
        void* dst;
        const void* src;
        int bytes;
    };
    struct Thread {
        std::vector<std::vector<Copy>> committed; // oldest first
        std::vector<Copy> open;
    };
    std::vector<Thread> threads;
    int tid = 0; // the thread whose share of a phase is running
};
inline thread_local HostStaging* hostStaging = nullptr;

// The order of a phase's threads in the CPU emulation: reversed on request (the checks run cases
// both ways: a phase in which one thread reads what another writes, against the bodies' rule,
// gives other figures).
inline std::atomic<bool> hostThreadsReversed{false};

struct HostBlock {
    int n = kThreads;
    HostStaging staging{std::vector<HostStaging::Thread>(size_t(n))}; // a thread's copies each
    template <class F>
    void phase(F&& f) {
        const bool reversed = hostThreadsReversed.load(std::memory_order_relaxed);
        HostStaging* const before = hostStaging;
        hostStaging = &staging;
        for (int i = 0; i < n; ++i) {
            staging.tid = reversed ? n - 1 - i : i;
            f(staging.tid, n);
        }
        hostStaging = before;
    }
};
#endif

enum Mask { kAll = 0,
            kLower = 1,
            kStrictlyLower = 2 };
// Whether the mask excludes element (i, j) of a product.
SL_GDN_FN bool masked(Mask mask, int i, int j) { return (mask == kLower && j > i) || (mask == kStrictlyLower && j >= i); }

// A triangular operand, whose zeros bound the K a tile of C needs: A lower (A(i, k) = 0 for k >
// i: row i needs k <= i), A upper (k >= i), B upper (B(k, j) = 0 for k > j: column j needs
// k <= j). The tensor cores' tiles skip the K steps that hold only such zeros (gdn_tc.h); the sum
// is the same, since the zeros are there in memory.
enum Tri { kFull = 0,
           kLowerA = 1,
           kUpperA = 2,
           kUpperB = 3 };

// The K a tile of C at (i0, j0), 16 rows and w columns, needs of a product with a triangular
// operand: [from, to), its ends whole groups of g (a batch of K steps) within [0, K) (gdn_tc.h;
// tested by --only gdn-kernels), for K a whole number of groups, as every tensor-core product's
// is (mmaBatches and ldsmShare take batches of one step where K is not a whole number of them).
SL_GDN_HD inline void triRange(Tri tri, int K, int i0, int j0, int w, int g, int& from, int& to) {
    from = tri == kUpperA ? i0 / g * g : 0;
    const int end = tri == kLowerA ? i0 + 16 : tri == kUpperB ? j0 + w
                                                              : K;
    to = end < K ? (end + g - 1) / g * g : K;
}

// C (+)= alpha * A[M x K] B[K x N] (C row-major, leading dimension ldc, fp32 or bf16: rounded once,
// from the fp32 sum), column j times cs[j] where cs is given (scaledColumns); where `mask` excludes
// (i, j) the product contributes 0. C must not overlap A or B.
template <class MA, class MB>
struct Product {
    int M, N, K;
    MA A;
    MB B;
    Out C;
    int ldc;
    float alpha;
    bool acc;
    Mask mask;
    Tri tri;
    const float* cs = nullptr;
};
template <class MA, class MB>
SL_GDN_FN Product<MA, MB> product(int M, int N, int K, const MA& A, const MB& B, Out C, int ldc, float alpha, bool acc,
                                  Mask mask = kAll, Tri tri = kFull) {
    return Product<MA, MB>{M, N, K, A, B, C, ldc, alpha, acc, mask, tri};
}
template <class MA, class MB>
SL_GDN_FN Product<MA, MB> product(int M, int N, int K, const MA& A, const MB& B, float* C, int ldc, float alpha, bool acc,
                                  Mask mask = kAll, Tri tri = kFull) {
    return product(M, N, K, A, B, Out{C, false}, ldc, alpha, acc, mask, tri);
}
// The product with column j of its result times cs[j] (a scale by column folded into its stores).
template <class MA, class MB>
SL_GDN_FN Product<MA, MB> scaledColumns(Product<MA, MB> p, const float* cs) {
    p.cs = cs;
    return p;
}

} // namespace sightline::gdn

#include "gdn_tc.h"

namespace sightline::gdn {

// f(r, c) for every element of a rows x cols matrix, as one phase's share. Where cols divides the
// block's thread count a thread keeps its column: one division a call, none an element.
template <class F>
SL_GDN_FN void forEach(int tid, int n, int rows, int cols, F&& f) {
    if (cols > 0 && n % cols == 0) {
        const int c = tid % cols, step = n / cols;
        SL_GDN_UNROLL
        for (int r = tid / cols; r < rows; r += step) f(r, c);
    } else {
        SL_GDN_UNROLL
        for (int e = tid; e < rows * cols; e += n) f(e / cols, e % cols);
    }
}

SL_GDN_HD inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
// Whether a tensor's start is aligned to four of its elements (bf16 or fp32).
SL_GDN_FN bool aligned4(const void* p, bool bf16) { return reinterpret_cast<uintptr_t>(p) % (bf16 ? 8 : 16) == 0; }

// Four adjacent elements of x from flat index i (a multiple of 4, x's start aligned to 4 elements),
// as one 8-byte (bf16) or 16-byte (fp32) load on the GPU.
SL_GDN_FN void load4(const In& x, int64_t i, float (&v)[4]) {
#if defined(__CUDACC__)
    if (x.bf16) {
        const uint2 u = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(x.p) + i);
        v[0] = __uint_as_float(u.x << 16);
        v[1] = __uint_as_float(u.x & 0xffff0000u);
        v[2] = __uint_as_float(u.y << 16);
        v[3] = __uint_as_float(u.y & 0xffff0000u);
    } else {
        const float4 f = *reinterpret_cast<const float4*>(static_cast<const float*>(x.p) + i);
        v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
    }
#else
    for (int k = 0; k < 4; ++k) v[k] = x[i + k];
#endif
}

// Four adjacent elements into x from flat index i (a multiple of 4, x's start aligned to 4
// elements), as one 8-byte (bf16) or 16-byte (fp32) store on the GPU.
SL_GDN_FN void store4(const Out& x, int64_t i, const float (&v)[4]) {
#if defined(__CUDACC__)
    if (x.bf16) {
        const uint2 u{bf16Pair(v[0], v[1]), bf16Pair(v[2], v[3])};
        *reinterpret_cast<uint2*>(static_cast<uint16_t*>(x.p) + i) = u;
    } else {
        *reinterpret_cast<float4*>(static_cast<float*>(x.p) + i) = make_float4(v[0], v[1], v[2], v[3]);
    }
#else
    for (int k = 0; k < 4; ++k) x.set(i + k, v[k]);
#endif
}

// One phase's share of copying `rows` rows of `cols` elements into dst, rows ld elements apart:
// dst[d0 + r * ld + d] = src[r0 + r * rs + d] for r < len, 0 below (bf16 to bf16 exactly). Four
// columns a thread at once where the sizes and both starts allow it (a thread then keeps its column
// group, as in forEach), one at a time otherwise.
SL_GDN_FN void copyRows(int tid, int n, const In& src, int64_t r0, int64_t rs, int rows, int len, int cols, const Out& dst, int64_t d0,
                        int64_t ld) {
    const bool four = cols % 4 == 0 && rs % 4 == 0 && r0 % 4 == 0 && d0 % 4 == 0 && ld % 4 == 0 && aligned4(src.p, src.bf16) &&
        aligned4(dst.p, dst.bf16);
    if (!four) {
        forEach(tid, n, rows, cols, [&](int r, int d) { dst.set(d0 + r * ld + d, r < len ? src[r0 + r * rs + d] : 0.0f); });
        return;
    }
    forEach(tid, n, rows, cols / 4, [&](int r, int c4) {
        float v[4] = {};
        if (r < len) load4(src, r0 + r * rs + 4 * c4, v);
        store4(dst, d0 + r * ld + 4 * c4, v);
    });
}

// The same into fp32 rows of ld floats (shared memory, mostly).
SL_GDN_FN void loadRows(int tid, int n, const In& src, int64_t r0, int64_t rs, int rows, int len, int cols, float* dst, int64_t ld) {
    copyRows(tid, n, src, r0, rs, rows, len, cols, Out{dst, false}, 0, ld);
}

// A phase's extra work that a helper takes as `also`: none.
struct NoStage {
    SL_GDN_FN void operator()(int, int) const {}
};

#if defined(__CUDA_ARCH__)
// rowSumsN's one phase on the GPU (its comment).
template <int N, int Lanes, class Block, class F, class G, class Also>
SL_GDN_FN void rowSumsShuffled(Block& b, int rows, int cols, F&& f, G&& out, const Also& also) {
    b.phase([&](int tid, int n) {
        const int total = rows * Lanes, lane = tid % 32;
        for (int w0 = tid - lane; w0 < total; w0 += n) { // a warp's iterations together (its shuffles)
            const int w = w0 + lane, r = w / Lanes;
            float acc[N] = {};
            if (w < total) {
                SL_GDN_UNROLL
                for (int d = w % Lanes; d < cols; d += Lanes) f(r, d, acc);
            }
            for (int k = 0; k < N; ++k)
                for (int o = Lanes / 2; o > 0; o /= 2) acc[k] += __shfl_xor_sync(0xffffffffu, acc[k], o);
            if (w < total && w % Lanes == 0) out(r, static_cast<const float*>(acc));
        }
        also(tid, n);
    });
}
#endif

// N sums a row over d < cols, out(r, sums) for each of `rows` rows, where f(r, d, acc) adds its
// terms to acc[0..N); out must not write what f reads. Lanes adjacent threads (a warp, or half of
// one) take Lanes adjacent columns of one row (coalesced in global memory, few bank conflicts in
// shared memory). On the GPU at fewer than 32 lanes (the chunk gradients') one phase: the row's
// lanes add their partial sums by shuffles and its first lane calls out; also(tid, n) runs last in
// it (a staging issued or waited for there). Else, and in the CPU emulation, two phases: the
// partial sums into red (N * rows * (Lanes + 1) floats, a row's Lanes + 1 apart), then one thread
// a row adds them; also runs first in the second. (The prep's norms, 128 rows of 32 lanes, eight
// a thread, took 0.015 ms longer a forward in one phase, five shuffles a row in turn: H100, session 48.)
constexpr int kRedStride = 33; // Lanes + 1 at 32 lanes
template <int N, int Lanes = 32, class Block, class F, class G, class Also = NoStage>
SL_GDN_FN void rowSumsN(Block& b, int rows, int cols, float* red, F&& f, G&& out, const Also& also = {}) {
    static_assert(Lanes > 0 && 32 % Lanes == 0, "a row's lanes within one warp");
#if defined(__CUDA_ARCH__)
    if constexpr (Lanes < 32) {
        rowSumsShuffled<N, Lanes>(b, rows, cols, f, out, also);
        return;
    }
#endif
    constexpr int stride = Lanes + 1;
    b.phase([&](int tid, int n) {
        for (int w = tid; w < rows * Lanes; w += n) {
            const int r = w / Lanes, lane = w % Lanes;
            float acc[N] = {};
            SL_GDN_UNROLL
            for (int d = lane; d < cols; d += Lanes) f(r, d, acc);
            for (int k = 0; k < N; ++k) red[(k * rows + r) * stride + lane] = acc[k];
        }
    });
    b.phase([&](int tid, int n) {
        also(tid, n);
        for (int r = tid; r < rows; r += n) {
            float sums[N] = {};
            for (int k = 0; k < N; ++k)
                for (int l = 0; l < Lanes; ++l) sums[k] += red[(k * rows + r) * stride + l];
            out(r, static_cast<const float*>(sums));
        }
    });
}

// One sum a row: out(r, sum over d < cols of f(r, d)).
template <int Lanes = 32, class Block, class F, class G>
SL_GDN_FN void rowSums(Block& b, int rows, int cols, float* red, F&& f, G&& out) {
    rowSumsN<1, Lanes>(
        b, rows, cols, red, [&](int r, int d, float* acc) { acc[0] += f(r, d); }, [&](int r, const float* s) { out(r, s[0]); });
}

// Rows of a matrix read through In: element (r, d) at off + r * stride + d.
struct RowsOf {
    In x;
    int64_t off, stride;
    SL_GDN_FN float at(int r, int d) const { return x[off + r * stride + d]; }
    // Four adjacent elements of row r from column d (off, stride and d multiples of 4, x aligned to 4 elements).
    SL_GDN_FN void load4(int r, int d, float (&v)[4]) const { gdn::load4(x, off + r * stride + d, v); }
};

// The sum of a(r, d + k) c(r, d + k) over k < 4, each row's four by one load4.
SL_GDN_FN float dot4(const RowsOf& a, const RowsOf& c, int r, int d) {
    float x[4], y[4];
    a.load4(r, d, x);
    c.load4(r, d, y);
    return x[0] * y[0] + x[1] * y[1] + x[2] * y[2] + x[3] * y[3];
}

// rowSumsN over groups of four adjacent columns (cols a multiple of 4): f(r, d, acc) adds the
// terms of columns d .. d + 3, so that a thread reads them with one load4 where a load of each
// would be a round trip of its own (global memory, L2).
template <int N, int Lanes = 32, class Block, class F, class G, class Also = NoStage>
SL_GDN_FN void rowSumsN4(Block& b, int rows, int cols, float* red, F&& f, G&& out, const Also& also = {}) {
    rowSumsN<N, Lanes>(
        b, rows, cols / 4, red, [&](int r, int g, float* acc) { f(r, 4 * g, acc); }, out, also);
}

// out(r, sum over d < cols of a(r, d) c(r, d)) for each of `rows` rows: with fours (both
// matrices' rows read four elements at a time: see RowsOf::load4) four columns a load
// (rowSumsN4), else one (rowSums).
template <int Lanes, class Block, class G>
SL_GDN_FN void rowDots(Block& b, bool fours, int rows, int cols, float* red, const RowsOf& a, const RowsOf& c, G&& out) {
    if (fours) {
        rowSumsN4<1, Lanes>(
            b, rows, cols, red,
            [&](int r, int d, float* acc) { acc[0] += dot4(a, c, r, d); },
            [&](int r, const float* sums) { out(r, sums[0]); });
    } else {
        rowSums<Lanes>(
            b, rows, cols, red, [&](int r, int d) { return a.at(r, d) * c.at(r, d); }, out);
    }
}

// A thread's share of a product off the tensor cores: each thread computes TM x TN elements of C:
// TM adjacent rows, and TN columns tn apart (tn = N / TN), so that the threads of a warp share
// their rows (A's elements broadcast) and read adjacent columns of B (no bank conflicts where B is
// row-major in shared memory).
template <int TM, int TN, class MA, class MB>
SL_GDN_FN void plainShare(int tid, int n, const Product<MA, MB>& p) {
    const int tm = (p.M + TM - 1) / TM, tn = (p.N + TN - 1) / TN;
    for (int w = tid; w < tm * tn; w += n) {
        const int i0 = (w / tn) * TM, j0 = w % tn; // columns j0 + y tn
        float s[TM][TN];
        for (int x = 0; x < TM; ++x)
            for (int y = 0; y < TN; ++y) s[x][y] = 0.0f;
        const bool skip = p.mask != kAll && j0 > i0 + TM - 1; // every column above the diagonal
        for (int k = 0; k < p.K && !skip; ++k) {
            float a[TM], c[TN];
            for (int x = 0; x < TM; ++x) a[x] = i0 + x < p.M ? p.A.at(i0 + x, k) : 0.0f;
            for (int y = 0; y < TN; ++y) c[y] = j0 + y * tn < p.N ? p.B.at(k, j0 + y * tn) : 0.0f;
            for (int x = 0; x < TM; ++x)
                for (int y = 0; y < TN; ++y) s[x][y] += a[x] * c[y];
        }
        for (int x = 0; x < TM; ++x)
            for (int y = 0; y < TN; ++y) {
                const int i = i0 + x, j = j0 + y * tn;
                if (i >= p.M || j >= p.N) continue;
                const float v = masked(p.mask, i, j) ? 0.0f : p.alpha * s[x][y] * (p.cs ? p.cs[j] : 1.0f);
                p.C.set(i * p.ldc + j, p.acc ? p.C.get(i * p.ldc + j) + v : v);
            }
    }
}

// A thread's share of a product: on the tensor cores where the block has them and the product
// qualifies (gdn_tc.h), else plainShare.
template <int TM, int TN, class Block, class MA, class MB>
SL_GDN_FN void productShare([[maybe_unused]] Block& b, int tid, int n, const Product<MA, MB>& p) {
#if defined(__CUDACC__)
    if (b.tensor_cores && tcShare(b, p)) return;
#endif
    plainShare<TM, TN>(tid, n, p);
}

// One phase: the products, each thread taking its share of one after the other, so that a warp
// done with its tiles of the first starts on the second without a barrier between. None may read
// what another writes; two may write the same C (the second accumulating) where both have its
// sizes and mask and take the same path (both on the tensor cores, or neither: operands laid out
// alike), since each element of C then stays with one thread.
template <int TM, int TN, class Block, class... P>
SL_GDN_FN void mmPhase(Block& b, const P&... ps) {
    b.phase([&](int tid, int n) { (productShare<TM, TN>(b, tid, n, ps), ...); });
}

// One phase: one product.
template <int TM, int TN, class Block, class MA, class MB>
SL_GDN_FN void mm(Block& b, int M, int N, int K, const MA& A, const MB& B, float* C, int ldc, float alpha, bool acc,
                  Mask mask = kAll, Tri tri = kFull) {
    mmPhase<TM, TN>(b, product(M, N, K, A, B, C, ldc, alpha, acc, mask, tri));
}

} // namespace sightline::gdn
