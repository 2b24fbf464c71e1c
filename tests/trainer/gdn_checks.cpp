// The chunk-parallel gated delta rule (the fused path's) against the naive one run sequence by
// sequence: outputs and gradients of q, k, v, g and beta, on any device; the state restarts at
// every boundary (exact zeros across it), and a batch without its boundaries is measurably wrong.
#include "check_util.h"
#include "gdn.h"

namespace sightline::trainer::checks {

namespace {

struct GdnInputs {
    torch::Tensor q, k, v, g, beta; // [T, Hk, dk], [T, Hk, dk], [T, Hv, dv], [T, Hv], [T, Hv]
};

GdnInputs randomInputs(int64_t tokens, int64_t hk, int64_t hv, int64_t dk, int64_t dv, const torch::Device& d) {
    GdnInputs in;
    in.q = torch::randn({tokens, hk, dk}, d);
    in.k = torch::randn({tokens, hk, dk}, d);
    in.v = torch::randn({tokens, hv, dv}, d);
    in.g = -torch::rand({tokens, hv}, d) * 0.5; // log decays in (-0.5, 0]
    in.beta = torch::rand({tokens, hv}, d);
    return in;
}

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

void compareRule(Results& r, const std::vector<int32_t>& lengths, int64_t hk, int64_t hv, torch::ScalarType dtype,
                 const torch::Device& d, int64_t head_dim = 64) {
    const std::vector<int32_t> cu = offsetsOf(lengths);
    const ChunkPlan plan = planChunks(cu, 64, d);
    const GdnInputs in = randomInputs(cu.back(), hk, hv, head_dim, head_dim, d);
    std::vector<torch::Tensor> a, b;
    for (const torch::Tensor& x : {in.q, in.k, in.v, in.g, in.beta}) {
        const torch::Tensor xd = x.to(x.dim() == 3 ? dtype : torch::kFloat32); // the decay and beta stay fp32, as in the model
        a.push_back(xd.detach().requires_grad_(true));
        b.push_back(xd.to(torch::kFloat32).detach().requires_grad_(true));
    }
    const torch::Tensor ya = chunkParallelGatedDeltaRule(a[0], a[1], a[2], a[3], a[4], plan), yb = naivePerSequence(b, cu);
    const double limit = dtype == torch::kFloat32 ? 1e-4 : 1e-2;
    const std::string tag = "delta rule " + describe(lengths) + " heads " + std::to_string(hk) + "/" + std::to_string(hv) + "x" +
                            std::to_string(head_dim) +
                            (dtype == torch::kFloat32 ? " fp32" : " bf16");
    r.expectClose(tag + ": output", relError(ya, yb), limit);
    const torch::Tensor dy = torch::randn_like(yb);
    ya.backward(dy.to(ya.scalar_type()));
    yb.backward(dy);
    const char* names[] = {"q", "k", "v", "g", "beta"};
    for (size_t i = 0; i < a.size(); ++i) r.expectClose(tag + ": grad " + names[i], relError(a[i].grad(), b[i].grad()), limit);
}

void checkBoundaries(Results& r, const torch::Device& d) {
    const std::vector<int32_t> cu = offsetsOf({100, 1, 64, 30});
    const ChunkPlan plan = planChunks(cu, 64, d);
    const GdnInputs in = randomInputs(cu.back(), 2, 4, 32, 32, d);
    for (size_t s = 1; s + 1 < cu.size(); ++s) {
        const torch::Tensor v = in.v.detach().requires_grad_(true);
        const torch::Tensor y = chunkParallelGatedDeltaRule(in.q, in.k, v, in.g, in.beta, plan);
        torch::Tensor dy = torch::zeros_like(y);
        dy.narrow(0, cu[s], cu[s + 1] - cu[s]).normal_();
        y.backward(dy);
        r.expectTrue("delta rule: no gradient crosses the boundary at " + std::to_string(cu[s]),
                     v.grad().narrow(0, 0, cu[s]).abs().max().item<double>() == 0.0, "exact zero before the segment");
    }
    const ChunkPlan whole = planChunks({0, cu.back()}, 64, d);
    const std::vector<torch::Tensor> all{in.q, in.k, in.v, in.g, in.beta};
    r.expectLarge("delta rule without boundaries vs per-sequence",
                  relError(chunkParallelGatedDeltaRule(in.q, in.k, in.v, in.g, in.beta, whole), naivePerSequence(all, cu)), 1e-2);
}

// The explicit backward against autograd through the same rule: outputs and every gradient.
void compareExplicit(Results& r, const std::vector<int32_t>& lengths, int64_t hk, int64_t hv, int64_t head_dim, torch::ScalarType dtype,
                     const torch::Device& d) {
    const std::vector<int32_t> cu = offsetsOf(lengths);
    const ChunkPlan plan = planChunks(cu, 64, d);
    const GdnInputs in = randomInputs(cu.back(), hk, hv, head_dim, head_dim, d);
    std::vector<torch::Tensor> a, b;
    for (const torch::Tensor& x : {in.q, in.k, in.v, in.g, in.beta}) {
        const torch::Tensor xd = x.to(x.dim() == 3 ? dtype : torch::kFloat32);
        a.push_back(xd.detach().requires_grad_(true));
        b.push_back(xd.detach().requires_grad_(true));
    }
    const torch::Tensor ya = explicitGatedDeltaRule(a[0], a[1], a[2], a[3], a[4], plan);
    const torch::Tensor yb = chunkParallelGatedDeltaRule(b[0], b[1], b[2], b[3], b[4], plan);
    const double limit = dtype == torch::kFloat32 ? 1e-5 : 1e-2;
    const std::string tag = "explicit backward vs autograd " + describe(lengths) + (dtype == torch::kFloat32 ? " fp32" : " bf16");
    r.expectClose(tag + ": output", relError(ya, yb), limit);
    const torch::Tensor dy = torch::randn(yb.sizes(), d).to(yb.scalar_type());
    ya.backward(dy);
    yb.backward(dy);
    const char* names[] = {"q", "k", "v", "g", "beta"};
    for (size_t i = 0; i < a.size(); ++i) r.expectClose(tag + ": grad " + names[i], relError(a[i].grad(), b[i].grad()), limit);
}

} // namespace

void runGdnChecks(Results& r, const torch::Device& d) {
    torch::manual_seed(99);
    const std::vector<std::vector<int32_t>> sets = {{1}, {64}, {1, 63, 64, 65, 2, 300}, {700}, {5, 1, 1, 130, 17}, std::vector<int32_t>(40, 3)};
    for (auto dtype : {torch::kFloat32, torch::kBFloat16})
        for (const auto& lengths : sets) compareRule(r, lengths, 2, 4, dtype, d);
    compareRule(r, {1000, 24, 301}, 16, 32, torch::kBFloat16, d, 128); // the benchmark's heads
    checkBoundaries(r, d);
    for (const auto& lengths : sets) compareExplicit(r, lengths, 2, 4, 32, torch::kFloat32, d);
    compareExplicit(r, {1000, 24, 301}, 16, 32, 128, torch::kBFloat16, d);
}

} // namespace sightline::trainer::checks
