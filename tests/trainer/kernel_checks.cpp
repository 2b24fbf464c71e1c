// The fused path's kernels against naive libtorch references on fresh random inputs (see
// trainer_checks_main.cpp): forward outputs and every input gradient, relative error in fp32 over
// the whole tensor; sequence boundaries at awkward places; exact zeros across boundaries.
#include "check_util.h"
#include "fused_ops.h"
#include "gdn.h"

#include <functional>

namespace sightline::trainer::checks {

namespace F = torch::nn::functional;
using torch::indexing::Slice;
using Fn = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;

namespace {

// Runs `fused` on the inputs cast to `dtype` and `ref` on the same values in fp32; compares the
// outputs and the gradients of every input marked differentiable under one random output gradient
// (an input the output does not depend on has none on either side).
void compare(Results& r, const std::string& name, const Fn& fused, const Fn& ref, const std::vector<torch::Tensor>& inputs,
             torch::ScalarType dtype, double limit) {
    std::vector<torch::Tensor> a, b;
    for (const torch::Tensor& x : inputs) {
        const bool grad = x.is_floating_point();
        const torch::Tensor xd = grad ? x.to(dtype) : x;
        a.push_back(grad ? xd.detach().requires_grad_(true) : xd);
        b.push_back(grad ? xd.to(torch::kFloat32).detach().requires_grad_(true) : xd);
    }
    const std::string tag = name + (dtype == torch::kBFloat16 ? " bf16" : " fp32");
    const torch::Tensor ya = fused(a), yb = ref(b);
    r.expectClose(tag + ": output", relError(ya, yb), limit);
    const torch::Tensor dy = torch::randn_like(yb);
    ya.backward(dy.to(ya.scalar_type()));
    yb.backward(dy);
    for (size_t i = 0; i < inputs.size(); ++i) {
        if (!a[i].requires_grad()) continue;
        const std::string what = tag + ": grad of input " + std::to_string(i);
        const torch::Tensor &ga = a[i].grad(), &gb = b[i].grad();
        if (ga.defined() && gb.defined()) {
            r.expectClose(what, relError(ga, gb), limit);
            continue;
        }
        const char* detail = ga.defined() ? "the reference has none" : gb.defined() ? "missing"
                                                                                    : "none on either side";
        r.expectTrue(what, ga.defined() == gb.defined(), detail);
    }
}

// The largest |gradient| that reaches the tokens before `from` when only tokens [from, to) of the
// output carry a gradient: zero when no token looks across the boundary at `from`.
double leakBefore(const Fn& fn, const torch::Tensor& x_in, int64_t from, int64_t to) {
    const torch::Tensor x = x_in.detach().requires_grad_(true);
    const torch::Tensor y = fn({x});
    torch::Tensor dy = torch::zeros_like(y);
    dy.narrow(0, from, to - from).normal_();
    y.backward(dy);
    return x.grad().narrow(0, 0, from).abs().max().item<double>();
}

torch::Tensor seqIdx(const std::vector<int32_t>& cu, const torch::Device& d) {
    std::vector<int32_t> idx;
    for (size_t s = 0; s + 1 < cu.size(); ++s) idx.insert(idx.end(), size_t(cu[s + 1] - cu[s]), int32_t(s));
    return torch::tensor(idx, torch::kInt32).to(d);
}

torch::Tensor perSegment(const std::vector<int32_t>& cu, const std::function<torch::Tensor(int64_t, int64_t)>& f) {
    std::vector<torch::Tensor> parts;
    for (size_t s = 0; s + 1 < cu.size(); ++s) parts.push_back(f(cu[s], cu[s + 1] - cu[s]));
    return torch::cat(parts, 0);
}

const std::vector<std::vector<int32_t>> kSegmentSets = {{1, 63, 64, 65, 2, 300}, {700}, {5, 1, 1, 130, 17}};

// The residual add before the norm, with the sum and the norm both used (the sum's gradient
// joins the norm's), the norm alone (the last layer's) and the sum alone.
void checkAddNorm(Results& r, const torch::Device& d, torch::ScalarType dtype, double limit) {
    const char* uses[] = {"sum and norm", "norm alone", "sum alone"};
    for (int64_t dim : {2560, 100})
        for (int use = 0; use < 3; ++use) {
            auto pick = [use](const torch::Tensor& s, const torch::Tensor& y) {
                if (use == 0) return torch::cat({s, y}, -1);
                return use == 1 ? y : s;
            };
            auto ref = [&](const std::vector<torch::Tensor>& v) {
                const torch::Tensor s = v[0] + v[1];
                return pick(s, s * torch::rsqrt(s.pow(2).mean(-1, true) + 1e-6) * (1 + v[2]));
            };
            auto fused = [&](const std::vector<torch::Tensor>& v) {
                auto [s, y] = fused::addRmsNorm(v[0], v[1], v[2], 1e-6);
                return pick(s, y);
            };
            compare(r, "add_rms_norm dim " + std::to_string(dim) + ", " + uses[use], fused, ref,
                    {torch::randn({517, dim}, d) * 3, torch::randn({517, dim}, d), torch::randn({dim}, d) * 0.1}, dtype, limit);
        }
}

void checkNorms(Results& r, const torch::Device& d) {
    for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
        const double limit = dtype == torch::kFloat32 ? 1e-5 : 1e-2;
        for (int64_t dim : {2560, 256, 100, 64, 16}) {
            const int64_t rows = dim == 256 ? 4099 : 517;
            auto ref = [](const std::vector<torch::Tensor>& v) {
                return v[0] * torch::rsqrt(v[0].pow(2).mean(-1, true) + 1e-6) * (1 + v[1]);
            };
            auto fused = [](const std::vector<torch::Tensor>& v) { return fused::rmsNorm(v[0], v[1], 1e-6); };
            compare(r, "rms_norm dim " + std::to_string(dim), fused, ref,
                    {torch::randn({rows, dim}, d) * 3, torch::randn({dim}, d) * 0.1}, dtype, limit);
        }
        // q read in place from [tokens, heads, q | gate]: rows with a stride of twice their length
        auto strided = [](const std::vector<torch::Tensor>& v) { return v[0].view({-1, 8, 64}).narrow(2, 0, 32); };
        compare(
            r, "rms_norm strided rows", [&](const auto& v) { return fused::rmsNorm(strided(v), v[1], 1e-6); },
            [&](const auto& v) { auto x = strided(v); return x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-6) * (1 + v[1]); },
            {torch::randn({333, 8 * 64}, d), torch::randn({32}, d)}, dtype, limit);
        for (int64_t dim : {128, 96}) {
            auto ref = [](const std::vector<torch::Tensor>& v) {
                return v[0] * torch::rsqrt(v[0].pow(2).mean(-1, true) + 1e-6) * v[2] * F::silu(v[1]);
            };
            auto fused = [](const std::vector<torch::Tensor>& v) { return fused::gatedRmsNorm(v[0], v[1], v[2], 1e-6); };
            compare(r, "gated_rms_norm dim " + std::to_string(dim), fused, ref,
                    {torch::randn({2053, dim}, d), torch::randn({2053, dim}, d) * 2, 1 + torch::randn({dim}, d) * 0.1}, dtype, limit);
        }
    }
}

