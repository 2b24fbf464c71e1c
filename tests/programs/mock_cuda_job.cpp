// A job that "launches kernels" through tests/programs/mock_cupti.cpp (the library named by
// SIGHTLINE_CUPTI_PATH, the one the collector loads as CUPTI) until STOPFILE exists or
// MAX_SECONDS pass, then prints the mock's counts. With MOCK_CUDA_DRIVER naming
// tests/programs/mock_cuda_driver.cpp's library, each launch goes through the cuLaunchKernel that
// its cuGetProcAddress hands out (found with dlsym, as the CUDA runtime finds it), and every 50th
// is followed by three host synchronisations (stream, event, context).
// usage: sightline_test_mock_cuda_job STOPFILE MAX_SECONDS
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s STOPFILE MAX_SECONDS\n", argv[0]);
        return 2;
    }
    const char* path = std::getenv("SIGHTLINE_CUPTI_PATH");
    void* mock = path ? dlopen(path, RTLD_NOW | RTLD_GLOBAL) : nullptr;
    auto launch = mock ? reinterpret_cast<void (*)()>(dlsym(mock, "mock_launch")) : nullptr;
    auto report = mock ? reinterpret_cast<void (*)(FILE*)>(dlsym(mock, "mock_report")) : nullptr;
    if (!launch || !report) {
        std::fprintf(stderr, "SIGHTLINE_CUPTI_PATH must name the mock CUPTI library\n");
        return 2;
    }
    using LaunchKernel = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                                      void**, void**);
    LaunchKernel driver_launch = nullptr;
    CUresult (*stream_sync)(CUstream) = nullptr;
    CUresult (*event_sync)(CUevent) = nullptr;
    CUresult (*ctx_sync)(CUcontext) = nullptr;
    long syncs = 0, failed = 0;
    if (const char* driver = std::getenv("MOCK_CUDA_DRIVER")) {
        // MOCK_GPA_ABI=1: through cuGetProcAddress's first ABI (no status argument); otherwise the second.
        void* h = dlopen(driver, RTLD_NOW | RTLD_LOCAL);
        const bool v1 = std::getenv("MOCK_GPA_ABI") && std::string(std::getenv("MOCK_GPA_ABI")) == "1";
        void* gpa = h ? dlsym(h, v1 ? "cuGetProcAddress" : "cuGetProcAddress_v2") : nullptr;
        // Asks the driver for a function as the CUDA runtime does (of CUDA 13 for cuCtxSynchronize:
        // the version that takes a context).
        auto ask = [&](const char* name, int version) -> void* {
            if (!gpa) return nullptr;
            void* f = nullptr;
            const CUresult r = v1 ? reinterpret_cast<CUresult (*)(const char*, void**, int, cuuint64_t)>(gpa)(name, &f, version, 0)
                                  : reinterpret_cast<decltype(&cuGetProcAddress)>(gpa)(name, &f, version, 0, nullptr);
            return r == CUDA_SUCCESS ? f : nullptr;
        };
        driver_launch = reinterpret_cast<LaunchKernel>(ask("cuLaunchKernel", 12000));
        if (!driver_launch) {
            std::fprintf(stderr, "MOCK_CUDA_DRIVER must name the mock driver library\n");
            return 2;
        }
        stream_sync = reinterpret_cast<decltype(stream_sync)>(ask("cuStreamSynchronize", 12000));
        event_sync = reinterpret_cast<decltype(event_sync)>(ask("cuEventSynchronize", 12000));
        ctx_sync = reinterpret_cast<decltype(ctx_sync)>(ask("cuCtxSynchronize", 13000));
        if (!stream_sync || !event_sync || !ctx_sync) {
            std::fprintf(stderr, "the mock driver hands out no host synchronisation\n");
            return 2;
        }
    }
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(std::atoi(argv[2]));
    for (long i = 0; std::chrono::steady_clock::now() < end; ++i) {
        if (driver_launch)
            driver_launch(reinterpret_cast<CUfunction>(&argc), 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr);
        else
            launch();
        if (driver_launch && i % 50 == 49) { // three host synchronisations every 50 launches
            failed += stream_sync(nullptr) != CUDA_SUCCESS;
            failed += event_sync(nullptr) != CUDA_SUCCESS;
            failed += ctx_sync(reinterpret_cast<CUcontext>(0x5151)) != CUDA_SUCCESS;
            syncs += 3;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        if (i % 100 == 0 && access(argv[1], F_OK) == 0) break;
    }
    report(stdout);
    if (driver_launch) std::printf("mock job: host synchronisations %ld, failed %ld\n", syncs, failed);
    return 0;
}
