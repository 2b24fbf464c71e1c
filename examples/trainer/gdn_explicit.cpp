// The chunk-parallel gated delta rule with its backward written out (gdn.h): the forward keeps
// only its inputs; the backward recomputes the intra-chunk terms, runs the state pass forward to
// recover each chunk's entering state, then backward for each chunk's state and pseudo-value
// gradients, and finishes every other gradient for all chunks at once. Two short sequential
// loops (two and three matmuls a step, no autograd) where the autograd version records a graph of
// the whole pass; and the arithmetic the CUDA kernel of the rule will do, written where the CPU
// can check it against autograd (tests/trainer/gdn_checks.cpp).
#include "gdn.h"

#include <cmath>

namespace sightline::trainer {

using torch::Tensor;
using torch::indexing::Slice;

namespace {

// Per chunk, [H, chunks, C, ...] (q scaled and q, k L2-normalised, padding slots zero):
struct Chunked {
    Tensor q, k, v, beta, gamma; // inputs; gamma = cumsum of the log decays within the chunk
    Tensor decay;                // exp(gamma_i - gamma_j) for j <= i, else 0
    Tensor t;                    // (I + strictly_lower(beta K K^T . decay))^-1
    Tensor u, w;                 // T (beta V), T (beta exp(gamma) K)
    Tensor p;                    // Q K^T . decay (lower, diagonal included)
    Tensor qd, kend, a;          // exp(gamma) Q, exp(gamma_L - gamma) K, exp(gamma_L) [H, chunks, 1, 1]
};

// [T, H, d] -> [H, chunks, C, d] by the plan's slots, zeros past each segment's end.
Tensor gatherChunks(const Tensor& x, const ChunkPlan& p) {
    const Tensor padded = torch::cat({x, torch::zeros({1, x.size(1), x.size(2)}, x.options())}, 0);
    return padded.index_select(0, p.gather).view({p.chunks, p.chunk, x.size(1), x.size(2)}).permute({2, 0, 1, 3});
}

// The inverse: [H, chunks, C, d] -> [T, H, d], summing what several slots give one token (none do:
// each token has one slot) and dropping the padding slots.
Tensor scatterChunks(const Tensor& x, const ChunkPlan& p) {
    return x.permute({1, 2, 0, 3}).reshape({p.chunks * p.chunk, x.size(0), x.size(3)}).index_select(0, p.scatter);
}

Tensor l2norm(const Tensor& x) { return x * torch::rsqrt((x * x).sum(-1, true) + 1e-6); }
// Gradient of y = l2norm(x) given dy.
Tensor l2normGrad(const Tensor& x, const Tensor& dy) {
    const Tensor r = torch::rsqrt((x * x).sum(-1, true) + 1e-6), y = x * r;
    return r * (dy - y * (y * dy).sum(-1, true));
}

Chunked chunked(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& g_in, const Tensor& beta_in,
                const ChunkPlan& plan) {
    const int64_t groups = v_in.size(1) / q_in.size(1), dk = q_in.size(2), c = plan.chunk;
    Chunked x;
    x.q = gatherChunks(l2norm(q_in.to(torch::kFloat32)) / std::sqrt(double(dk)), plan).repeat_interleave(groups, 0);
    x.k = gatherChunks(l2norm(k_in.to(torch::kFloat32)), plan).repeat_interleave(groups, 0);
    x.v = gatherChunks(v_in.to(torch::kFloat32), plan);
    x.beta = gatherChunks(beta_in.to(torch::kFloat32).unsqueeze(-1), plan).squeeze(-1);
    x.gamma = gatherChunks(g_in.to(torch::kFloat32).unsqueeze(-1), plan).squeeze(-1).cumsum(-1);
    const auto opts = x.q.options();
    const Tensor above = torch::ones({c, c}, opts.dtype(torch::kBool)).triu(1);
    x.decay = (x.gamma.unsqueeze(-1) - x.gamma.unsqueeze(-2)).masked_fill(above, -INFINITY).exp();
    const Tensor kb = x.k * x.beta.unsqueeze(-1);
    const Tensor system = (kb.matmul(x.k.transpose(-1, -2)) * x.decay).tril(-1) + torch::eye(c, opts);
    x.t = torch::linalg_solve_triangular(system, torch::eye(c, opts).expand_as(system), false, true, true);
    const Tensor eg = x.gamma.exp().unsqueeze(-1);
    x.u = x.t.matmul(x.v * x.beta.unsqueeze(-1));
    x.w = x.t.matmul(kb * eg);
    x.p = x.q.matmul(x.k.transpose(-1, -2)) * x.decay;
    x.qd = x.q * eg;
    const Tensor last = x.gamma.index({"...", Slice(-1, torch::indexing::None)}); // [H, chunks, 1]
    x.kend = x.k * (last - x.gamma).exp().unsqueeze(-1);
    x.a = last.exp().unsqueeze(-1);
    return x;
}

// The forward state pass: each chunk's entering state S_c and pseudo-values v_new_c.
std::pair<Tensor, Tensor> statePass(const Chunked& x, const ChunkPlan& plan) {
    const auto steps = [&](const Tensor& t) { return t.split_with_sizes(plan.step_count, 1); };
    const auto u = steps(x.u), w = steps(x.w), kend = steps(x.kend), a = steps(x.a);
    const int64_t h = x.q.size(0), dk = x.k.size(-1), dv = x.v.size(-1);
    Tensor state = torch::zeros({h, plan.step_count.empty() ? 0 : plan.step_count[0], dk, dv}, x.q.options());
    std::vector<Tensor> states, values;
    for (size_t j = 0; j < plan.step_count.size(); ++j) {
        state = state.narrow(1, 0, plan.step_count[j]); // the segments still going are the first ones
        states.push_back(state);
        values.push_back(u[j] - w[j].matmul(state));
        state = state * a[j] + kend[j].transpose(-1, -2).matmul(values.back());
    }
    return {torch::cat(states, 1), torch::cat(values, 1)};
}

// The backward state pass: each chunk's pseudo-value gradient and the gradient of the state it
// leaves (the next chunk's entering state's), from the output's gradient.
std::pair<Tensor, Tensor> reverseStatePass(const Chunked& x, const Tensor& d_out, const ChunkPlan& plan) {
    const auto steps = [&](const Tensor& t) { return t.split_with_sizes(plan.step_count, 1); };
    const auto p = steps(x.p), w = steps(x.w), kend = steps(x.kend), qd = steps(x.qd), a = steps(x.a), dout = steps(d_out);
    const int64_t h = x.q.size(0), dk = x.k.size(-1), dv = x.v.size(-1), n = int64_t(plan.step_count.size());
    std::vector<Tensor> d_values(static_cast<size_t>(n)), d_leaving(static_cast<size_t>(n));
    Tensor ds = torch::zeros({h, 0, dk, dv}, x.q.options()); // the gradient of the states leaving the last step
    for (int64_t j = n - 1; j >= 0; --j) {
        const int64_t live = plan.step_count[size_t(j)];
        // segments that end at this step have no later gradient: zeros for them
        ds = torch::cat({ds, torch::zeros({h, live - ds.size(1), dk, dv}, ds.options())}, 1);
        d_leaving[size_t(j)] = ds;
        const Tensor dvn = p[j].transpose(-1, -2).matmul(dout[j]) + kend[j].matmul(ds);
        d_values[size_t(j)] = dvn;
        ds = ds * a[j] + qd[j].transpose(-1, -2).matmul(dout[j]) - w[j].transpose(-1, -2).matmul(dvn);
    }
    return {torch::cat(d_values, 1), torch::cat(d_leaving, 1)};
}

// d(gamma) from a term X . exp(gamma_i - gamma_j) (masked): row sums in, column sums out.
Tensor decayGrad(const Tensor& g) { return g.sum(-1) - g.sum(-2); }

struct Grads {
    Tensor q, k, v, beta, gamma; // per chunk, as Chunked's inputs
};

Grads chunkGrads(const Chunked& x, const Tensor& d_out, const Tensor& states, const Tensor& values, const Tensor& d_values,
                 const Tensor& d_leaving) {
    Grads d;
    const Tensor eg = x.gamma.exp().unsqueeze(-1), beta = x.beta.unsqueeze(-1);
    const Tensor last_gap = (x.gamma.index({"...", Slice(-1, torch::indexing::None)}) - x.gamma).exp().unsqueeze(-1);
    // O = Qd S + P Vn; S' = a S + Kend^T Vn; Vn = U - W S
    const Tensor d_qd = d_out.matmul(states.transpose(-1, -2));
    const Tensor d_p = (d_out.matmul(values.transpose(-1, -2))).tril();
    const Tensor d_w = -d_values.matmul(states.transpose(-1, -2));
    const Tensor d_kend = values.matmul(d_leaving.transpose(-1, -2));
    const Tensor d_a = (states * d_leaving).sum({-1, -2});
    // U = T (beta V), W = T (beta exp(gamma) K), T = (I + A)^-1
    const Tensor bk = x.k * beta * eg, bv = x.v * beta;
    const Tensor tt = x.t.transpose(-1, -2);
    const Tensor d_bv = tt.matmul(d_values), d_bk = tt.matmul(d_w);
    const Tensor d_t = d_values.matmul(bv.transpose(-1, -2)) + d_w.matmul(bk.transpose(-1, -2));
    const Tensor d_a_mat = (-tt.matmul(d_t).matmul(tt)).tril(-1);
    // A = strictly_lower(beta K K^T . decay), P = Q K^T . decay
    const Tensor kb = x.k * beta;
    const Tensor n_a = d_a_mat * x.decay, n_p = d_p * x.decay;
    d.q = n_p.matmul(x.k) + d_qd * eg;
    d.k = n_p.transpose(-1, -2).matmul(x.q) + n_a.transpose(-1, -2).matmul(kb) + beta * n_a.matmul(x.k) + d_kend * last_gap +
        d_bk * beta * eg;
    d.v = d_bv * beta;
    d.beta = (n_a.matmul(x.k) * x.k).sum(-1) + (d_bv * x.v).sum(-1) + (d_bk * x.k * eg).sum(-1);
    // gamma: through the decays of A and P, exp(gamma) in Qd and W's input, the gaps to the chunk's end
    Tensor dg = decayGrad(d_a_mat * x.decay * (kb.matmul(x.k.transpose(-1, -2)))) + decayGrad(d_p * x.p) + (d_qd * x.qd).sum(-1) +
        (d_bk * bk).sum(-1);
    const Tensor to_end = (d_kend * x.kend).sum(-1); // d/d(gamma_i) of exp(gamma_L - gamma_i): minus; of gamma_L: plus
    dg = dg - to_end;
    Tensor d_last = to_end.sum(-1) + d_a * x.a.squeeze(-1).squeeze(-1);
    dg.select(-1, dg.size(-1) - 1).add_(d_last);
    d.gamma = dg;
    return d;
}

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

struct ExplicitRuleFn : torch::autograd::Function<ExplicitRuleFn> {
    static Tensor forward(AutogradContext* ctx, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                          const ChunkPlan& plan) {
        ctx->save_for_backward({q, k, v, g, beta, plan.gather, plan.scatter});
        savePlan(ctx, plan);
        const Chunked x = chunked(q, k, v, g, beta, plan);
        const auto [states, values] = statePass(x, plan);
        return scatterChunks(x.qd.matmul(states) + x.p.matmul(values), plan).to(v.scalar_type());
    }

    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        const auto s = ctx->get_saved_variables();
        const ChunkPlan plan = loadPlan(ctx, s[5], s[6]);
        const Tensor &q = s[0], &k = s[1], &v = s[2];
        const Chunked x = chunked(q, k, v, s[3], s[4], plan);
        const auto [states, values] = statePass(x, plan);
        const Tensor d_out = gatherChunks(grads[0].to(torch::kFloat32), plan);
        const auto [d_values, d_leaving] = reverseStatePass(x, d_out, plan);
        const Grads d = chunkGrads(x, d_out, states, values, d_values, d_leaving);
        const int64_t hk = q.size(1), groups = v.size(1) / hk, dk = q.size(2);
        // value heads back to their key heads, slots back to tokens, then through the L2 norms
        auto perKeyHead = [&](const Tensor& t) { return scatterChunks(t.view({hk, groups, t.size(1), t.size(2), t.size(3)}).sum(1), plan); };
        const Tensor dq = l2normGrad(q.to(torch::kFloat32), perKeyHead(d.q) / std::sqrt(double(dk)));
        const Tensor dk_ = l2normGrad(k.to(torch::kFloat32), perKeyHead(d.k));
        const Tensor dg = d.gamma.flip(-1).cumsum(-1).flip(-1); // gamma = cumsum(g) within the chunk
        auto perToken = [&](const Tensor& t) { return scatterChunks(t.unsqueeze(-1), plan).squeeze(-1); };
        return {dq.to(q.scalar_type()), dk_.to(k.scalar_type()), scatterChunks(d.v, plan).to(v.scalar_type()),
                perToken(dg).to(s[3].scalar_type()), perToken(d.beta).to(s[4].scalar_type()), Tensor()};
    }
};

} // namespace

Tensor explicitGatedDeltaRule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                              const ChunkPlan& plan) {
    return ExplicitRuleFn::apply(q, k, v, g, beta, plan);
}

} // namespace sightline::trainer
