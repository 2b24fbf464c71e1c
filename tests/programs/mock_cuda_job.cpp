// A job that "launches kernels" through tests/programs/mock_cupti.cpp (the library named by
// SIGHTLINE_CUPTI_PATH, the one the collector loads as CUPTI) until STOPFILE exists or
// MAX_SECONDS pass, then prints the mock's counts.
// usage: sightline_test_mock_cuda_job STOPFILE MAX_SECONDS
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

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
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(std::atoi(argv[2]));
    for (long i = 0; std::chrono::steady_clock::now() < end; ++i) {
        launch();
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        if (i % 100 == 0 && access(argv[1], F_OK) == 0) break;
    }
    report(stdout);
    return 0;
}
