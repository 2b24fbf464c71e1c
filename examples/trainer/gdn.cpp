#include "gdn.h"

#include "device.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace sightline::trainer {

namespace F = torch::nn::functional;
using torch::indexing::Slice;

namespace {

torch::Tensor l2normalize(const torch::Tensor& x) { return x * torch::rsqrt((x * x).sum(-1, true) + 1e-6); }

// The intra-chunk work of the WY form, for chunks laid out [..., n, C, d] (any leading dims): each
// chunk's u and w (the pseudo-values and the state's read-out weights), its masked and decayed
// scores, the decays from its start and to its end.
struct ChunkTerms {
    torch::Tensor u, w, scores, q_decayed, k_to_end, last;
};

ChunkTerms chunkTerms(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& g,
                      const torch::Tensor& beta) {
    const int64_t chunk = q.size(-2);
    const auto opts = torch::dtype(torch::kFloat32).device(q.device());
    const torch::Tensor kb = k * beta.unsqueeze(-1), vb = v * beta.unsqueeze(-1);
    const torch::Tensor gamma = g.cumsum(-1); // log decay from the chunk's start
    // decay[i][j] = exp(gamma_i - gamma_j) for j <= i, 0 above the diagonal.
    const torch::Tensor above = torch::ones({chunk, chunk}, opts.dtype(torch::kBool)).triu(1);
    const torch::Tensor decay = (gamma.unsqueeze(-1) - gamma.unsqueeze(-2)).masked_fill(above, -INFINITY).exp();
    // T = (I + strictly_lower(beta K K^T . decay))^-1, applied by two unit-triangular solves.
    const torch::Tensor system = (kb.matmul(k.transpose(-1, -2)) * decay).tril(-1) + torch::eye(chunk, opts);
    ChunkTerms t;
    t.u = torch::linalg_solve_triangular(system, vb, false, true, true);
    t.w = torch::linalg_solve_triangular(system, kb * gamma.exp().unsqueeze(-1), false, true, true);
    t.scores = q.matmul(k.transpose(-1, -2)) * decay; // within the chunk, diagonal included
    t.q_decayed = q * gamma.exp().unsqueeze(-1);
    t.last = gamma.index({"...", Slice(-1, torch::indexing::None)});
    t.k_to_end = k * (t.last - gamma).exp().unsqueeze(-1);
    return t;
}

} // namespace

torch::Tensor chunkGatedDeltaRule(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor g, torch::Tensor beta,
                                  int64_t chunk) {
    const auto dtype = q.scalar_type();
    const int64_t b = q.size(0), t = q.size(1), h = q.size(2), dk = q.size(3), dv = v.size(3);
    // [B, H, T, ...] in fp32.
    auto prep = [](const torch::Tensor& x) { return x.transpose(1, 2).to(torch::kFloat32).contiguous(); };
    q = l2normalize(prep(q)) / std::sqrt(double(dk));
    k = l2normalize(prep(k));
    v = prep(v);
    beta = prep(beta);
    g = prep(g);
    const int64_t pad = (chunk - t % chunk) % chunk, n = (t + pad) / chunk;
    if (pad) { // padded steps neither decay (g = 0) nor write (beta = 0)
        q = F::pad(q, F::PadFuncOptions({0, 0, 0, pad}));
        k = F::pad(k, F::PadFuncOptions({0, 0, 0, pad}));
        v = F::pad(v, F::PadFuncOptions({0, 0, 0, pad}));
        beta = F::pad(beta, F::PadFuncOptions({0, pad}));
        g = F::pad(g, F::PadFuncOptions({0, pad}));
    }
    // Per chunk: [B, H, n, C, d].
    auto chunks = [&](const torch::Tensor& x) { return x.reshape({b, h, n, chunk, x.size(-1)}); };
    const ChunkTerms c = chunkTerms(chunks(q), chunks(k), chunks(v), g.reshape({b, h, n, chunk}), beta.reshape({b, h, n, chunk}));
    torch::Tensor state = torch::zeros({b, h, dk, dv}, q.options());
    std::vector<torch::Tensor> out;
    out.reserve(size_t(n));
    for (int64_t i = 0; i < n; ++i) {
        const torch::Tensor v_new = c.u.select(2, i) - c.w.select(2, i).matmul(state);
        out.push_back(c.q_decayed.select(2, i).matmul(state) + c.scores.select(2, i).matmul(v_new));
        state = state * c.last.select(2, i).exp().unsqueeze(-1) + c.k_to_end.select(2, i).transpose(-1, -2).matmul(v_new);
    }
    const torch::Tensor o = torch::stack(out, 2).reshape({b, h, n * chunk, dv}).index({Slice(), Slice(), Slice(0, t)});
    return o.transpose(1, 2).contiguous().to(dtype);
}

