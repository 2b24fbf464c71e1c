// `sightline-trainer-checks --device cuda --only gdn-bench`: one Gated DeltaNet layer's delta rule
// on the benchmark config's heads (16 key / 32 value heads of 128, bf16 q, k, v; fp32 g, beta),
// the trainer's kernels (tensor cores, and plain) against the chunk-parallel libtorch rule, forward and forward+backward, at
// 8,192 tokens in three packings. Prints one line a case and implementation (milliseconds, and
// TFLOP/s from the rule's nominal matmul FLOPs: per 64-token chunk and value head
// 2 (3 C^2 dk + 2 C^2 dv + 3 C dk dv), forward+backward counted as three times the forward), then
// the ratio. Each time is the median of GDN_BENCH_ROUNDS rounds (3) of ten calls after five
// warm-up calls, the rounds printed too (fwd_rounds, fwdbwd_rounds), so that a comparison shows
// their spread. The GPU check script (tests/gpu/gdn_kernel_checks.sh) reads these lines.
#include "fused_ops.h"
#include "gdn.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace sightline::trainer::checks {

namespace {

// The rounds' times (ms a call) and their median.
struct Timing {
    std::vector<double> rounds;
    double median() const {
        std::vector<double> sorted = rounds;
        std::sort(sorted.begin(), sorted.end());
        return sorted[sorted.size() / 2];
    }
    std::string text() const {
        std::string s;
        for (double r : rounds) s += (s.empty() ? "" : "/") + std::to_string(r).substr(0, 5);
        return s;
    }
};

Timing timeMs(const torch::Device& d, const std::function<void()>& f) {
    constexpr int kWarmUp = 5, kReps = 10;
    const char* env = std::getenv("GDN_BENCH_ROUNDS");
    const int rounds = env ? std::max(1, std::atoi(env)) : 3;
    const int dev = d.has_index() ? d.index() : -1;
    for (int i = 0; i < kWarmUp; ++i) f(); // allocator, first launches, clocks
    Timing t;
    for (int r = 0; r < rounds; ++r) {
        torch::cuda::synchronize(dev);
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < kReps; ++i) f();
        torch::cuda::synchronize(dev);
        t.rounds.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / kReps);
    }
    return t;
}

double nominalForwardFlops(int64_t chunks, int64_t hv, int64_t dk, int64_t dv) {
    const double c = 64;
    return double(chunks) * double(hv) * 2.0 * (3 * c * c * dk + 2 * c * c * dv + 3 * c * dk * dv);
}

using RuleFn = std::function<torch::Tensor(const std::vector<torch::Tensor>&, const ChunkPlan&)>;

void benchCase(const std::string& name, const std::vector<int32_t>& lengths, const torch::Device& d) {
    std::vector<int32_t> cu{0};
    for (int32_t n : lengths) cu.push_back(cu.back() + n);
    const ChunkPlan plan = planChunks(cu, 64, d);
    const int64_t t = cu.back(), hk = 16, hv = 32, dim = 128;
    const auto bf = torch::dtype(torch::kBFloat16).device(d), f32 = torch::dtype(torch::kFloat32).device(d);
    std::vector<torch::Tensor> in{torch::randn({t, hk, dim}, bf), torch::randn({t, hk, dim}, bf), torch::randn({t, hv, dim}, bf),
                                  -torch::rand({t, hv}, f32) * 0.5, torch::rand({t, hv}, f32)};
    for (auto& x : in) x.requires_grad_(true);
    const torch::Tensor dy = torch::randn({t, hv, dim}, bf);
    const double flops = nominalForwardFlops(plan.chunks, hv, dim, dim);
    const RuleFn kernels = [](const auto& v, const ChunkPlan& p) { return fused::gatedDeltaRule(v[0], v[1], v[2], v[3], v[4], p); };
    const std::vector<std::pair<std::string, RuleFn>> rules{
        {"kernels", kernels},
        {"kernels-plain", kernels},
        {"libtorch", [](const auto& v, const ChunkPlan& p) { return recomputedGatedDeltaRule(v[0], v[1], v[2], v[3], v[4], p); }}};
    double base_fwd = 0, base_both = 0;
    const char* only = std::getenv("GDN_BENCH_ONLY"); // one implementation, e.g. under a profiler
    for (const auto& [impl, rule] : rules) {
        if (only && impl != only) continue;
        // kernels-plain: every product on the CUDA cores in fp32, the tensor cores' share of the speed
        if (impl == "kernels-plain") setenv("SIGHTLINE_GDN_PLAIN", "1", 1);
        else unsetenv("SIGHTLINE_GDN_PLAIN");
        const Timing tf = timeMs(d, [&] {
            torch::NoGradGuard no_grad;
            rule(in, plan);
        });
        const Timing tb = timeMs(d, [&] {
            for (auto& x : in) x.mutable_grad() = torch::Tensor();
            rule(in, plan).backward(dy);
        });
        const double fwd = tf.median(), both = tb.median();
        std::printf("gdn-bench case=%s tokens=%lld segments=%zu impl=%s fwd_ms=%.3f fwdbwd_ms=%.3f fwd_tflops=%.2f fwdbwd_tflops=%.2f "
                    "fwd_rounds=%s fwdbwd_rounds=%s\n",
                    name.c_str(), (long long)t, lengths.size(), impl.c_str(), fwd, both, flops / fwd * 1e-9, 3 * flops / both * 1e-9,
                    tf.text().c_str(), tb.text().c_str());
        if (impl == "kernels") base_fwd = fwd, base_both = both;
        else if (base_both > 0) std::printf("gdn-bench case=%s %s/kernels fwd %.2fx fwdbwd %.2fx\n", name.c_str(), impl.c_str(), fwd / base_fwd, both / base_both);
        std::fflush(stdout);
    }
    unsetenv("SIGHTLINE_GDN_PLAIN");
}

} // namespace

void runGdnBench(const torch::Device& d) {
    torch::manual_seed(3);
    benchCase("1x8192", {8192}, d);
    benchCase("8x1024", std::vector<int32_t>(8, 1024), d);
    benchCase("mixed", {3001, 1500, 1199, 900, 700, 500, 300, 92}, d); // 8,192 tokens, lengths not multiples of 64
}

} // namespace sightline::trainer::checks
