// The collector's cost per PyTorch op, on the CPU: steps of many small libtorch ops (the shape of a
// launch-bound training step), each step a "train_step" user range. Prints one JSON line with the
// median step time and the time per op, so bench/collector_overhead.py can compare the same
// program without the collector, with it dormant, and recording (with and without shapes).
// usage: sightline_op_overhead [STEPS] [OPS_PER_STEP]
#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
    const int steps = argc > 1 ? std::atoi(argv[1]) : 30;
    const int ops = argc > 2 ? std::atoi(argv[2]) : 20000;
    at::Tensor x = at::ones({8});
    const at::Tensor y = at::full({8}, 0.5);
    std::vector<double> ms;
    for (int s = 0; s < steps; ++s) {
        const auto t0 = std::chrono::steady_clock::now();
        {
            RECORD_USER_SCOPE("train_step");
            // Four ops an iteration, each of a different name, as in an elementwise chain.
            for (int i = 0; i < ops / 4; ++i) x = at::sub(at::mul(at::add(x, y), 0.5), y).relu_();
        }
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::vector<double> sorted(ms.begin() + std::min<size_t>(3, ms.size() - 1), ms.end()); // first steps warm up
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[sorted.size() / 2];
    std::printf("{\"steps\": %d, \"ops_per_step\": %d, \"median_step_ms\": %.4f, \"ns_per_op\": %.1f, \"check\": %.3f}\n", steps, ops,
                median, median * 1e6 / ops, x.sum().item<double>());
    return 0;
}
