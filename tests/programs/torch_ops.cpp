// A libtorch program with a known op count, profiled by `sightline run` in the CLI tests: three
// steps, each a "train_step" user range around one mm, one add, one relu and one sum. With an
// argument N, N warm-up steps come first, not marked as steps, each with an optimizer range
// ("Optimizer.step#SGD.step") around one sub: a job whose warm-up is counted by its optimizer.
#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
    const int warmup = argc > 1 ? std::atoi(argv[1]) : 0;
    for (int step = 0; step < warmup; ++step) {
        RECORD_USER_SCOPE("Optimizer.step#SGD.step");
        (void)at::sub(at::ones({8}), 1);
    }
    float total = 0;
    for (int step = 0; step < 3; ++step) {
        RECORD_USER_SCOPE("train_step");
        const at::Tensor a = at::ones({64, 64});
        const at::Tensor b = at::mm(a, a);
        const at::Tensor c = at::relu(at::add(b, 1));
        total += c.sum().item<float>();
    }
    std::printf("total %.0f\n", total);
    return total == 3 * 64 * 64 * 65 ? 0 : 1;
}
