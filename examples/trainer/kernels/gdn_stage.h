#pragma once
// Staging: copies of global memory into shared memory that land while the block computes
// something else. On the GPU they are cp.async copies (16 bytes at a time where source,
// destination and row lengths allow, else 4), grouped: a thread commits the copies it issued as a
// group, and waitStaged<N>() waits until at most its N newest groups are still in flight (the
// barrier that ends the phase then makes every thread's copies visible to all). On the CPU a copy
// is done at the wait that covers it, as late as the GPU may land it (gdn_block.h's HostStaging),
// so that a body that reads a staged region before that wait reads stale data there too; one that
// reads it only after the wait behaves the same on both.
#include "gdn_block.h"

namespace sightline::gdn {

// A region of rows in global memory, of `row_bytes` each, `stride` bytes apart.
struct Rows {
    const void* p;
    int64_t stride;
    int rows, row_bytes;
};

#if defined(__CUDACC__)
template <int Bytes>
__device__ __forceinline__ void copyAsync(void* dst, const void* src) {
    const unsigned s = unsigned(__cvta_generic_to_shared(dst));
    if constexpr (Bytes == 16) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src)
                                            : "memory");
    else asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(src)
                      : "memory");
}
SL_GDN_FN void commitStaged() { asm volatile("cp.async.commit_group;\n" ::
                                                 : "memory"); }
template <int N>
SL_GDN_FN void waitStaged() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N)
                 : "memory");
}
#else
// Outside a block's phase (no staging state) a copy is done when issued.
template <int Bytes>
inline void copyAsync(void* dst, const void* src) {
    if (!hostStaging) {
        memcpy(dst, src, Bytes);
        return;
    }
    hostStaging->threads[hostStaging->tid].open.push_back({dst, src, Bytes});
}
inline void commitStaged() {
    if (!hostStaging) return;
    HostStaging::Thread& t = hostStaging->threads[hostStaging->tid];
    t.committed.push_back(std::move(t.open));
    t.open.clear();
}
template <int N>
inline void waitStaged() {
    if (!hostStaging) return;
    HostStaging::Thread& t = hostStaging->threads[hostStaging->tid];
    while (t.committed.size() > size_t(N)) {
        for (const HostStaging::Copy& c : t.committed.front()) memcpy(c.dst, c.src, size_t(c.bytes));
        t.committed.erase(t.committed.begin());
    }
}
#endif

// This thread's share of the rows' pieces of Bytes bytes: the pieces a thread takes keep their
// column where `per` divides the thread count (one division a call, none a piece). forEach's loop
// does the same, but unrolled by four here it made the forward state pass spill 32 bytes.
template <int Bytes>
SL_GDN_FN void stagePieces(int tid, int n, char* d, int ld, const char* s, const Rows& src) {
    const int per = src.row_bytes / Bytes;
    if (per == 0) return;
    if (n % per == 0) {
        const int c = tid % per, step = n / per;
        for (int r = tid / per; r < src.rows; r += step) copyAsync<Bytes>(d + r * ld + c * Bytes, s + r * src.stride + c * Bytes);
    } else {
        for (int e = tid; e < src.rows * per; e += n) copyAsync<Bytes>(d + (e / per) * ld + (e % per) * Bytes, s + (e / per) * src.stride + (e % per) * Bytes);
    }
}

// This thread's share of copying `src` into shared memory at dst, rows `ld` bytes apart (one
// phase's share; the caller commits). Row lengths and strides are whole 4-byte words.
SL_GDN_FN void stage(int tid, int n, void* dst, int ld, const Rows& src) {
    char* d = static_cast<char*>(dst);
    const char* s = static_cast<const char*>(src.p);
    if (aligned16(d) && aligned16(s) && ld % 16 == 0 && src.stride % 16 == 0 && src.row_bytes % 16 == 0) stagePieces<16>(tid, n, d, ld, s, src);
    else stagePieces<4>(tid, n, d, ld, s, src);
}

// Rows of `cols` elements of es bytes and 16 more (so that consecutive rows start four banks
// apart, as padded's), in floats, the elements in whole 16-byte groups: the rows the passes and
// the chunk gradients stage and copy in the scratch's type (es: scratchBytes), whose bf16
// products load their fragments by ldmatrix (gdn_tc.h). At es = 4 and cols a multiple of 4,
// padded(cols).
SL_GDN_HD constexpr int stageRow(int cols, int es) { return ((cols * es + 15) / 16 * 16 + 16) / 4; }
// A staged region or a copy as a product's operand in shared memory, of the scratch's type E
// (bf16: ldmatrix fragments, gdn_tc.h), rows of ld elements.
template <class E>
SL_GDN_FN auto sharedRowMajorAs(const float* x, int ld) { return sharedRowMajor(reinterpret_cast<const E*>(x), ld); }
template <class E>
SL_GDN_FN auto sharedTransposedAs(const float* x, int ld) { return sharedTransposed(reinterpret_cast<const E*>(x), ld); }

// Rows of `cols` elements of es bytes from a row-major matrix with leading dimension ld (elements),
// from element (r0, c0).
SL_GDN_FN Rows elementRows(const void* p, int es, int64_t ld, int64_t r0, int c0, int rows, int cols) {
    return Rows{static_cast<const char*>(p) + (r0 * ld + c0) * es, ld * es, rows, cols * es};
}
// The same of a float matrix.
SL_GDN_FN Rows floatRows(const float* p, int64_t ld, int64_t r0, int c0, int rows, int cols) { return elementRows(p, 4, ld, r0, c0, rows, cols); }

// Shared memory carved in regions whose starts stay 32-byte aligned (more than the 16-byte copies
// and the tensor-core tiles' 8-byte loads need).
SL_GDN_HD constexpr int64_t carved(int64_t floats) { return (floats + 7) / 8 * 8; }
struct Carver {
    float* at;
    SL_GDN_FN float* take(int64_t floats) {
        float* p = at;
        at += carved(floats);
        return p;
    }
};

} // namespace sightline::gdn
