// What a timestamp and a CUPTI external-correlation push/pop cost on this machine: the per-op
// work of the collector's op path besides the ring write. On a virtual machine whose clock source
// has no vDSO fast path, clock_gettime is a system call; the figures say whether that is so here.
// usage: clock_cost [ITERATIONS]   (CUPTI is loaded with dlopen: libcupti.so.13 on the library path)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>

#include <dlfcn.h>
#include <x86intrin.h>

namespace {

double nowSeconds() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

template <typename F>
void timeIt(const char* what, long n, F f) {
    uint64_t sink = 0;
    for (long i = 0; i < n / 10; ++i) sink += f(); // warm up
    const double t0 = nowSeconds();
    for (long i = 0; i < n; ++i) sink += f();
    const double t1 = nowSeconds();
    std::printf("%-44s %8.1f ns a call   (checksum %llu)\n", what, 1e9 * (t1 - t0) / double(n), (unsigned long long)(sink & 0xff));
}

uint64_t clockNs(clockid_t id) {
    timespec ts;
    clock_gettime(id, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

} // namespace

int main(int argc, char** argv) {
    const long n = argc > 1 ? std::atol(argv[1]) : 2'000'000;
    std::ifstream cs("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    std::string source;
    std::getline(cs, source);
    std::printf("clock source: %s\n", source.empty() ? "(unknown)" : source.c_str());
    timeIt("clock_gettime(CLOCK_REALTIME)", n, [] { return clockNs(CLOCK_REALTIME); });
    timeIt("clock_gettime(CLOCK_MONOTONIC)", n, [] { return clockNs(CLOCK_MONOTONIC); });
    timeIt("clock_gettime(CLOCK_REALTIME_COARSE)", n, [] { return clockNs(CLOCK_REALTIME_COARSE); });
    timeIt("rdtsc", n, [] { return uint64_t(__rdtsc()); });

    void* cupti = dlopen("libcupti.so.13", RTLD_NOW);
    if (!cupti) {
        std::printf("no libcupti.so.13: %s\n", dlerror());
        return 0;
    }
    using GetTimestamp = int (*)(uint64_t*);
    using Push = int (*)(int, uint64_t);
    using Pop = int (*)(int, uint64_t*);
    auto ts = reinterpret_cast<GetTimestamp>(dlsym(cupti, "cuptiGetTimestamp"));
    auto push = reinterpret_cast<Push>(dlsym(cupti, "cuptiActivityPushExternalCorrelationId"));
    auto pop = reinterpret_cast<Pop>(dlsym(cupti, "cuptiActivityPopExternalCorrelationId"));
    if (ts) timeIt("cuptiGetTimestamp", n, [ts] { uint64_t t = 0; ts(&t); return t; });
    constexpr int kCustom0 = 3; // CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0
    auto pushPop = [push, pop] {
        uint64_t id = 0;
        push(kCustom0, 42);
        pop(kCustom0, &id);
        return id;
    };
    if (push && pop) timeIt("push + pop, CUPTI not set up", n / 100, pushPop);
    // As the collector sets CUPTI up: activity buffers registered, external correlation enabled.
    using Request = void (*)(uint8_t**, size_t*, size_t*);
    using Complete = void (*)(void*, uint32_t, uint8_t*, size_t, size_t);
    using Register = int (*)(Request, Complete);
    using Enable = int (*)(int);
    auto reg = reinterpret_cast<Register>(dlsym(cupti, "cuptiActivityRegisterCallbacks"));
    auto enable = reinterpret_cast<Enable>(dlsym(cupti, "cuptiActivityEnable"));
    if (void* cuda = dlopen("libcuda.so.1", RTLD_NOW)) { // a context current, as in a CUDA job
        using Init = int (*)(unsigned);
        using Retain = int (*)(void**, int);
        using SetCurrent = int (*)(void*);
        auto init = reinterpret_cast<Init>(dlsym(cuda, "cuInit"));
        auto retain = reinterpret_cast<Retain>(dlsym(cuda, "cuDevicePrimaryCtxRetain"));
        auto set = reinterpret_cast<SetCurrent>(dlsym(cuda, "cuCtxSetCurrent"));
        void* ctx = nullptr;
        const int a = init ? init(0) : -1, b = a == 0 && retain ? retain(&ctx, 0) : -1, c = b == 0 && set ? set(ctx) : -1;
        std::printf("cuInit %d, primary context %d, current %d\n", a, b, c);
    }
    if (reg && enable) {
        const int r = reg([](uint8_t** b, size_t* size, size_t* max) { *b = static_cast<uint8_t*>(std::aligned_alloc(8, 1 << 20)); *size = 1 << 20; *max = 0; },
                          [](void*, uint32_t, uint8_t* b, size_t, size_t) { std::free(b); });
        constexpr int kExternalCorrelation = 39; // CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION
        std::printf("cuptiActivityRegisterCallbacks %d, enable external correlation %d\n", r, enable(kExternalCorrelation));
    }
    if (push && pop) timeIt("cupti external correlation push + pop", n / 4, pushPop);
    return 0;
}
