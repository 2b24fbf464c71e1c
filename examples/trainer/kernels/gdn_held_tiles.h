#pragma once
// Staging by the tensor memory accelerator (GPU only), for the held forms (gdn_pass_held.h,
// gdn_reverse_held.h, gdn_out_held.h): copies that one thread issues and the accelerator carries
// out, their bytes completing an mbarrier on which every thread then waits. Two kinds:
//   - a bulk row (cp.async.bulk): one copy of a row's bytes;
//   - tiles (cp.async.bulk.tensor.2d): a [64 x 64] bf16 box of a matrix described by a tensor map
//     (Maps, made on the host by gdn_tile_map.h), landed with the 128-byte swizzle: row r at
//     128 r bytes, its 16-byte piece j at piece j ^ (r % 8), so that ldmatrix's eight rows of a
//     piece column fall in eight bank groups without the padding of the rows that cp.async stages
//     (a [64 x 32] box likewise with the 64-byte swizzle; the layouts: gdn_swizzle.h).
// A chunk's [64 x 128] rows of W, K or Q are two such boxes (SwizzledRows). The passes' cp.async
// staging issued about 2,300 16-byte copies a chunk, whose issue took 29-32% of their time
// (session 49's phase clock), a row a bulk copy 55%; the tiles are six copies a chunk in the
// forward pass, nine in the reverse, ten a block in the output: one layer's forward+backward on
// the H200 2.67 / 2.72 / 2.73 -> 2.43 / 2.48 / 2.48 ms with the held output (session 50).
#if defined(__CUDACC__)
#include "gdn_held_warp.h"
#include "gdn_swizzle.h"

#include <cuda.h>

namespace sightline::gdn::held {

// The held forms' tensor maps (gdn_tile_map.h's heldMaps): W (value heads' slots), kn and qn (key
// heads'), P (value heads', [64 x 64] a chunk), the entering states ([dk x dv] a chunk) and V'
// (value heads' slots); a kernel parameter (__grid_constant__).
struct Maps {
    CUtensorMap w, k, q, p, s, v;
    CUtensorMap u, d; // [64 x 32] boxes with the 64-byte swizzle (NarrowRows): U's and the output gradient's value columns
};

__device__ __forceinline__ void barInit(uint64_t* bar) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(sharedAddr(bar))
                 : "memory");
}
// The barrier's one arrival (thread 0's), expecting `bytes` of copies in this phase.
__device__ __forceinline__ void barExpect(uint64_t* bar, int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(sharedAddr(bar)), "r"(bytes)
                 : "memory");
}
// Until the phase of parity `parity` has completed (its arrival and all its bytes).
__device__ __forceinline__ void barWait(uint64_t* bar, int parity) {
    asm volatile("{\n .reg .pred done;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n @!done bra WAIT_%=;\n}\n" ::"r"(sharedAddr(bar)),
                 "r"(parity)
                 : "memory");
}
// A row of bytes (gamma's, a multiple of 16) to dst, completing bar.
__device__ __forceinline__ void bulkRow(char* dst, const Rows& row, uint64_t* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(sharedAddr(dst)), "l"(row.p),
                 "r"(row.row_bytes), "r"(sharedAddr(bar))
                 : "memory");
}

// The box of `map` whose first element is column x of row y into dst (kSwizzleAlign-aligned),
// completing bar.
__device__ __forceinline__ void tileBox(char* dst, const CUtensorMap& map, int x, int y, uint64_t* bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(sharedAddr(dst)),
                 "l"(reinterpret_cast<uint64_t>(&map)), "r"(x), "r"(y), "r"(sharedAddr(bar))
                 : "memory");
}
// Rows y .. y + 64 of a [rows x 128] map: its two boxes (kTileBytes) into dst.
__device__ __forceinline__ void tileRows(char* dst, const CUtensorMap& map, int64_t y, uint64_t* bar) {
    tileBox(dst, map, 0, int(y), bar);
    tileBox(dst + kBoxBytes, map, 64, int(y), bar);
}

// The first kSwizzleAlign-aligned byte of a block's dynamic shared memory (which its size leaves
// kSwizzleAlign bytes for).
__device__ __forceinline__ char* swizzleAligned(char* smem) {
    return smem + ((kSwizzleAlign - int(sharedAddr(smem) % kSwizzleAlign)) % kSwizzleAlign);
}

} // namespace sightline::gdn::held
#endif
