// The chunk-parallel gated delta rule (the fused path's) against the naive one run sequence by
// sequence: outputs and gradients of q, k, v, g and beta, on any device; the state restarts at
// every boundary (exact zeros across it), and a batch without its boundaries is measurably wrong.
#include "check_util.h"
#include "fused_ops.h"
#include "gdn.h"
#include "kernels/gdn_pass_body.h"
#include "kernels/gdn_swizzle.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <tuple>

namespace sightline::trainer::checks {

namespace {

struct GdnInputs {
    torch::Tensor q, k, v, g, beta; // [T, Hk, dk], [T, Hk, dk], [T, Hv, dv], [T, Hv], [T, Hv]
};

// Log decays in (-decay, 0]: at 0.5 a chunk of 64 tokens carries its entering state exp(-16) of
// the way, so the state's gradient through the chunk's whole decay (da, in the chunk gradients)
// is below the checks' limits; at 0.05 (the weak decays of trained models' slow heads) it is not.
GdnInputs randomInputs(int64_t tokens, int64_t hk, int64_t hv, int64_t dk, int64_t dv, const torch::Device& d, double decay = 0.5) {
    GdnInputs in;
    in.q = torch::randn({tokens, hk, dk}, d);
    in.k = torch::randn({tokens, hk, dk}, d);
    in.v = torch::randn({tokens, hv, dv}, d);
    in.g = -torch::rand({tokens, hv}, d) * decay;
    in.beta = torch::rand({tokens, hv}, d);
    return in;
}

// Fresh autograd leaves with xs's values: those of three dimensions (q, k, v) in dtype, the rest (g,
// beta) fp32, as in the model.
std::vector<torch::Tensor> leaves(const std::vector<torch::Tensor>& xs, torch::ScalarType dtype) {
    std::vector<torch::Tensor> a;
    for (const torch::Tensor& x : xs) a.push_back(x.to(x.dim() == 3 ? dtype : torch::kFloat32).detach().requires_grad_(true));
    return a;
}
std::vector<torch::Tensor> leaves(const GdnInputs& in, torch::ScalarType dtype) { return leaves(std::vector<torch::Tensor>{in.q, in.k, in.v, in.g, in.beta}, dtype); }

// The naive rule over each sequence alone, q and k expanded to the value heads.
torch::Tensor naivePerSequence(const std::vector<torch::Tensor>& v, const std::vector<int32_t>& cu) {
    const int64_t groups = v[2].size(1) / v[0].size(1);
    std::vector<torch::Tensor> parts;
    for (size_t s = 0; s + 1 < cu.size(); ++s) {
        auto seg = [&](const torch::Tensor& x) { return x.narrow(0, cu[s], cu[s + 1] - cu[s]).unsqueeze(0); };
        const torch::Tensor q = seg(v[0]).repeat_interleave(groups, 2), k = seg(v[1]).repeat_interleave(groups, 2);
        parts.push_back(chunkGatedDeltaRule(q, k, seg(v[2]), seg(v[3]), seg(v[4])).squeeze(0));
    }
    return torch::cat(parts, 0);
}

std::string describe(const std::vector<int32_t>& lengths) {
    std::string s;
    for (size_t i = 0; i < lengths.size() && i < 8; ++i) s += (i ? "," : "") + std::to_string(lengths[i]);
    return "[" + s + (lengths.size() > 8 ? ",..." : "") + "]";
}

using Rule = std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                                         const torch::Tensor&, const ChunkPlan&)>;
// A rule under test and the name its checks print.
struct NamedRule {
    std::string name;
    Rule rule;
};

// A case of the checks: the sequences' lengths, key and value heads, their size (dk = dv), the
// type of q, k and v (g and beta fp32, as in the model) and how far g decays (randomInputs).
struct Case {
    std::vector<int32_t> lengths;
    int64_t hk = 2, hv = 4, dim = 64;
    torch::ScalarType dtype = torch::kFloat32;
    double decay = 0.5;