ChunkPlan planChunks(const std::vector<int32_t>& cu, int64_t chunk, const torch::Device& device) {
    ChunkPlan p;
    p.chunk = chunk;
    p.segments = int64_t(cu.size()) - 1;
    p.tokens = cu.empty() ? 0 : cu.back();
    std::vector<int64_t> count(size_t(std::max<int64_t>(p.segments, 0)));
    for (int64_t s = 0; s < p.segments; ++s) count[size_t(s)] = (cu[size_t(s) + 1] - cu[size_t(s)] + chunk - 1) / chunk;
    std::vector<int64_t> order(count.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return count[size_t(a)] > count[size_t(b)]; });
    std::vector<int32_t> chunk_offsets{0};
    for (int64_t c : count) chunk_offsets.push_back(chunk_offsets.back() + int32_t(c));
    p.cu_seqlens = toDevice(cu, device);
    p.chunk_offsets = toDevice(chunk_offsets, device);
    std::vector<int64_t> gather, scatter(size_t(p.tokens));
    for (int64_t j = 0; !order.empty() && j < count[size_t(order[0])]; ++j) {
        p.step_offset.push_back(p.chunks);
        for (int64_t s : order) {
            if (count[size_t(s)] <= j) break; // the order is by chunk count, longest first
            for (int64_t i = 0; i < chunk; ++i) {
                const int64_t tok = cu[size_t(s)] + j * chunk + i;
                const bool inside = tok < cu[size_t(s) + 1];
                if (inside) scatter[size_t(tok)] = int64_t(gather.size());
                gather.push_back(inside ? tok : p.tokens);
            }
            ++p.chunks;
        }
        p.step_count.push_back(p.chunks - p.step_offset.back());
    }
    p.gather = toDevice(gather, device);
    p.scatter = toDevice(scatter, device);
    return p;
}

namespace {

// [T, H, d] -> [H, chunks, C, d] by the plan's slots, zeros past each segment's end.
torch::Tensor toChunks(const torch::Tensor& x, const ChunkPlan& p) {
    const torch::Tensor padded = torch::cat({x, torch::zeros({1, x.size(1), x.size(2)}, x.options())}, 0);
    return padded.index_select(0, p.gather).view({p.chunks, p.chunk, x.size(1), x.size(2)}).permute({2, 0, 1, 3});
}

} // namespace

