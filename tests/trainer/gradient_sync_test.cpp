// GradientSync (the trainer's bucketed all-reduce) on the CPU, with a stand-in process group: every
// "rank" holds the same gradients, so the all-reduce multiplies by the world size. After the
// synchronised backward of a step's last micro-batch, each parameter's gradient must equal what a
// plain single-process step gives (the mean over micro-batches), the buckets must all be reduced,
// once each, in bucket order, whatever the order backward produced the gradients in.
//
// usage: sightline-test-gradient-sync CONFIG.json   (exit 0 = pass, 1 = fail with the reason)
#include "distributed.h"
#include "model.h"
#include "train.h"

#include <cstdio>

using namespace sightline::trainer;

namespace {

class DoneWork : public c10d::Work {
public:
    bool isCompleted() override { return true; }
    bool wait(std::chrono::milliseconds) override { return true; }
};

// All ranks equal: the sum over `world` ranks is world x the local tensor. Records the calls.
class EqualRanks : public c10d::Backend {
public:
    EqualRanks(int world, std::vector<int64_t>* sizes) : c10d::Backend(0, world), m_sizes(sizes) {}
    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& t, const c10d::AllreduceOptions&) override {
        t[0].mul_(getSize());
        m_sizes->push_back(t[0].numel());
        return c10::make_intrusive<DoneWork>();
    }

private:
    std::vector<int64_t>* m_sizes;
};

int fail(const std::string& why) {
    std::printf("FAIL: %s\n", why.c_str());
    return 1;
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 2) return fail("usage: sightline-test-gradient-sync CONFIG.json");
    const ModelConfig config = loadModelConfig(argv[1]);
    torch::manual_seed(0);
    CausalLM model(config);
    initWeights(model, 0);
    const torch::Tensor ids = torch::randint(0, config.vocab_size, {2, 3, 80});
    const torch::Tensor mask = torch::ones({2, 3, 80}, torch::kInt64);
    auto backward = [&](int micro) { // the loss of one micro-batch, over 2 accumulated
        (shiftedCrossEntropy(model->forward(ids[micro], mask[micro]), ids[micro]) / 2.0).backward();
    };
    // A plain step: both micro-batches accumulated.
    backward(0);
    backward(1);
    std::vector<torch::Tensor> expected;
    for (const auto& p : model->parameters()) expected.push_back(p.grad().clone());
    model->zero_grad(true);

    std::vector<int64_t> sizes;
    const int world = 4;
    GradientSync sync(model->parameters(), c10::make_intrusive<EqualRanks>(world, &sizes), world, /*bucket_bytes=*/16 << 10);
    for (int round = 0; round < 2; ++round) { // twice: the buckets reset between steps
        sizes.clear();
        backward(0);
        sync.arm();
        backward(1);
        sync.finish();
        if (sizes.size() != sync.bucketCount())
            return fail(std::to_string(sizes.size()) + " all-reduces for " + std::to_string(sync.bucketCount()) + " buckets");
        double worst = 0;
        const auto params = model->parameters();
        for (size_t i = 0; i < params.size(); ++i) {
            if (!params[i].grad().defined()) return fail("a parameter has no gradient after finish()");
            worst = std::max(worst, (params[i].grad() - expected[i]).abs().max().item<double>());
        }
        if (worst > 1e-6) return fail("gradients differ from the plain step by " + std::to_string(worst));
        int64_t total = 0;
        for (int64_t n : sizes) total += n;
        int64_t numel = 0;
        for (const auto& p : params) numel += p.numel();
        if (total != numel) return fail("the buckets hold " + std::to_string(total) + " of " + std::to_string(numel) + " elements");
        std::printf("round %d: %zu buckets all-reduced, %lld elements, gradients equal the plain step (max diff %.1e)\n", round + 1,
                    sizes.size(), (long long)total, worst);
        // As the trainer ends a step: an optimizer step on the synchronised gradients, then zero_grad.
        torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(0.0));
        optimizer.step();
        sync.releaseGradients();
        optimizer.zero_grad(true);
    }
    return 0;
}