    std::vector<int32_t> offsets() const { return offsetsOf(lengths); }
    GdnInputs inputs(const torch::Device& d) const { return randomInputs(offsets().back(), hk, hv, dim, dim, d, decay); }
    const char* type() const { return dtype == torch::kFloat32 ? " fp32" : " bf16"; }
    std::string heads() const { return " heads " + std::to_string(hk) + "/" + std::to_string(hv) + "x" + std::to_string(dim); }
};

// The rule on case c against the naive rule per sequence in fp32: output and every gradient.
void compareRule(Results& r, const NamedRule& rule, const Case& c, const torch::Device& d) {
    const std::vector<int32_t> cu = c.offsets();
    const ChunkPlan plan = planChunks(cu, 64, d);
    const std::vector<torch::Tensor> a = leaves(c.inputs(d), c.dtype), b = leaves(a, torch::kFloat32);
    const torch::Tensor ya = rule.rule(a[0], a[1], a[2], a[3], a[4], plan), yb = naivePerSequence(b, cu);
    const double limit = c.dtype == torch::kFloat32 ? 1e-4 : 1e-2;
    const std::string tag = rule.name + " " + describe(c.lengths) + c.heads() + c.type() + (c.decay < 0.5 ? " weak decays" : "");
    r.expectClose(tag + ": output", relError(ya, yb), limit);
    const torch::Tensor dy = torch::randn_like(yb);
    ya.backward(dy.to(ya.scalar_type()));
    yb.backward(dy);
    const char* names[] = {"q", "k", "v", "g", "beta"};
    for (size_t i = 0; i < a.size(); ++i) r.expectClose(tag + ": grad " + names[i], relError(a[i].grad(), b[i].grad()), limit);
}

// Each segment's final state by the token-by-token recurrence in fp32 ([segments, Hv, dk, dv]):
// S <- exp(g) S, then S <- S + k (beta (v - S^T k))^T, k L2-normalised.
torch::Tensor recurrentFinalStates(const GdnInputs& in, const std::vector<int32_t>& cu) {
    const int64_t groups = in.v.size(1) / in.k.size(1);
    const torch::Tensor k = (in.k * torch::rsqrt((in.k * in.k).sum(-1, true) + 1e-6)).repeat_interleave(groups, 1);
    std::vector<torch::Tensor> states;
    for (size_t s = 0; s + 1 < cu.size(); ++s) {
        torch::Tensor S = torch::zeros({in.v.size(1), k.size(2), in.v.size(2)}, in.v.options());
        for (int64_t t = cu[s]; t < cu[s + 1]; ++t) {
            S = S * in.g[t].exp().view({-1, 1, 1});
            const torch::Tensor kt = k[t].unsqueeze(-1), pred = (S * kt).sum(1);
            S = S + kt * (in.beta[t].unsqueeze(-1) * (in.v[t] - pred)).unsqueeze(1);
        }
        states.push_back(S);
    }
    return torch::stack(states);
}

void compareFinalStates(Results& r, const Case& c, const torch::Device& d) {
    const std::vector<int32_t> cu = c.offsets();
    const GdnInputs in = c.inputs(d);
    const auto [o, states] = fused::gatedDeltaRuleWithState(in.q, in.k, in.v, in.g, in.beta, planChunks(cu, 64, d));
    r.expectClose("kernels " + describe(c.lengths) + c.heads() + " fp32: final states vs recurrence", relError(states, recurrentFinalStates(in, cu)), 1e-4);
}

void checkBoundaries(Results& r, const NamedRule& named, const torch::Device& d) {
    const std::string& name = named.name;
    const Rule& rule = named.rule;
    const std::vector<int32_t> cu = offsetsOf({100, 1, 64, 30});
    const ChunkPlan plan = planChunks(cu, 64, d);
    const GdnInputs in = randomInputs(cu.back(), 2, 4, 32, 32, d);
    for (size_t s = 1; s + 1 < cu.size(); ++s) {
        const torch::Tensor v = in.v.detach().requires_grad_(true);
        const torch::Tensor y = rule(in.q, in.k, v, in.g, in.beta, plan);
        torch::Tensor dy = torch::zeros_like(y);
        dy.narrow(0, cu[s], cu[s + 1] - cu[s]).normal_();
        y.backward(dy);
        r.expectTrue(name + ": no gradient crosses the boundary at " + std::to_string(cu[s]),
                     v.grad().narrow(0, 0, cu[s]).abs().max().item<double>() == 0.0, "exact zero before the segment");
    }
    const ChunkPlan whole = planChunks({0, cu.back()}, 64, d);
    const std::vector<torch::Tensor> all{in.q, in.k, in.v, in.g, in.beta};
    r.expectLarge(name + " without boundaries vs per-sequence",
                  relError(rule(in.q, in.k, in.v, in.g, in.beta, whole), naivePerSequence(all, cu)), 1e-2);
}

// The explicit backward against autograd through the same rule: outputs and every gradient.
void compareExplicit(Results& r, const Case& c, const torch::Device& d) {
    const ChunkPlan plan = planChunks(c.offsets(), 64, d);
    const torch::ScalarType dtype = c.dtype;
    const std::vector<torch::Tensor> a = leaves(c.inputs(d), dtype), b = leaves(a, dtype);
    const torch::Tensor ya = explicitGatedDeltaRule(a[0], a[1], a[2], a[3], a[4], plan);
    const torch::Tensor yb = chunkParallelGatedDeltaRule(b[0], b[1], b[2], b[3], b[4], plan);
    const double limit = dtype == torch::kFloat32 ? 1e-5 : 1e-2;
    const std::string tag = "explicit backward vs autograd " + describe(c.lengths) + c.type();
    r.expectClose(tag + ": output", relError(ya, yb), limit);
    const torch::Tensor dy = torch::randn(yb.sizes(), d).to(yb.scalar_type());
    ya.backward(dy);
    yb.backward(dy);
    const char* names[] = {"q", "k", "v", "g", "beta"};
    for (size_t i = 0; i < a.size(); ++i) r.expectClose(tag + ": grad " + names[i], relError(a[i].grad(), b[i].grad()), limit);
}

// q, k and v as views of one projection (the model's split of its qkv, read through their token
// stride) against the same values as tensors of their own: the same output and gradients, exactly.
void compareViews(Results& r, const Case& c, const torch::Device& d) {
    const std::vector<int32_t> cu = c.offsets();
    const ChunkPlan plan = planChunks(cu, 64, d);
    const GdnInputs in = c.inputs(d);
    const int64_t n = cu.back(), hk = c.hk, hv = c.hv, dim = c.dim, key = hk * dim, value = hv * dim;
    const torch::ScalarType dtype = c.dtype;
    const torch::Tensor qkv = torch::cat({in.q.flatten(1), in.k.flatten(1), in.v.flatten(1)}, 1).to(dtype).requires_grad_(true);
    const auto parts = qkv.split_with_sizes({key, key, value}, 1);
    std::vector<torch::Tensor> own;
    for (const torch::Tensor& x : parts) own.push_back(x.detach().clone().requires_grad_(true));
    const torch::Tensor dy = torch::randn({n, hv, dim}, d).to(dtype);
    const torch::Tensor y_views = fused::gatedDeltaRule(parts[0].view({n, hk, dim}), parts[1].view({n, hk, dim}), parts[2].view({n, hv, dim}),
                                                        in.g, in.beta, plan);
    const torch::Tensor y_own = fused::gatedDeltaRule(own[0].view({n, hk, dim}), own[1].view({n, hk, dim}), own[2].view({n, hv, dim}),
                                                      in.g, in.beta, plan);
    y_views.backward(dy);
    y_own.backward(dy);
    const torch::Tensor grad_own = torch::cat({own[0].grad(), own[1].grad(), own[2].grad()}, 1);
    const double out = (y_views - y_own).abs().max().item<double>(), grad = (qkv.grad() - grad_own).abs().max().item<double>();
    r.expectTrue("kernels " + describe(c.lengths) + c.type() +
                     ": q, k, v as views of one projection give the same output and gradients",
                 out == 0 && grad == 0, "largest difference: output " + std::to_string(out) + ", gradients " + std::to_string(grad));
}

// Tokens outside every segment (before cu_seqlens[0], after its last offset): the kernels zero
// their output and gradients themselves (forUncovered), the rest equal to the same segments alone,
// exactly. The allocator is handed blocks of NaN of the outputs' sizes first, so that rows left
// unwritten show.
void checkUncovered(Results& r, torch::ScalarType dtype, int64_t dim, const torch::Device& d) {
    const int64_t lead = 3, covered = 72, tokens = 80, hk = 1, hv = 2;
    const GdnInputs in = randomInputs(tokens, hk, hv, dim, dim, d);
    const auto run = [&](int64_t from, int64_t count, const ChunkPlan& plan) {
        const auto cut = [&](const torch::Tensor& x) { return x.narrow(0, from, count).contiguous(); };
        const torch::Tensor q = cut(in.q).to(dtype), k = cut(in.k).to(dtype), v = cut(in.v).to(dtype), g = cut(in.g), b = cut(in.beta);
        const double nan = std::nan("");
        (void)torch::full({count, hv, dim}, nan, v.options()); // o's and dv's size
        (void)torch::full({count, hv}, nan, g.options());      // dg's and dbeta's
        const torch::Tensor &cu = plan.cu_seqlens, &off = plan.chunk_offsets;
        auto [o, fin, states, inverses, values, wy, scores, keys, decays] = fused::gdnForwardOp(q, k, v, g, b, cu, off, plan.chunks, true);
        const torch::Tensor dout = torch::ones_like(o);
        auto [dq, dk, dv, dg, db] =
            fused::gdnBackwardOp(dout, q, k, v, g, b, cu, off, states, inverses, values, wy, scores, keys, decays, plan.chunks);
        return std::vector<torch::Tensor>{o, dq, dk, dv, dg, db};
    };
    const std::vector<torch::Tensor> all = run(0, tokens, planChunks({int32_t(lead), 40, int32_t(lead + covered)}, 64, d));
    const std::vector<torch::Tensor> alone = run(lead, covered, planChunks({0, 37, int32_t(covered)}, 64, d));
    const char* names[] = {"output", "dq", "dk", "dv", "dg", "dbeta"};
    for (size_t i = 0; i < all.size(); ++i) {
        const torch::Tensor x = all[i].to(torch::kFloat32);
        const double outside = torch::cat({x.narrow(0, 0, lead), x.narrow(0, lead + covered, tokens - lead - covered)}).abs().max().item<double>();
        const double inside = (x.narrow(0, lead, covered) - alone[i].to(torch::kFloat32)).abs().max().item<double>();
        r.expectTrue(std::string("kernels, tokens outside the segments (") + (dtype == torch::kFloat32 ? "fp32" : "bf16") + " x" +
                         std::to_string(dim) + "): " + names[i] + " zero there, the segments' own inside",
                     outside == 0 && inside == 0, "largest outside " + std::to_string(outside) + ", difference inside " + std::to_string(inside));
    }
}

// The backward given what the forward kept against the backward that makes it again: given T
// alone, the same gradients exactly (the prep makes the same T either way); given T and V' too,
// within bf16's rounding (V' is kept in v's dtype, made again in fp32); given W and P as well,
// exactly those of the one given T and V' (the prep makes the same W and bf16 P either way); given
// the normalised q and k and the decays too, exactly those of the one given W and P (the forward's
// prep normalises and cumulates as the backward's does). With SIGHTLINE_GDN_RECOMPUTE=1 the forward
// keeps no W, P, q, k or decays.
void compareKept(Results& r, const Case& c, const torch::Device& d) {
    // W and P kept whatever the caller's environment says (restored at the end)
    const char* env = std::getenv("SIGHTLINE_GDN_RECOMPUTE");
    const std::string recompute = env ? env : "";
    unsetenv("SIGHTLINE_GDN_RECOMPUTE");
    const ChunkPlan plan = planChunks(c.offsets(), 64, d);
    const GdnInputs in = c.inputs(d);
    const auto bf = [](const torch::Tensor& x) { return x.to(torch::kBFloat16); };
    const std::vector<torch::Tensor> x{bf(in.q), bf(in.k), bf(in.v), in.g, in.beta, plan.cu_seqlens, plan.chunk_offsets};
    const auto [o, final_state, states, inverses, values, wy, scores, keys, decays] =
        fused::gdnForwardOp(x[0], x[1], x[2], x[3], x[4], x[5], x[6], plan.chunks, true);
    const torch::Tensor dy = torch::randn_like(o), none = torch::empty({0}, states.options()), no_v = torch::empty({0}, o.options());
    // (q, k and the decays left out: both empty, made again)
    const auto backward = [&](const torch::Tensor& t, const torch::Tensor& vn, const torch::Tensor& w, const torch::Tensor& pm,
                              const torch::Tensor& qk = {}, const torch::Tensor& dec = {}) {
        const auto g = fused::gdnBackwardOp(dy, x[0], x[1], x[2], x[3], x[4], x[5], x[6], states, t, vn, w, pm, qk.defined() ? qk : none,
                                            dec.defined() ? dec : none, plan.chunks);
        return std::apply([](const auto&... x) { return std::vector<at::Tensor>{x.to(torch::kFloat32)...}; }, g);
    };
    const std::vector<at::Tensor> made = backward(none, no_v, none, none), with_t = backward(inverses, no_v, none, none);
    const std::vector<at::Tensor> with_tv = backward(inverses, values, none, none), with_all = backward(inverses, values, wy, scores);
    const std::vector<at::Tensor> with_keys = backward(inverses, values, wy, scores, keys, decays);
    double diff = 0, err = 0, diff_wp = 0, diff_keys = 0;
    for (size_t i = 0; i < made.size(); ++i) {
        diff = worse(diff, (with_t[i] - made[i]).abs().max().item<double>());
        err = worse(err, relError(with_tv[i], made[i]));
        diff_wp = worse(diff_wp, (with_all[i] - with_tv[i]).abs().max().item<double>());
        diff_keys = worse(diff_keys, (with_keys[i] - with_all[i]).abs().max().item<double>());
    }
    const bool shaped = inverses.sizes() == at::IntArrayRef({c.hv, plan.chunks, 64, 64}) &&
        values.sizes() == at::IntArrayRef({c.hv, plan.chunks * 64, c.dim}) && values.scalar_type() == torch::kBFloat16;
    const bool wp_shaped = wy.sizes() == at::IntArrayRef({c.hv, plan.chunks * 64, c.dim}) && wy.scalar_type() == torch::kBFloat16 &&
        scores.sizes() == at::IntArrayRef({c.hv, plan.chunks, 64, 64}) && scores.scalar_type() == torch::kBFloat16;
    const std::string tag = "kernels " + describe(c.lengths) + " bf16: the backward given the forward's ";
    r.expectTrue(tag + "T gives the gradients of the one that makes it", shaped && diff == 0,
                 std::string(shaped ? "" : "T or V' not kept as described; ") + "largest difference " + std::to_string(diff));
    r.expectClose(tag + "T and V' (bf16) against the one that makes both, worst gradient", err, 1e-2);
    r.expectTrue(tag + "T, V', W and P gives the gradients of the one given T and V'", wp_shaped && diff_wp == 0,
                 std::string(wp_shaped ? "" : "W or P not kept as described; ") + "largest difference " + std::to_string(diff_wp));
    const bool keys_shaped = keys.sizes() == at::IntArrayRef({2, c.hk, plan.chunks * 64, c.dim}) && keys.scalar_type() == torch::kBFloat16 &&
        decays.sizes() == at::IntArrayRef({2, c.hv, plan.chunks * 64}) && decays.scalar_type() == torch::kFloat32;
    r.expectTrue(tag + "normalised q and k and decays as well gives the gradients of the one given W and P", keys_shaped && diff_keys == 0,
                 std::string(keys_shaped ? "" : "q, k or the decays not kept as described; ") + "largest difference " +
                     std::to_string(diff_keys));
    setenv("SIGHTLINE_GDN_RECOMPUTE", "1", 1);
    const auto recomputed = fused::gdnForwardOp(x[0], x[1], x[2], x[3], x[4], x[5], x[6], plan.chunks, true);
    if (env) setenv("SIGHTLINE_GDN_RECOMPUTE", recompute.c_str(), 1);
    else unsetenv("SIGHTLINE_GDN_RECOMPUTE");
    r.expectTrue("kernels " + describe(c.lengths) + " bf16: SIGHTLINE_GDN_RECOMPUTE=1 keeps no W, P, q, k or decays",
                 std::get<5>(recomputed).numel() == 0 && std::get<6>(recomputed).numel() == 0 && std::get<7>(recomputed).numel() == 0 &&
                     std::get<8>(recomputed).numel() == 0 && std::get<4>(recomputed).numel() > 0,
                 "W " + std::to_string(std::get<5>(recomputed).numel()) + " and P " + std::to_string(std::get<6>(recomputed).numel()) +
                     " elements, V' " + std::to_string(std::get<4>(recomputed).numel()));
}

// The kernels' bodies on the CPU with each phase's threads in reverse order against the usual one
// (gdn_block.h's hostThreadsReversed): a phase in which one thread reads what another writes
// gives other figures. Forward and backward, every output; only the order in which blocks add
// their shares to dq and dk may differ, so within 1e-6.
void compareThreadOrders(Results& r, torch::ScalarType dtype, int64_t dim, const torch::Device& d) {
    const std::vector<int32_t> cu = offsetsOf({1, 63, 64, 65, 130});
    const ChunkPlan plan = planChunks(cu, 64, d);
    const GdnInputs in = randomInputs(cu.back(), 1, 2, dim, dim, d, 0.05);
    const torch::Tensor dy = torch::randn({cu.back(), 2, dim}, d);
    const auto run = [&](bool reversed) {
        gdn::hostThreadsReversed = reversed;
        const std::vector<torch::Tensor> a = leaves(in, dtype);
        const torch::Tensor y = fused::gatedDeltaRule(a[0], a[1], a[2], a[3], a[4], plan);
        y.backward(dy.to(y.scalar_type()));
        std::vector<torch::Tensor> out{y.to(torch::kFloat32)};
        for (const torch::Tensor& x : a) out.push_back(x.grad().to(torch::kFloat32));
        gdn::hostThreadsReversed = false;
        return out;
    };
    const std::vector<torch::Tensor> usual = run(false), reversed = run(true);
    double err = 0;
    for (size_t i = 0; i < usual.size(); ++i) err = worse(err, relError(reversed[i], usual[i]));
    r.expectClose("kernels heads 1/2x" + std::to_string(dim) + (dtype == torch::kFloat32 ? " fp32" : " bf16") +
                      ": each phase's threads in reverse order, worst output or gradient",
                  err, 1e-6);
}

// The state passes' block order (kernels/gdn_pass_body.h): each rank names one segment, by chunk
// count from the most, ties in segment order.
void checkPassOrder(Results& r) {
    const std::vector<int32_t> chunks = {1, 5, 1, 2, 0, 5, 1, 3};
    const std::vector<int32_t> off = offsetsOf(chunks);
    const int segments = int(chunks.size());
    std::vector<int> order;
    for (int rank = 0; rank < segments; ++rank)
        for (int s = 0; s < segments; ++s)
            if (gdn::segmentRank(off.data(), segments, s) == rank) order.push_back(s);
    const std::vector<int> want = {1, 5, 7, 3, 0, 2, 6, 4};
    std::string got;
    for (int s : order) got += std::to_string(s) + " ";
    r.expectTrue("state passes: segments longest first, ties in order", order == want, "order " + got);
}

// The tensor cores' K ranges for triangular operands (kernels/gdn_block.h's triRange): for every
// tile of 16 rows and 16 or 32 columns, K of 64 or 128 and groups of 8 to 64, the range holds
// every K at which the operand can be nonzero for one of the tile's rows or columns, and its ends
// are whole groups.
void checkTriangularRanges(Results& r) {
    int bad = 0, cases = 0;
    for (const gdn::Tri tri : {gdn::kLowerA, gdn::kUpperA, gdn::kUpperB})
        for (const int K : {64, 128})
            for (const int g : {8, 16, 32, 64})
                for (const int w : {16, 32})
                    for (int i0 = 0; i0 < K; i0 += 16)
                        for (int j0 = 0; j0 < K; j0 += w) {
                            int from = 0, to = 0;
                            gdn::triRange(tri, K, i0, j0, w, g, from, to);
                            ++cases;
                            bool ok = from >= 0 && to <= K && from % g == 0 && to % g == 0;
                            for (int k = 0; k < K && ok; ++k) {
                                if (k >= from && k < to) continue;
                                // k is skipped: the operand must be zero there for every row i or column j of the tile
                                for (int x = 0; x < (tri == gdn::kUpperB ? w : 16) && ok; ++x) {
                                    const int i = i0 + x, j = j0 + x;
                                    const bool nonzero = tri == gdn::kLowerA ? k <= i : tri == gdn::kUpperA ? k >= i
                                                                                                            : k <= j;
                                    ok = !nonzero;
                                }
                            }
                            bad += !ok;
                        }
    r.expectTrue("tensor cores: triangular operands' K ranges hold every nonzero", bad == 0,
                 std::to_string(bad) + " of " + std::to_string(cases) + " tiles wrong");
}

// The held forms' shared-memory layouts (kernels/gdn_swizzle.h) against the tensor memory
// accelerator's swizzles, written here from their definition (a box's dense rows, the 16-byte
// piece's address bits from 4 XORed with those from 7: three of them for the 128-byte swizzle,
// two for the 64-byte), and against the banks: the eight rows of one piece column that an
// ldmatrix reads fall in eight 16-byte bank groups, and the forward pass's scalar reads of U
// (gdn_pass_held.h) meet in a bank only where they read the same word.
uint32_t swizzled(uint32_t linear, int bits) { return linear ^ (((linear >> 7) & ((1u << bits) - 1)) << 4); }

template <class Layout>
int ldmatrixConflicts(int rows, int cols) {
    int bad = 0;
    for (int r0 = 0; r0 < rows; r0 += 8)
        for (int c = 0; c < cols; c += 8) {
            unsigned groups = 0;
            for (int i = 0; i < 8; ++i) groups |= 1u << (Layout::at(0, r0 + i, c) / 16 % 8);
            bad += groups != 0xffu;
        }
    return bad;
}

void checkSwizzles(Results& r) {
    namespace held = gdn::held;
    int wrong = 0;
    for (int row = 0; row < 128; ++row)
        for (int col = 0; col < 128; ++col) {
            const uint32_t box = uint32_t(row / 64 * held::kTileBytes + col / 64 * held::kBoxBytes);
            const uint32_t wide = box + swizzled(uint32_t(row % 64 * 128 + col % 64 * 2), 3);
            if (row < 64) wrong += held::SwizzledRows::at(0, row, col) != wide;
            wrong += held::SwizzledTall::at(0, row, col) != wide;
            if (row < 64 && col < 32) wrong += held::NarrowRows::at(0, row, col) != swizzled(uint32_t(row * 64 + col * 2), 2);
        }
    r.expectTrue("held tiles: every element where the accelerator's swizzle lands it", wrong == 0, std::to_string(wrong) + " elements elsewhere");
    const int conflicts = ldmatrixConflicts<held::SwizzledRows>(64, 128) + ldmatrixConflicts<held::SwizzledTall>(128, 128) +
        ldmatrixConflicts<held::NarrowRows>(64, 32);
    r.expectTrue("held tiles: ldmatrix's eight rows in eight bank groups", conflicts == 0, std::to_string(conflicts) + " reads conflict");
    int shared = 0; // U's reads: lane (g, t) reads token 8 n + 2 t + e % 2, column 16 wj + g + 8 (e / 2)
    for (int n = 0; n < 8; ++n)
        for (int e = 0; e < 4; ++e)
            for (int wj = 0; wj < 2; ++wj) {
                std::vector<int64_t> word(32, -1);
                for (int lane = 0; lane < 32; ++lane) {
                    const uint32_t w = held::NarrowRows::at(0, 8 * n + 2 * (lane % 4) + e % 2, 16 * wj + lane / 4 + 8 * (e / 2)) / 4;
                    int64_t& seen = word[w % 32];
                    shared += seen >= 0 && seen != int64_t(w);
                    seen = w;
                }
            }
    r.expectTrue("held tiles: the forward pass's reads of U meet in no bank", shared == 0, std::to_string(shared) + " lanes conflict");
}

} // namespace