torch::Tensor chunkParallelGatedDeltaRule(const torch::Tensor& q_in, const torch::Tensor& k_in, const torch::Tensor& v_in,
                                          const torch::Tensor& g_in, const torch::Tensor& beta_in, const ChunkPlan& p) {
    const int64_t hk = q_in.size(1), hv = v_in.size(1), dk = q_in.size(2), dv = v_in.size(2), groups = hv / hk;
    TORCH_CHECK(hv % hk == 0, "gated delta rule: value heads must be a multiple of key heads");
    TORCH_CHECK(q_in.size(0) == p.tokens, "gated delta rule: the chunk plan is for another batch");
    const torch::Tensor q = l2normalize(q_in.to(torch::kFloat32)) / std::sqrt(double(dk));
    const torch::Tensor k = l2normalize(k_in.to(torch::kFloat32));
    const torch::Tensor qc = toChunks(q, p).repeat_interleave(groups, 0), kc = toChunks(k, p).repeat_interleave(groups, 0);
    const torch::Tensor vc = toChunks(v_in.to(torch::kFloat32), p);
    const torch::Tensor gc = toChunks(g_in.to(torch::kFloat32).unsqueeze(-1), p).squeeze(-1);
    const torch::Tensor bc = toChunks(beta_in.to(torch::kFloat32).unsqueeze(-1), p).squeeze(-1);
    const ChunkTerms c = chunkTerms(qc, kc, vc, gc, bc); // [Hv, chunks, C, ...]
    const int64_t first = p.step_count.empty() ? 0 : p.step_count[0];
    torch::Tensor state = torch::zeros({hv, first, dk, dv}, q.options());
    // Each term cut once into its steps' chunks: one split a term, whose backward is one join (a
    // slice taken each step would add a full-size gradient each step).
    auto steps = [&](const torch::Tensor& x) { return x.split_with_sizes(p.step_count, 1); };
    const auto u = steps(c.u), w = steps(c.w), qd = steps(c.q_decayed), scores = steps(c.scores), kend = steps(c.k_to_end);
    const auto decay = steps(c.last.exp().unsqueeze(-1));
    std::vector<torch::Tensor> out;
    for (size_t j = 0; j < p.step_count.size(); ++j) {
        state = state.narrow(1, 0, p.step_count[j]); // the segments still going are the first ones
        const torch::Tensor v_new = u[j] - w[j].matmul(state);
        out.push_back(qd[j].matmul(state) + scores[j].matmul(v_new));
        state = state * decay[j] + kend[j].transpose(-1, -2).matmul(v_new);
    }
    const torch::Tensor o = torch::cat(out, 1).permute({1, 2, 0, 3}).reshape({p.chunks * p.chunk, hv, dv});
    return o.index_select(0, p.scatter).to(v_in.scalar_type());
}

void savePlan(torch::autograd::AutogradContext* ctx, const ChunkPlan& plan) {
    ctx->saved_data["sizes"] = std::vector<int64_t>{plan.chunk, plan.tokens, plan.chunks, plan.segments};
    ctx->saved_data["step_offset"] = plan.step_offset;
    ctx->saved_data["step_count"] = plan.step_count;
}

ChunkPlan loadPlan(torch::autograd::AutogradContext* ctx, const torch::Tensor& gather, const torch::Tensor& scatter) {
    ChunkPlan plan;
    const auto sizes = ctx->saved_data["sizes"].toIntVector();
    plan.chunk = sizes[0];
    plan.tokens = sizes[1];
    plan.chunks = sizes[2];
    plan.segments = sizes[3];
    plan.step_offset = ctx->saved_data["step_offset"].toIntVector();
    plan.step_count = ctx->saved_data["step_count"].toIntVector();
    plan.gather = gather;
    plan.scatter = scatter;
    return plan;
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Keeps only the inputs and the plan; the backward runs the rule again with gradients on.
struct RecomputedRuleFn : torch::autograd::Function<RecomputedRuleFn> {
    static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                 const torch::Tensor& g, const torch::Tensor& beta, const ChunkPlan& plan) {
        ctx->save_for_backward({q, k, v, g, beta, plan.gather, plan.scatter});
        savePlan(ctx, plan);
        return chunkParallelGatedDeltaRule(q, k, v, g, beta, plan);
    }
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        const auto s = ctx->get_saved_variables();
        const ChunkPlan plan = loadPlan(ctx, s[5], s[6]);
        std::vector<torch::Tensor> inputs;
        for (size_t i = 0; i < 5; ++i) inputs.push_back(s[i].detach().requires_grad_(s[i].is_floating_point()));
        torch::Tensor out;
        {
            torch::AutoGradMode on(true);
            out = chunkParallelGatedDeltaRule(inputs[0], inputs[1], inputs[2], inputs[3], inputs[4], plan);
        }
        tensor_list result = torch::autograd::grad({out}, inputs, {grads[0]});
        result.push_back(torch::Tensor()); // the plan
        return result;
    }
};

} // namespace

torch::Tensor recomputedGatedDeltaRule(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& g,
                                       const torch::Tensor& beta, const ChunkPlan& plan) {
    return RecomputedRuleFn::apply(q, k, v, g, beta, plan);
}

const char* toString(GdnRule rule) { return rule == GdnRule::Kernels ? "kernels" : "libtorch"; }

} // namespace sightline::trainer
