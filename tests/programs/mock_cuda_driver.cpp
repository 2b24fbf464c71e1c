// A stand-in for libcuda.so.1 (its soname), for CPU tests of the collector's launch counting
// (collector/src/launch_hooks.cpp): the job finds cuGetProcAddress with dlsym, asks it for
// cuLaunchKernel, and each launch runs tests/programs/mock_cupti.cpp's mock_launch(), which writes
// the kernel record CUPTI would. cuFuncGetName names every kernel as mock_cupti does. The host
// synchronisations do nothing.
#include <cuda.h>

#include <cstdlib>
#include <cstring>

#include <dlfcn.h>

extern "C" {

__attribute__((visibility("default"))) CUresult CUDAAPI cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                                                       unsigned, unsigned, CUstream, void**, void**) {
    static auto launch = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "mock_launch"));
    if (!launch) return CUDA_ERROR_NOT_INITIALIZED;
    launch();
    return CUDA_SUCCESS;
}

// "mock_kernel", as mock_cupti names its kernel records, or MOCK_FUNC_NAME: a name that disagrees,
// so that the reader must leave every call unmatched.
__attribute__((visibility("default"))) CUresult CUDAAPI cuFuncGetName(const char** name, CUfunction) {
    const char* other = std::getenv("MOCK_FUNC_NAME");
    *name = other ? other : "mock_kernel";
    return CUDA_SUCCESS;
}

// Host synchronisations: nothing to wait for. cuCtxSynchronize_v2 (what cuGetProcAddress hands out
// for "cuCtxSynchronize" from CUDA 13 on) checks that its context came through the collector's
// wrapper: the job passes kMockContext.
__attribute__((visibility("default"))) CUresult CUDAAPI cuStreamSynchronize(CUstream) { return CUDA_SUCCESS; }
__attribute__((visibility("default"))) CUresult CUDAAPI cuEventSynchronize(CUevent) { return CUDA_SUCCESS; }
__attribute__((visibility("default"))) CUresult CUDAAPI cuCtxSynchronize() { return CUDA_SUCCESS; }
__attribute__((visibility("default"))) CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx) {
    return ctx == reinterpret_cast<CUcontext>(0x5151) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

// cuda.h names this cuGetProcAddress_v2, as libcuda exports it.
__attribute__((visibility("default"))) CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t,
                                                                         CUdriverProcAddressQueryResult* status) {
    if (std::strcmp(symbol, "cuLaunchKernel") == 0) *pfn = reinterpret_cast<void*>(&cuLaunchKernel);
    else if (std::strcmp(symbol, "cuStreamSynchronize") == 0) *pfn = reinterpret_cast<void*>(&cuStreamSynchronize);
    else if (std::strcmp(symbol, "cuEventSynchronize") == 0) *pfn = reinterpret_cast<void*>(&cuEventSynchronize);
    else if (std::strcmp(symbol, "cuCtxSynchronize") == 0)
        *pfn = version >= 13000 ? reinterpret_cast<void*>(&cuCtxSynchronize_v2) : reinterpret_cast<void*>(&cuCtxSynchronize);
    else if (std::strcmp(symbol, "cuFuncGetName") == 0) *pfn = reinterpret_cast<void*>(&cuFuncGetName);
    else if (std::strcmp(symbol, "cuGetProcAddress") == 0) *pfn = reinterpret_cast<void*>(&cuGetProcAddress);
    else *pfn = nullptr;
    if (status) *status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

// The first ABI, without the status argument, under the name libcuda exports it by.
__attribute__((visibility("default"))) CUresult CUDAAPI mockGetProcAddressV1(const char* symbol, void** pfn, int version,
                                                                             cuuint64_t flags) __asm__("cuGetProcAddress");
CUresult CUDAAPI mockGetProcAddressV1(const char* symbol, void** pfn, int version, cuuint64_t flags) {
    return cuGetProcAddress(symbol, pfn, version, flags, nullptr);
}

} // extern "C"
