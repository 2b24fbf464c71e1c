#pragma once
// The held forms' tensor maps (gdn_held_tiles.h's Maps), made on the host for each launch: each
// describes a bf16 scratch of 64-row slots (or the output's gradient) as a matrix whose boxes the
// tensor memory accelerator copies with a swizzle. cuTensorMapEncodeTiled is the driver's; it is
// reached through the runtime's entry point, so that the plugin links no libcuda itself.
#include "common.cuh"
#include "gdn_held_tiles.h"

#include <cudaTypedefs.h>

namespace sightline::kernels {

inline PFN_cuTensorMapEncodeTiled_v12000 tensorMapEncoder() {
    static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
        void* fn = nullptr;
        cudaDriverEntryPointQueryResult found{};
        const cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found);
        return err == cudaSuccess && found == cudaDriverEntryPointSuccess ? reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn) : nullptr;
    }();
    TORCH_CHECK(encode != nullptr, "gdn: the driver has no cuTensorMapEncodeTiled (the held passes need CUDA 12 and a Hopper GPU)");
    return encode;
}

// A bf16 matrix of `rows` rows of `cols` elements (rows packed, p 16-byte aligned) as [64 x 64]
// boxes with the 128-byte swizzle, or where narrow [64 x 32] boxes with the 64-byte swizzle
// (`what` names it in an error). Rows past the matrix's last land as zeros.
inline CUtensorMap tileMap(const void* p, int64_t rows, int64_t cols, const char* what, bool narrow = false) {
    CUtensorMap map{};
    const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
    const cuuint64_t strides[1] = {cuuint64_t(cols) * 2};
    const cuuint32_t box[2] = {narrow ? 32u : 64u, 64}, step[2] = {1, 1};
    const CUresult r = tensorMapEncoder()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(p), dims, strides, box, step,
                                          CU_TENSOR_MAP_INTERLEAVE_NONE, narrow ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    TORCH_CHECK(r == CUDA_SUCCESS, "gdn: cannot describe ", what, " (", rows, " x ", cols, " bf16) as the tensor memory accelerator's tiles: error ", int(r));
    return map;
}

// Which held form's maps: beside those of the scratch given (W, kn, qn, P), the ones it alone reads.
enum class MapsOf { forward,
                    reverse,
                    output };

// The maps a held form reads: the scratch given (W, kn, qn, P), the forward's U, the reverse's
// output gradient ([T x hv dv]), the output's entering states and V', their slots as
// gdn_bodies.h's slotBase and stateRow have them.
inline gdn::held::Maps heldMaps(const gdn::Params& p, MapsOf of) {
    gdn::held::Maps m{};
    const int64_t slots = int64_t(p.chunks) * gdn::kChunk;
    if (of == MapsOf::forward) m.u = tileMap(p.u, p.hv * slots, p.dv, "U", true);
    if (of == MapsOf::reverse) m.d = tileMap(p.dout.p, p.tokens, int64_t(p.hv) * p.dv, "the output's gradient", true);
    if (p.w) m.w = tileMap(p.w, p.hv * slots, p.dk, "W");
    if (p.kn) m.k = tileMap(p.kn, p.hk * slots, p.dk, "the normalised keys");
    if (p.qn) m.q = tileMap(p.qn, p.hk * slots, p.dk, "the normalised queries");
    if (p.pb) m.p = tileMap(p.pb, p.hv * slots, gdn::kChunk, "P");
    if (of == MapsOf::output) {
        m.s = tileMap(p.states, int64_t(p.hv) * p.chunks * p.dk, p.dv, "the entering states");
        m.v = tileMap(p.vn_keep.p, p.hv * slots, p.dv, "V'");
    }
    return m;
}

} // namespace sightline::kernels
