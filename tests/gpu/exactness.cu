// GPU exactness check for the collector (run on the device, labelled "gpu" in CTest): launches
// known numbers of kernels, copies and memsets on several streams from several threads, then
// prints what it did as JSON so a checker can compare the capture against it.
#include <cstdio>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

__global__ void scale(float* x, int n, float a) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

__global__ void offset(float* x, int n, float b) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += b;
}

#define CHECK(call)                                                                \
    do {                                                                           \
        cudaError_t e = (call);                                                    \
        if (e != cudaSuccess) {                                                    \
            std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e)); \
            std::exit(1);                                                          \
        }                                                                          \
    } while (0)

int main() {
    constexpr int kThreads = 4, kStreamsPerThread = 2, kRounds = 250, kN = 1 << 16;
    // Each round on each stream: 2 scale + 1 offset kernels, 1 HtoD + 1 DtoD + 1 DtoH copy, 1 memset.
    std::vector<std::thread> workers;
    for (int t = 0; t < kThreads; ++t) {
        workers.emplace_back([=] {
            std::vector<cudaStream_t> streams(kStreamsPerThread);
            std::vector<float*> dev(kStreamsPerThread), dev2(kStreamsPerThread);
            std::vector<float> host(kN, 1.0f);
            for (int s = 0; s < kStreamsPerThread; ++s) {
                CHECK(cudaStreamCreateWithFlags(&streams[s], cudaStreamNonBlocking));
                CHECK(cudaMalloc(&dev[s], kN * sizeof(float)));
                CHECK(cudaMalloc(&dev2[s], kN * sizeof(float)));
            }
            for (int r = 0; r < kRounds; ++r) {
                for (int s = 0; s < kStreamsPerThread; ++s) {
                    cudaStream_t st = streams[s];
                    CHECK(cudaMemcpyAsync(dev[s], host.data(), kN * sizeof(float), cudaMemcpyHostToDevice, st));
                    scale<<<kN / 256, 256, 0, st>>>(dev[s], kN, 2.0f);
                    scale<<<kN / 256, 256, 0, st>>>(dev[s], kN, 0.5f);
                    offset<<<kN / 256, 256, 0, st>>>(dev[s], kN, 1.0f);
                    CHECK(cudaMemsetAsync(dev2[s], 0, kN * sizeof(float), st));
                    CHECK(cudaMemcpyAsync(dev2[s], dev[s], kN * sizeof(float), cudaMemcpyDeviceToDevice, st));
                    CHECK(cudaMemcpyAsync(host.data(), dev2[s], kN * sizeof(float), cudaMemcpyDeviceToHost, st));
                }
            }
            for (int s = 0; s < kStreamsPerThread; ++s) {
                CHECK(cudaStreamSynchronize(streams[s]));
                CHECK(cudaFree(dev[s]));
                CHECK(cudaFree(dev2[s]));
                CHECK(cudaStreamDestroy(streams[s]));
            }
        });
    }
    for (auto& w : workers) w.join();
    CHECK(cudaDeviceSynchronize());
    const int per = kThreads * kStreamsPerThread * kRounds;
    std::printf("{\"scale\": %d, \"offset\": %d, \"memcpy_htod\": %d, \"memcpy_dtod\": %d, \"memcpy_dtoh\": %d, "
                "\"memset\": %d, \"streams\": %d, \"threads\": %d}\n",
                2 * per, per, per, per, per, per, kThreads * kStreamsPerThread, kThreads);
    return 0;
}
