// What the collector's launch hooks (collector/src/launch_hooks.cpp) cost a driver call, on the
// CPU: the program finds a driver function the way the CUDA runtime does (cuGetProcAddress, itself
// found with dlsym) in tests/programs/mock_cuda_driver.cpp's stand-in libcuda, then times calls to
// it. cuStreamSynchronize is taken: the stand-in's returns at once, so the time is the call's and,
// where the collector is preloaded, its wrapper's (bench/launch_count_cost.py runs the modes).
// usage: sightline_launch_count_cost MOCK_DRIVER CALLS ROUNDS; prints one JSON line, the median
// ns per call over the rounds.
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <dlfcn.h>

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s MOCK_DRIVER CALLS ROUNDS\n", argv[0]);
        return 2;
    }
    void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    auto gpa = h ? reinterpret_cast<decltype(&cuGetProcAddress)>(dlsym(h, "cuGetProcAddress_v2")) : nullptr;
    void* f = nullptr;
    if (!gpa || gpa("cuStreamSynchronize", &f, 12000, 0, nullptr) != CUDA_SUCCESS || !f) {
        std::fprintf(stderr, "%s: not the stand-in driver library\n", argv[1]);
        return 2;
    }
    auto sync = reinterpret_cast<CUresult (*)(CUstream)>(f);
    const long calls = std::atol(argv[2]), rounds = std::atol(argv[3]);
    std::vector<double> ns;
    long failed = 0;
    for (long r = 0; r <= rounds; ++r) { // round 0 warms up
        const auto t0 = std::chrono::steady_clock::now();
        for (long i = 0; i < calls; ++i) failed += sync(nullptr) != CUDA_SUCCESS;
        const std::chrono::duration<double, std::nano> d = std::chrono::steady_clock::now() - t0;
        if (r > 0) ns.push_back(d.count() / double(calls));
    }
    std::sort(ns.begin(), ns.end());
    std::printf("{\"ns_per_call\": %.2f, \"failed\": %ld}\n", ns[ns.size() / 2], failed);
    return failed ? 1 : 0;
}
