#pragma once
// The gated delta rule's operators `sightline::gdn_fwd` and `sightline::gdn_bwd` on tensors, for
// any runner of the block bodies: gdn.cu's launches them as CUDA kernels, gdn_kernel_cpu.cpp's runs
// them on the CPU. Checks the shapes, makes the scratch, runs the bodies in order.
//
// A runner has prep(p), pass(p), output(p), reverse(p) and grads(p), each running its body over its
// grid: (chunks, hv) for prep and grads, (chunks, hv, dv / 64) for the output, segments x hv x dv
// tiles blocks for the passes, longest segment first (gdn_pass_body.h's passBlock).
#include "gdn_grad_body.h"
#include "gdn_out_body.h"
#include "gdn_pass_body.h"
#include "gdn_prep_body.h"
#include "ops.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdlib>
#include <tuple>

namespace sightline::gdn {

inline In input(const at::Tensor& t, const char* what) {
    TORCH_CHECK(t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16, "gated delta rule: ", what,
                " must be float or bfloat16, got ", t.scalar_type());
    return In{t.data_ptr(), t.scalar_type() == at::kBFloat16};
}

// The inputs made contiguous, checked, and their sizes in the parameters.
struct Inputs {
    at::Tensor q, k, v, g, beta, cu, off;
};

inline Inputs prepare(Params& p, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g, const at::Tensor& beta,
                      const at::Tensor& cu, const at::Tensor& off, int64_t chunks) {
    // q, k, v are read through their token stride (views of a wider projection need no copy) where
    // each token's heads lie together
    const auto tokens = [](const at::Tensor& x) { return x.dim() == 3 && x.stride(2) == 1 && x.stride(1) == x.size(2) ? x : x.contiguous(); };
    Inputs in{tokens(q), tokens(k), tokens(v), g.contiguous(), beta.contiguous(), cu.contiguous(), off.contiguous()};
    TORCH_CHECK(q.dim() == 3 && k.sizes() == q.sizes() && v.dim() == 3 && v.size(0) == q.size(0),
                "gated delta rule: q, k must be [tokens, key heads, dk] and v [tokens, value heads, dv]");
    TORCH_CHECK(v.size(1) % q.size(1) == 0, "gated delta rule: value heads must be a multiple of key heads");
    TORCH_CHECK(q.size(2) <= kMaxDim && v.size(2) <= kMaxDim && q.size(2) > 0 && v.size(2) > 0,
                "gated delta rule: head dimensions of 1 to ", kMaxDim, " only");
    TORCH_CHECK(g.dim() == 2 && g.size(0) == v.size(0) && g.size(1) == v.size(1) && beta.sizes() == g.sizes(),
                "gated delta rule: g and beta must be [tokens, value heads]");
    TORCH_CHECK(cu.scalar_type() == at::kInt && off.scalar_type() == at::kInt && cu.dim() == 1 && off.sizes() == cu.sizes() &&
                    cu.size(0) >= 1,
                "gated delta rule: cu_seqlens and chunk_offsets must be int32 [segments + 1]");
    TORCH_CHECK(chunks >= 0 && chunks < (int64_t(1) << 24), "gated delta rule: chunk count out of range");
    p.q = input(in.q, "q");
    p.k = input(in.k, "k");
    p.v = input(in.v, "v");
    p.q_tok = in.q.stride(0);
    p.k_tok = in.k.stride(0);
    p.v_tok = in.v.stride(0);
    p.g = input(in.g, "g");
    p.beta = input(in.beta, "beta");
    p.cu = in.cu.data_ptr<int>();
    p.chunk_off = in.off.data_ptr<int>();
    p.segments = int(cu.size(0) - 1);
    p.chunks = int(chunks);
    p.tokens = v.size(0);
    p.hk = int(q.size(1));
    p.hv = int(v.size(1));
    p.dk = int(q.size(2));
    p.dv = int(v.size(2));
    p.scale = float(1.0 / std::sqrt(double(p.dk)));
    // the tensor cores' path where q, k and v are bf16 (the plain path on request, to check against)
    // and the heads even: its bf16 scratch is staged in whole 4-byte words (gdn_stage.h), so odd
    // heads take the plain path (on the CPU an odd head there gave NaN)
    p.tensor_cores = p.q.bf16 && p.k.bf16 && p.v.bf16 && p.dk % 2 == 0 && p.dv % 2 == 0 && std::getenv("SIGHTLINE_GDN_PLAIN") == nullptr;
    p.bf16_scratch = p.tensor_cores;
    p.wide_tiles = std::getenv("SIGHTLINE_GDN_NARROW") == nullptr; // narrow tiles on request, to compare
    return in;
}

// Whether the chunk gradients may read and add their rows four elements at a time (Params::fours):
// heads and token strides multiples of 4, everything they read so or add to 16-byte aligned (the
// scratch's rows then are too: its regions are multiples of 4 floats).
inline bool rowsOfFours(const Params& p) {
    return p.dk % 4 == 0 && p.dv % 4 == 0 && p.q_tok % 4 == 0 && p.k_tok % 4 == 0 && aligned16(p.q.p) && aligned16(p.k.p) &&
        aligned16(p.qn) && aligned16(p.vs) && aligned16(p.grad_q.p) && aligned16(p.grad_k.p) && aligned16(p.grad_v.p) &&
        aligned16(p.grad_scratch);
}

// The options of the scratch between kernels (Params::bf16_scratch) from fp32's.
inline at::TensorOptions scratchOptions(const Params& p, const at::TensorOptions& f) { return p.bf16_scratch ? f.dtype(at::kBFloat16) : f; }

// The prep's scratch: [hv, chunks * 64, d] per slot, [hv, chunks, 64, 64] per chunk (p fp32, pb
// bf16); keys, the normalised q and k [2, hk, chunks * 64, dk] in the scratch's type, and decays,
// gamma and beta [2, hv, chunks * 64] fp32 (none where given: Params::qk_given).
struct Scratch {
    at::Tensor keys, decays, vs, w, u, t, p, pb;
};

// The normalised q and k ([2, hk, chunks * 64, dk]) and the decays ([2, hv, chunks * 64]) into the parameters.
inline void setKeys(Params& p, const at::Tensor& keys, const at::Tensor& decays) {
    p.qn = const_cast<void*>(keys.select(0, 0).data_ptr());
    p.kn = const_cast<void*>(keys.select(0, 1).data_ptr());
    p.gamma = const_cast<float*>(decays.select(0, 0).data_ptr<float>());
    p.beta_s = const_cast<float*>(decays.select(0, 1).data_ptr<float>());
}

// The backward's prep writes U in V''s place (Params::vn), so it makes no U; nor T where it is
// given the forward's (Params::t_given, t set), nor W and P where given those (wp_given, w and pb
// or p set). P: bf16 on the bf16 scratch's path (pb: the output, the reverse pass and the chunk
// gradients read that), else fp32.
inline Scratch makeScratch(Params& p, const at::TensorOptions& f, bool backward) {
    const int64_t slots = int64_t(p.chunks) * kChunk;
    Scratch s;
    const auto sf = scratchOptions(p, f);
    const bool make_wp = !p.wp_given, fp32_p = make_wp && !p.bf16_scratch, bf16_p = make_wp && p.bf16_scratch;
    s.keys = at::empty({p.qk_given ? 0 : 2, p.hk, slots, p.dk}, sf);
    s.decays = at::empty({p.qk_given ? 0 : 2, p.hv, slots}, f);
    s.vs = at::empty({backward ? p.hv : 0, slots, p.dv}, sf); // the chunk gradients' (the forward's prep reads v itself)
    s.w = at::empty({make_wp ? p.hv : 0, slots, p.dk}, sf);
    s.u = at::empty({backward ? 0 : p.hv, slots, p.dv}, sf);
    s.t = at::empty({p.t_given ? 0 : p.hv, p.chunks, kChunk, kChunk}, f);
    s.p = at::empty({fp32_p ? p.hv : 0, p.chunks, kChunk, kChunk}, f);
    s.pb = at::empty({bf16_p ? p.hv : 0, p.chunks, kChunk, kChunk}, f.dtype(at::kBFloat16));
    if (!p.qk_given) setKeys(p, s.keys, s.decays);
    p.vs = backward ? s.vs.data_ptr() : nullptr;
    if (make_wp) p.w = s.w.data_ptr();
    p.u = backward ? nullptr : s.u.data_ptr();
    if (!p.t_given) p.t = s.t.data_ptr<float>();
    if (fp32_p) p.p = s.p.data_ptr<float>();
    if (bf16_p) p.pb = s.pb.data_ptr();
    return s;
}

// A per-token output the kernels write at every token (forUncovered) where there is a chunk, else zeros.
inline at::Tensor perToken(const Params& p, at::IntArrayRef sizes, const at::TensorOptions& o) {
    return p.chunks > 0 ? at::empty(sizes, o) : at::zeros(sizes, o);
}

// Whether the forward keeps W and P for the backward (keep_states on, SIGHTLINE_GDN_RECOMPUTE unset).
inline bool keepsWp(bool keep_states) { return keep_states && std::getenv("SIGHTLINE_GDN_RECOMPUTE") == nullptr; }

// Returns (o [T, hv, dv] in v's dtype, the final state of every segment [segments, hv, dk, dv] fp32,
// with keep_states every chunk's entering state [hv, chunks, dk, dv] (bf16 on the tensor cores'
// path, else fp32), its T [hv, chunks, 64, 64] fp32 and V' [hv, chunks * 64, dv] in v's dtype for
// the backward, else three empty tensors; then, where keepsWp, W [hv, chunks * 64, dk] and P [hv,
// chunks, 64, 64] in the scratch's type, and the normalised q and k [2, hk, chunks * 64, dk] in the
// scratch's type and gamma and beta [2, hv, chunks * 64] fp32, else four empty tensors).
template <class Runner>
kernels::GdnForwardResult forward(Runner& run, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const at::Tensor& g, const at::Tensor& beta, const at::Tensor& cu,
                                  const at::Tensor& off, int64_t chunks, bool keep_states) {
    Params p;
    const Inputs in = prepare(p, q, k, v, g, beta, cu, off, chunks);
    const auto f = v.options().dtype(at::kFloat);
    at::Tensor o = perToken(p, v.sizes(), v.options());
    at::Tensor final_state = at::zeros({p.segments, p.hv, p.dk, p.dv}, f);
    // the output is made from every chunk's entering state (bf16 on the tensor cores' path), kept
    // for the backward or dropped here
    const auto sf = scratchOptions(p, f);
    at::Tensor states = at::empty({p.hv, p.chunks, p.dk, p.dv}, sf);
    const auto kept = [&] { return keep_states ? states : at::empty({0, p.chunks, p.dk, p.dv}, sf); };
    const auto keptT = [&](const at::Tensor& t) { return keep_states ? t : at::empty({0, p.chunks, kChunk, kChunk}, f); };
    // V' in v's dtype: on the bf16 scratch's path what the output reads, else made only to be kept
    // for the backward
    const bool keep_wp = keepsWp(keep_states);
    at::Tensor values = at::empty({keep_states || p.bf16_scratch ? p.hv : 0, int64_t(p.chunks) * kChunk, p.dv}, v.options());
    const auto keptV = [&] { return keep_states ? values : at::empty({0, int64_t(p.chunks) * kChunk, p.dv}, v.options()); };
    const auto none = [&] { return at::empty({0, 0, kChunk}, sf); };
    if (p.chunks == 0) return {o, final_state, kept(), at::empty({0, 0, kChunk, kChunk}, f), keptV(), none(), none(), none(), none()};
    TORCH_CHECK(v.scalar_type() == at::kFloat || v.scalar_type() == at::kBFloat16, "gated delta rule: v must be float or bfloat16");
    p.o = Out{o.data_ptr(), v.scalar_type() == at::kBFloat16};
    p.final_state = final_state.data_ptr<float>();
    p.states = states.data_ptr();
    if (values.numel() > 0) p.vn_keep = Out{values.data_ptr(), v.scalar_type() == at::kBFloat16};
    const Scratch s = makeScratch(p, f, false);
    run.prep(p);
    run.pass(p);
    run.output(p);
    if (!keep_wp) return {o, final_state, kept(), keptT(s.t), keptV(), none(), none(), none(), none()};
    return {o, final_state, kept(), keptT(s.t), keptV(), s.w, p.bf16_scratch ? s.pb : s.p, s.keys, s.decays};
}

// The forward's W and P into the parameters (wp_given), where given: both or neither, in the
// scratch's type and shapes, and only beside its T and V' (`with_tv`), which the prep then needs.
inline void givenWp(Params& p, const at::Tensor& wy, const at::Tensor& scores, bool with_tv) {
    if (wy.numel() == 0 && scores.numel() == 0) return;
    const auto type = p.bf16_scratch ? at::kBFloat16 : at::kFloat;
    TORCH_CHECK(wy.scalar_type() == type && scores.scalar_type() == type &&
                    wy.sizes() == at::IntArrayRef({p.hv, int64_t(p.chunks) * kChunk, p.dk}) &&
                    scores.sizes() == at::IntArrayRef({p.hv, p.chunks, kChunk, kChunk}),
                "gated delta rule: the forward's W and P must be [value heads, chunks * 64, dk] and [value heads, chunks, 64, 64] in ",
                type, " on this path, or both empty");
    TORCH_CHECK(with_tv, "gated delta rule: the forward's W and P need its T and V' beside them");
    p.wp_given = true;
    p.w = const_cast<void*>(wy.data_ptr());
    if (p.bf16_scratch) p.pb = const_cast<void*>(scores.data_ptr());
    else p.p = const_cast<float*>(scores.data_ptr<float>());
}

// The forward's normalised q and k and its decays into the parameters (qk_given), where given: both
// or neither, in the forward's types and shapes, and only beside its W and P (wp_given: the prep
// then makes no product and copies v's rows alone).
inline void givenKeys(Params& p, const at::Tensor& keys, const at::Tensor& decays) {
    if (keys.numel() == 0 && decays.numel() == 0) return;
    const int64_t slots = int64_t(p.chunks) * kChunk;
    TORCH_CHECK(keys.scalar_type() == (p.bf16_scratch ? at::kBFloat16 : at::kFloat) && decays.scalar_type() == at::kFloat &&
                    keys.sizes() == at::IntArrayRef({2, p.hk, slots, p.dk}) && decays.sizes() == at::IntArrayRef({2, p.hv, slots}),
                "gated delta rule: the forward's normalised q and k must be [2, key heads, chunks * 64, dk] in the scratch's type and its "
                "decays [2, value heads, chunks * 64] fp32, or both empty");
    TORCH_CHECK(p.wp_given, "gated delta rule: the forward's normalised q and k need its W and P beside them");
    p.qk_given = true;
    setKeys(p, keys, decays);
}

// Returns (dq, dk, dv, dg, dbeta) in the inputs' dtypes, from the entering states the forward kept
// (`states`), its T (`inverses`) and its V' (`values`; either empty: made again, V' = U - W S from
// the states), and its W and P (`wy`, `scores`; both or neither, and only with T and V': made again
// where empty), and its normalised q and k and decays (`keys`, `decays`; both or neither, and only
// with W and P: made again where empty). Recomputes the rest of the prep, runs the reverse pass,
// then the chunk gradients.
template <class Runner>
kernels::GdnBackwardResult backward(Runner& run, const at::Tensor& dout, const at::Tensor& q,
                                    const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
                                    const at::Tensor& beta, const at::Tensor& cu,
                                    const at::Tensor& off, const at::Tensor& states_in,
                                    const at::Tensor& inverses_in, const at::Tensor& values_in,
                                    const at::Tensor& wy_in, const at::Tensor& scores_in, const at::Tensor& keys_in,
                                    const at::Tensor& decays_in, int64_t chunks) {
    Params p;
    const Inputs in = prepare(p, q, k, v, g, beta, cu, off, chunks);
    TORCH_CHECK(dout.sizes() == v.sizes(), "gated delta rule: the output's gradient must be [tokens, value heads, dv]");
    TORCH_CHECK(states_in.sizes() == at::IntArrayRef({p.hv, p.chunks, p.dk, p.dv}),
                "gated delta rule: the backward needs the entering states the forward kept (gdn_fwd with keep_states)");
    TORCH_CHECK(states_in.scalar_type() == (p.bf16_scratch ? at::kBFloat16 : at::kFloat),
                "gated delta rule: the entering states are ", states_in.scalar_type(), " where this path keeps them ",
                p.bf16_scratch ? "bf16" : "fp32", " (forward and backward must both take the tensor cores' path or both the plain one)");
    TORCH_CHECK(inverses_in.numel() == 0 ||
                    (inverses_in.scalar_type() == at::kFloat && inverses_in.sizes() == at::IntArrayRef({p.hv, p.chunks, kChunk, kChunk})),
                "gated delta rule: the forward's T must be fp32 [value heads, chunks, 64, 64], or empty");
    TORCH_CHECK(values_in.numel() == 0 ||
                    (values_in.scalar_type() == v.scalar_type() && values_in.sizes() == at::IntArrayRef({p.hv, p.chunks * kChunk, p.dv})),
                "gated delta rule: the forward's V' must be [value heads, chunks * 64, dv] in v's dtype, or empty");
    const at::Tensor d_out = dout.contiguous(), states = states_in.contiguous(), inverses = inverses_in.contiguous();
    const at::Tensor values = values_in.contiguous(), wy = wy_in.contiguous(), scores = scores_in.contiguous();
    givenWp(p, wy, scores, inverses.numel() > 0 && values.numel() > 0);
    const at::Tensor keys = keys_in.contiguous(), decays = decays_in.contiguous();
    givenKeys(p, keys, decays);
    p.t_given = inverses.numel() > 0;
    if (p.t_given) p.t = const_cast<float*>(inverses.data_ptr<float>());
    if (values.numel() > 0) p.vn_given = input(values, "the forward's V'");
    p.dout = input(d_out, "the output's gradient");
    const auto f = v.options().dtype(at::kFloat);
    const int64_t tokens = v.size(0);
    // dv (in v's dtype), dg and dbeta written at every token by the chunk gradients; dq and dk
    // below: fp32 sums of the value heads' shares (zeroed, cast at the end), or where the chunk
    // gradients run as pairs written once in q's dtype (Params::pair)
    at::Tensor dv = perToken(p, v.sizes(), v.options()), dg = perToken(p, g.sizes(), f), dbeta = perToken(p, beta.sizes(), f);
    at::Tensor dq, dk;
    const auto keyGrad = [&](const at::Tensor& x) { // dq or dk, once Params::pair is known
        return p.pair ? at::empty({tokens, p.hk, p.dk}, x.options()) : at::zeros({tokens, p.hk, p.dk}, f);
    };
    if (p.chunks > 0) {
        const Scratch s = makeScratch(p, f, true);
        const int64_t slots = int64_t(p.chunks) * kChunk;
        const auto gf = scratchOptions(p, f);
        at::Tensor dstates = at::empty(states.sizes(), gf);
        // V' in fp32 only where the forward's is not kept in bf16 (the chunk gradients read that in place)
        const bool vn_bf16 = p.vn_given.p && p.vn_given.bf16;
        at::Tensor vn = at::empty({vn_bf16 ? 0 : p.hv, slots, p.dv}, f), dvn = at::empty({p.hv, slots, p.dv}, gf);
        p.states = const_cast<void*>(states.data_ptr());
        p.dstates = dstates.data_ptr();
        p.vn = vn_bf16 ? nullptr : vn.data_ptr<float>();
        p.dvn = dvn.data_ptr();
        p.grad_v = Out{dv.data_ptr(), v.scalar_type() == at::kBFloat16};
        p.grad_g = dg.data_ptr<float>();
        p.grad_beta = dbeta.data_ptr<float>();
        // the chunk gradients' working matrices (gdn_grad_body.h), about 100 KB a chunk and value head
        at::Tensor work = at::empty({int64_t(p.chunks) * p.hv * gradScratchFloats(p.dk, p.dv)}, f);
        p.grad_scratch = work.data_ptr<float>();
        p.fours = rowsOfFours(p); // (dq and dk, made below by the allocator, are aligned)
        p.pair = run.pairs(p);
        dq = keyGrad(q);
        dk = keyGrad(k);
        p.grad_q = Out{dq.data_ptr(), dq.scalar_type() == at::kBFloat16};
        p.grad_k = Out{dk.data_ptr(), dk.scalar_type() == at::kBFloat16};
        run.prep(p);
        run.reverse(p);
        run.grads(p);
    } else {
        dq = keyGrad(q);
        dk = keyGrad(k);
    }
    return {dq.to(q.scalar_type()), dk.to(k.scalar_type()), dv, dg.to(g.scalar_type()), dbeta.to(beta.scalar_type())};
}

} // namespace sightline::gdn