void runGdnChecks(Results& r, const torch::Device& d) {
    torch::manual_seed(99);
    const std::vector<std::vector<int32_t>> sets = {{1}, {64}, {1, 63, 64, 65, 2, 300}, {700}, {5, 1, 1, 130, 17}, std::vector<int32_t>(40, 3)};
    const NamedRule rule{"delta rule", chunkParallelGatedDeltaRule};
    for (auto dtype : {torch::kFloat32, torch::kBFloat16})
        for (const auto& lengths : sets) compareRule(r, rule, {.lengths = lengths, .dtype = dtype}, d);
    compareRule(r, rule, {.lengths = {1000, 24, 301}, .hk = 16, .hv = 32, .dim = 128, .dtype = torch::kBFloat16}, d); // the benchmark's heads
    compareRule(r, rule, {.lengths = sets[2], .decay = 0.05}, d);
    checkBoundaries(r, rule, d);
    for (const auto& lengths : sets) compareExplicit(r, {.lengths = lengths, .dim = 32}, d);
    compareExplicit(r, {.lengths = {1000, 24, 301}, .hk = 16, .hv = 32, .dim = 128, .dtype = torch::kBFloat16}, d);
}

// The delta rule's kernels (on the CPU their bodies emulated, so smaller cases there) against the
// naive rule: outputs, final states, every gradient, the boundaries.
void runGdnKernelChecks(Results& r, const torch::Device& d) {
    torch::manual_seed(7);
    const NamedRule kernels{"kernels", fused::gatedDeltaRule};
    const bool gpu = d.is_cuda();
    // one sequence; many short ones; lengths not multiples of 64; 1-token sequences
    const std::vector<std::vector<int32_t>> sets = {
        {gpu ? 2000 : 300}, std::vector<int32_t>(gpu ? 100 : 30, 20), {1, 63, 64, 65, 127, 129, 2, 300}, {1, 1, 1, 5, 1}};
    const int64_t hk = gpu ? 16 : 2, hv = gpu ? 32 : 4, dim = gpu ? 128 : 32;
    const auto at = [&](const std::vector<int32_t>& lengths, torch::ScalarType dtype) {
        return Case{.lengths = lengths, .hk = hk, .hv = hv, .dim = dim, .dtype = dtype};
    };
    for (auto dtype : {torch::kFloat32, torch::kBFloat16})
        for (const auto& lengths : sets) compareRule(r, kernels, at(lengths, dtype), d);
    if (!gpu) // the kernels' largest heads, in both types (bf16: the staged rows the GPU's Fixed forms have)
        for (auto dtype : {torch::kFloat32, torch::kBFloat16}) compareRule(r, kernels, {.lengths = {130, 1, 70}, .hk = 1, .hv = 2, .dim = 128, .dtype = dtype}, d);
    // on the GPU the heads of 128 in bf16 take the kernels' form with them as constants (gdn.cu),
    // fp32 the plain path: the general form on the tensor cores at other heads
    if (gpu) compareRule(r, kernels, {.lengths = sets[2], .dtype = torch::kBFloat16}, d);
    for (const auto& lengths : sets) compareFinalStates(r, at(lengths, torch::kFloat32), d);
    for (auto dtype : {torch::kFloat32, torch::kBFloat16}) compareViews(r, at(sets[2], dtype), d);
    compareKept(r, at(sets[2], torch::kBFloat16), d);
    checkBoundaries(r, kernels, d);
    checkUncovered(r, torch::kFloat32, 32, d);
    checkUncovered(r, torch::kBFloat16, 128, d);
    checkPassOrder(r);
    checkTriangularRanges(r);
    checkSwizzles(r);
    // heads of any size: odd (bf16 inputs then take the plain path), even but not a multiple of 4 or 8
    for (int64_t odd : {31, 30, 6}) compareRule(r, kernels, {.lengths = {70, 5}, .hk = 1, .hv = 2, .dim = odd, .dtype = torch::kBFloat16}, d);
    if (!gpu) {
        compareThreadOrders(r, torch::kFloat32, 32, d);
        compareThreadOrders(r, torch::kBFloat16, 128, d); // the staged rows of the GPU's Fixed forms
    }
    // weak decays: the states carried across whole chunks count (da, the passes' chains)
    for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
        Case weak = at(sets[2], dtype);
        weak.decay = 0.05;
        compareRule(r, kernels, weak, d);
    }
}

// A tiny forward and backward through the kernels for compute-sanitizer (tests/gpu/gdn_kernel_checks.sh):
// segments of 1, 70 and 5 tokens, one key and two value heads of 128, bf16; prints whether it ran finite.
void runGdnSanitizeCase(Results& r, const torch::Device& d) {
    const std::vector<int32_t> cu = offsetsOf({1, 70, 5});
    const GdnInputs in = randomInputs(cu.back(), 1, 2, 128, 128, d);
    const std::vector<torch::Tensor> a = leaves(in, torch::kBFloat16);
    const torch::Tensor y = fused::gatedDeltaRule(a[0], a[1], a[2], a[3], a[4], planChunks(cu, 64, d));
    y.backward(torch::randn_like(y));
    bool finite = torch::isfinite(y).all().item<bool>();
    for (const torch::Tensor& x : a) finite = finite && torch::isfinite(x.grad()).all().item<bool>();
    r.expectTrue("kernels tiny case [1,70,5] forward and backward", finite, finite ? "finite" : "NaN or infinity");
}

} // namespace sightline::trainer::checks
