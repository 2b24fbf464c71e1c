// The gated delta rule's kernels run on the CPU (kernels/gdn_bodies.h): each block body thread by
// thread, phase by phase, as the CPU implementation of the `sightline::gdn_fwd` and
// `sightline::gdn_bwd` operators. Slow, and not for training: it is there so that the CPU tests
// execute the CUDA kernels' own indexing and arithmetic against the libtorch rules.
#include "kernels/gdn_op.h"

#include <ATen/Parallel.h>
#include <torch/library.h>

#include <vector>

namespace sightline::trainer {

namespace {

using namespace sightline::gdn;

// Runs body(block, item, smem) for items [0, count), in parallel over items, each with its own
// shared memory of `floats` and a block of its own (no staged copy left over from the one before).
template <class Body>
void grid(int64_t count, int64_t floats, const Body& body) {
    at::parallel_for(0, count, 1, [&](int64_t from, int64_t to) {
        std::vector<float> smem(static_cast<size_t>(floats));
        for (int64_t i = from; i < to; ++i) {
            HostBlock b;
            body(b, i, smem.data());
        }
    });
}

struct HostRunner {
    static bool pairs(const Params&) { return false; } // no clusters here: each value head adds its share (Params::pair)
    void prep(const Params& p) {
        grid(int64_t(p.chunks) * p.hv, prepFloats(p.dk, p.dv, scratchBytes(p)),
             [&](HostBlock& b, int64_t i, float* s) { prepBody(b, p, int(i % p.chunks), int(i / p.chunks), s); });
    }
    void pass(const Params& p) {
        grid(int64_t(p.segments) * p.hv * passTiles(p), passFloats(p.dk, true, scratchBytes(p)), [&](HostBlock& b, int64_t i, float* s) {
            const PassBlock at = passBlock(i, p.hv, passTiles(p));
            statePassBody(b, p, at.rank, at.h, at.tile, s);
        });
    }
    void output(const Params& p) {
        const int tiles = (p.dv + kOutV - 1) / kOutV;
        grid(int64_t(p.chunks) * p.hv * tiles, outFloats(p.dk, p.bf16_scratch), [&](HostBlock& b, int64_t i, float* s) {
            outputBody(b, p, int(i % p.chunks), int(i / p.chunks % p.hv), int(i / p.chunks / p.hv), s);
        });
    }
    void reverse(const Params& p) {
        grid(int64_t(p.segments) * p.hv * passTiles(p), passFloats(p.dk, false, scratchBytes(p)), [&](HostBlock& b, int64_t i, float* s) {
            const PassBlock at = passBlock(i, p.hv, passTiles(p));
            reversePassBody(b, p, at.rank, at.h, at.tile, s);
        });
    }
    void grads(const Params& p) {
        grid(int64_t(p.chunks) * p.hv, gradFloats(p.dk, p.dv),
             [&](HostBlock& b, int64_t i, float* s) { chunkGradBody(b, p, int(i % p.chunks), int(i / p.chunks), s); });
    }
};

using T = const at::Tensor&;

kernels::GdnForwardResult gdnForwardCpu(T q, T k, T v, T g, T beta, T cu, T off, int64_t chunks, bool keep_states) {
    HostRunner run;
    return gdn::forward(run, q, k, v, g, beta, cu, off, chunks, keep_states);
}

kernels::GdnBackwardResult gdnBackwardCpu(T dout, T q, T k, T v, T g, T beta, T cu, T off,
                                          T states, T inverses, T values, T wy, T scores, T keys, T decays, int64_t chunks) {
    HostRunner run;
    return gdn::backward(run, dout, q, k, v, g, beta, cu, off, states, inverses, values, wy, scores, keys, decays, chunks);
}

} // namespace

// Called from fused_ops.cpp, so that a program linking the model library keeps this file's
// registrations.
void linkGdnKernelCpu() {}

} // namespace sightline::trainer

TORCH_LIBRARY_IMPL(sightline, CPU, m) {
    m.impl("gdn_fwd", &sightline::trainer::gdnForwardCpu);
    m.impl("gdn_bwd", &sightline::trainer::gdnBackwardCpu);
}