void checkSwigluRotary(Results& r, const torch::Device& d) {
    for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
        const double limit = dtype == torch::kFloat32 ? 1e-5 : 1e-2;
        for (auto shape : std::vector<std::vector<int64_t>>{{1000, 9216}, {7, 13}}) {
            compare(
                r, "swiglu " + std::to_string(shape[0]) + "x" + std::to_string(shape[1]),
                [](const auto& v) { return fused::swiglu(v[0], v[1]); }, [](const auto& v) { return F::silu(v[0]) * v[1]; },
                {torch::randn(shape, d) * 3, torch::randn(shape, d)}, dtype, limit);
        }
        for (auto hd : std::vector<std::pair<int64_t, int64_t>>{{256, 64}, {128, 32}, {64, 64}, {64, 16}, {16, 4}}) {
            const int64_t tokens = 777, heads = 4, dim = hd.first, rot = hd.second;
            const torch::Tensor inv = 1.0 / torch::pow(1e7, torch::arange(0, rot, 2, torch::kFloat32) / double(rot)).to(d);
            const torch::Tensor pos = torch::randint(0, 8192, {tokens}, torch::dtype(torch::kInt64).device(d));
            auto ref = [&](const std::vector<torch::Tensor>& v) {
                const torch::Tensor f = pos.to(torch::kFloat32).unsqueeze(-1) * inv, c = f.cos().unsqueeze(1), s = f.sin().unsqueeze(1);
                const torch::Tensor x = v[0], a = x.narrow(2, 0, rot / 2), b = x.narrow(2, rot / 2, rot / 2);
                return torch::cat({a * c - b * s, b * c + a * s, x.narrow(2, rot, dim - rot)}, 2);
            };
            compare(
                r, "rotary head " + std::to_string(dim) + " rot " + std::to_string(rot),
                [&](const auto& v) { return fused::rotary(v[0], pos, inv); }, ref, {torch::randn({tokens, heads, dim}, d)}, dtype,
                limit);
        }
    }
}

} // namespace

