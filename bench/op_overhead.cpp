// The collector's cost per PyTorch op, on the CPU: steps of many small libtorch ops (the shape of a
// launch-bound training step), each step a "train_step" user range. Prints one JSON line with the
// median step time and the time per op, so bench/collector_overhead.py can compare the same
// program without the collector, with it dormant, and recording (with and without shapes).
// usage: sightline_op_overhead [STEPS] [OPS_PER_STEP] [cpu|cuda]
// With cuda each op launches a kernel, and a step ends with a synchronisation. With
// SIGHTLINE_BENCH_NOOP=PATH it first registers the no-op op callback of that library
// (bench/noop_callback.cpp): PyTorch's own cost per op once any op callback is registered.
#include <ATen/ATen.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <dlfcn.h>

int main(int argc, char** argv) {
    const int steps = argc > 1 ? std::atoi(argv[1]) : 30;
    const int ops = argc > 2 ? std::atoi(argv[2]) : 20000;
    const bool cuda = argc > 3 && std::strcmp(argv[3], "cuda") == 0;
    if (const char* lib = std::getenv("SIGHTLINE_BENCH_NOOP"); lib && *lib) {
        void* h = dlopen(lib, RTLD_NOW);
        auto reg = h ? reinterpret_cast<void (*)()>(dlsym(h, "sightline_bench_register_noop")) : nullptr;
        if (!reg) {
            std::fprintf(stderr, "sightline_op_overhead: cannot load the no-op callback from %s\n", lib);
            return 1;
        }
        reg();
    }
    // libtorch_cuda registers the CUDA backend and hooks when loaded, before anything asks for them.
    if (cuda && !dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_GLOBAL)) {
        std::fprintf(stderr, "sightline_op_overhead: cannot load libtorch_cuda.so (%s)\n", dlerror());
        return 1;
    }
    const at::Device device = cuda ? at::Device(at::kCUDA) : at::Device(at::kCPU);
    at::Tensor x = at::ones({8}, at::TensorOptions().device(device));
    const at::Tensor y = at::full({8}, 0.5, at::TensorOptions().device(device));
    std::vector<double> ms;
    for (int s = 0; s < steps; ++s) {
        const auto t0 = std::chrono::steady_clock::now();
        {
            RECORD_USER_SCOPE("train_step");
            // Four ops an iteration, each of a different name, as in an elementwise chain.
            for (int i = 0; i < ops / 4; ++i) x = at::sub(at::mul(at::add(x, y), 0.5), y).relu_();
            if (cuda) at::detail::getCUDAHooks().deviceSynchronize(0);
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