// The residual add inside the norm (on the CPU its reference operators, so there the autograd
// function's handling of an unused output is what is checked).
void runAddNormChecks(Results& r, const torch::Device& d) {
    for (auto dtype : {torch::kFloat32, torch::kBFloat16}) checkAddNorm(r, d, dtype, dtype == torch::kFloat32 ? 1e-5 : 1e-2);
}

// Projections of one input against separate linears: outputs, x's gradient and every weight's
// (libtorch alone, so on any device).
void runSharedLinearChecks(Results& r, const torch::Device& d) {
    for (auto dtype : {torch::kFloat32, torch::kBFloat16})
        for (auto shape : std::vector<std::vector<int64_t>>{{300, 48}, {2, 150, 48}}) {
            compare(
                r, "shared-input linear x" + std::to_string(shape.size()) + "d, 3 weights",
                [](const auto& v) { return torch::cat(fused::sharedInputLinear(v[0], {v[1], v[2], v[3]}), -1); },
                [](const auto& v) { return torch::cat({F::linear(v[0], v[1]), F::linear(v[0], v[2]), F::linear(v[0], v[3])}, -1); },
                {torch::randn(shape, d), torch::randn({64, 48}, d), torch::randn({16, 48}, d), torch::randn({8, 48}, d)}, dtype,
                dtype == torch::kFloat32 ? 1e-5 : 1e-2);
        }
}

namespace {

torch::Tensor convReference(const torch::Tensor& x, const torch::Tensor& w, const std::vector<int32_t>& cu) {
    const int64_t taps = w.size(1), channels = w.size(0);
    return perSegment(cu, [&](int64_t at, int64_t len) {
        const torch::Tensor seg = x.narrow(0, at, len).t().unsqueeze(0); // [1, C, L]
        const torch::Tensor y = F::conv1d(seg, w.unsqueeze(1), F::Conv1dFuncOptions().padding(taps - 1).groups(channels));
        return F::silu(y.index({"...", Slice(0, len)})).squeeze(0).t();
    });
}

void checkConv(Results& r, const torch::Device& d) {
    for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
        const double limit = dtype == torch::kFloat32 ? 1e-5 : 1e-2;
        for (const auto& lengths : kSegmentSets) {
            for (auto [channels, taps] : std::vector<std::pair<int64_t, int64_t>>{{8192, 4}, {37, 3}, {130, 2}}) {
                const std::vector<int32_t> cu = offsetsOf(lengths);
                const torch::Tensor seq = seqIdx(cu, d);
                compare(
                    r, "causal_conv1d " + std::to_string(cu.back()) + " tokens, " + std::to_string(lengths.size()) + " seqs, C " + std::to_string(channels) + " K " + std::to_string(taps),
                    [&](const auto& v) { return fused::causalConv1dSilu(v[0], v[1], seq); },
                    [&](const auto& v) { return convReference(v[0], v[1], cu); },
                    {torch::randn({cu.back(), channels}, d), torch::randn({channels, taps}, d) * 0.5}, dtype, limit);
            }
        }
    }
    const std::vector<int32_t> cu = offsetsOf({65, 1, 64, 100});
    const torch::Tensor w = torch::randn({256, 4}, d).to(torch::kBFloat16), x = torch::randn({cu.back(), 256}, d).to(torch::kBFloat16);
    const torch::Tensor seq = seqIdx(cu, d);
    const Fn conv = [&](const std::vector<torch::Tensor>& v) { return fused::causalConv1dSilu(v[0], w, seq); };
    for (size_t s = 1; s + 1 < cu.size(); ++s)
        r.expectTrue("causal_conv1d: no gradient crosses the boundary at " + std::to_string(cu[s]),
                     leakBefore(conv, x, cu[s], cu[s + 1]) == 0.0, "exact zero before the segment");
    const torch::Tensor joined = fused::causalConv1dSilu(x, w, torch::zeros_like(seq));
    r.expectLarge("causal_conv1d without boundaries vs per-sequence", relError(joined, convReference(x.to(torch::kFloat32), w.to(torch::kFloat32), cu)), 1e-2);
}

void checkCrossEntropy(Results& r, const torch::Device& d) {
    for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
        const double limit = dtype == torch::kFloat32 ? 1e-4 : 1e-2;
        for (auto [tokens, vocab, dim, chunk] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{
                 {1000, 248320, 256, 384}, {333, 5001, 64, 1000}, {2048, 32000, 2560, 512}}) {
            torch::Tensor target = torch::randint(0, vocab, {tokens}, torch::dtype(torch::kInt64).device(d));
            target.masked_fill_(torch::rand({tokens}, d) < 0.3, -100); // ignored positions
            const int64_t kept = (target != -100).sum().item<int64_t>();
            auto ref = [&](const std::vector<torch::Tensor>& v) {
                return F::cross_entropy(v[0].matmul(v[1].t()), target, F::CrossEntropyFuncOptions().ignore_index(-100));
            };
            compare(
                r, "linear_cross_entropy " + std::to_string(tokens) + "x" + std::to_string(vocab) + " dim " + std::to_string(dim),
                [&](const auto& v) { return fused::linearCrossEntropy(v[0], v[1], target, kept, chunk); }, ref,
                {torch::randn({tokens, dim}, d), torch::randn({vocab, dim}, d) * 0.05}, dtype, limit);
        }
    }
}

torch::Tensor attentionReference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const std::vector<int32_t>& cu,
                                 double scale) {
    const int64_t groups = q.size(1) / k.size(1);
    return perSegment(cu, [&](int64_t at, int64_t len) {
        auto heads = [&](const torch::Tensor& x, int64_t rep) { return x.narrow(0, at, len).transpose(0, 1).repeat_interleave(rep, 0); };
        const torch::Tensor o = at::scaled_dot_product_attention(heads(q, 1), heads(k, groups), heads(v, groups), {}, 0.0, true, scale);
        return o.transpose(0, 1);
    });
}

void checkAttention(Results& r, const torch::Device& d) {
    for (auto [heads, kv, dim] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{8, 2, 64}, {4, 2, 16}}) {
        const std::vector<int32_t> cu = offsetsOf({130, 1, 64, 83});
        const torch::Tensor cu_t = torch::tensor(cu, torch::kInt32).to(d);
        const double scale = 1.0 / std::sqrt(double(dim));
        compare(
            r, "flash attention varlen 278 tokens, GQA " + std::to_string(heads) + "/" + std::to_string(kv) + " x " + std::to_string(dim),
            [&](const auto& v) { return fused::flashAttention(v[0], v[1], v[2], cu_t, 130, scale); },
            [&](const auto& v) { return attentionReference(v[0], v[1], v[2], cu, scale); },
            {torch::randn({cu.back(), heads, dim}, d), torch::randn({cu.back(), kv, dim}, d), torch::randn({cu.back(), kv, dim}, d)},
            torch::kBFloat16, 1e-2);
    }
    for (const auto& lengths : kSegmentSets) {
        const std::vector<int32_t> cu = offsetsOf(lengths);
        const torch::Tensor cu_t = torch::tensor(cu, torch::kInt32).to(d);
        const int64_t n = cu.back(), max_len = *std::max_element(lengths.begin(), lengths.end());
        const double scale = 1.0 / 16.0;
        compare(
            r, "flash attention varlen " + std::to_string(n) + " tokens, " + std::to_string(lengths.size()) + " seqs, GQA 16/4 x 256",
            [&](const auto& v) { return fused::flashAttention(v[0], v[1], v[2], cu_t, max_len, scale); },
            [&](const auto& v) { return attentionReference(v[0], v[1], v[2], cu, scale); },
            {torch::randn({n, 16, 256}, d), torch::randn({n, 4, 256}, d), torch::randn({n, 4, 256}, d)}, torch::kBFloat16, 1e-2);
    }
    const std::vector<int32_t> cu = offsetsOf({70, 1, 64});
    const torch::Tensor cu_t = torch::tensor(cu, torch::kInt32).to(d);
    const torch::Tensor k = torch::randn({cu.back(), 2, 128}, d).to(torch::kBFloat16), v = torch::randn_like(k);
    const torch::Tensor q = torch::randn({cu.back(), 4, 128}, d).to(torch::kBFloat16);
    for (size_t s = 1; s + 1 < cu.size(); ++s)
        r.expectTrue("flash attention: no gradient crosses the boundary at " + std::to_string(cu[s]),
                     leakBefore([&](const auto& x) { return fused::flashAttention(q, x[0], v, cu_t, 70, 0.1); }, k, cu[s], cu[s + 1]) == 0.0,
                     "exact zero for earlier keys");
    const torch::Tensor whole = torch::tensor(std::vector<int32_t>{0, cu.back()}, torch::kInt32).to(d);
    r.expectLarge("attention without boundaries vs per-sequence",
                  relError(fused::flashAttention(q, k, v, whole, cu.back(), 0.1), attentionReference(q.to(torch::kFloat32), k.to(torch::kFloat32), v.to(torch::kFloat32), cu, 0.1)), 1e-2);
}

} // namespace

void runKernelChecks(Results& r, const torch::Device& d) {
    fused::loadKernels();
    torch::manual_seed(1234);
    checkNorms(r, d);
    checkSwigluRotary(r, d);
    checkConv(r, d);
    checkCrossEntropy(r, d);
    checkAttention(r, d);
}

} // namespace sightline::trainer::checks
