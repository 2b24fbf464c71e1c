// The driver functions that make GPU work, wrapped where the driver hands them out (launch_hooks.h).
#include "launch_hooks.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <mutex>
#include <string>
#include <sys/syscall.h>
#include <tuple>
#include <unistd.h>
#include <unordered_map>

#include <cuda.h>

#include "recorder.h"

namespace sightline::collector {
namespace {

using capture::LaunchActivity;

// Every driver function that makes GPU activities CUPTI records as kernels, copies or sets, then
// those that wait on the host for the GPU (recorded, not numbered: CUPTI gives them no id here):
// X(declared name, name asked of cuGetProcAddress, per-thread-stream suffix, activity, index of
// the CUfunction argument or -1). cuCtxSynchronize has no per-thread-stream export: its suffix
// column names cuCtxSynchronize_v2 instead, so that dlsym of either export is wrapped; from CUDA 13
// on, cuGetProcAddress hands out the _v2 for "cuCtxSynchronize". Both share one wrapper
// (SignatureOf, below).
#define SIGHTLINE_LAUNCH_FUNCTIONS(X)                                             \
    X(cuLaunchKernel, "cuLaunchKernel", "_ptsz", Kernel, 0)                       \
    X(cuLaunchKernelEx, "cuLaunchKernelEx", "_ptsz", Kernel, 1)                   \
    X(cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel", "_ptsz", Kernel, 0) \
    X(cuGraphLaunch, "cuGraphLaunch", "_ptsz", Graph, -1)                         \
    X(cuMemcpy, "cuMemcpy", "_ptds", Memcpy, -1)                                  \
    X(cuMemcpyAsync, "cuMemcpyAsync", "_ptsz", Memcpy, -1)                        \
    X(cuMemcpyPeer, "cuMemcpyPeer", "_ptds", Memcpy, -1)                          \
    X(cuMemcpyPeerAsync, "cuMemcpyPeerAsync", "_ptsz", Memcpy, -1)                \
    X(cuMemcpyHtoD_v2, "cuMemcpyHtoD", "_ptds", Memcpy, -1)                       \
    X(cuMemcpyDtoH_v2, "cuMemcpyDtoH", "_ptds", Memcpy, -1)                       \
    X(cuMemcpyDtoD_v2, "cuMemcpyDtoD", "_ptds", Memcpy, -1)                       \
    X(cuMemcpyHtoDAsync_v2, "cuMemcpyHtoDAsync", "_ptsz", Memcpy, -1)             \
    X(cuMemcpyDtoHAsync_v2, "cuMemcpyDtoHAsync", "_ptsz", Memcpy, -1)             \
    X(cuMemcpyDtoDAsync_v2, "cuMemcpyDtoDAsync", "_ptsz", Memcpy, -1)             \
    X(cuMemcpy2D_v2, "cuMemcpy2D", "_ptds", Memcpy, -1)                           \
    X(cuMemcpy2DUnaligned_v2, "cuMemcpy2DUnaligned", "_ptds", Memcpy, -1)         \
    X(cuMemcpy2DAsync_v2, "cuMemcpy2DAsync", "_ptsz", Memcpy, -1)                 \
    X(cuMemcpy3D_v2, "cuMemcpy3D", "_ptds", Memcpy, -1)                           \
    X(cuMemcpy3DAsync_v2, "cuMemcpy3DAsync", "_ptsz", Memcpy, -1)                 \
    X(cuMemsetD8_v2, "cuMemsetD8", "_ptds", Memset, -1)                           \
    X(cuMemsetD16_v2, "cuMemsetD16", "_ptds", Memset, -1)                         \
    X(cuMemsetD32_v2, "cuMemsetD32", "_ptds", Memset, -1)                         \
    X(cuMemsetD2D8_v2, "cuMemsetD2D8", "_ptds", Memset, -1)                       \
    X(cuMemsetD2D16_v2, "cuMemsetD2D16", "_ptds", Memset, -1)                     \
    X(cuMemsetD2D32_v2, "cuMemsetD2D32", "_ptds", Memset, -1)                     \
    X(cuMemsetD8Async, "cuMemsetD8Async", "_ptsz", Memset, -1)                    \
    X(cuMemsetD16Async, "cuMemsetD16Async", "_ptsz", Memset, -1)                  \
    X(cuMemsetD32Async, "cuMemsetD32Async", "_ptsz", Memset, -1)                  \
    X(cuMemsetD2D8Async, "cuMemsetD2D8Async", "_ptsz", Memset, -1)                \
    X(cuMemsetD2D16Async, "cuMemsetD2D16Async", "_ptsz", Memset, -1)              \
    X(cuMemsetD2D32Async, "cuMemsetD2D32Async", "_ptsz", Memset, -1)              \
    X(cuStreamSynchronize, "cuStreamSynchronize", "_ptsz", Sync, -1)              \
    X(cuEventSynchronize, "cuEventSynchronize", "", Sync, -1)                     \
    X(cuCtxSynchronize, "cuCtxSynchronize", "_v2", Sync, -1)

enum Index {
#define SIGHTLINE_INDEX(fn, base, pt, activity, karg) I_##fn,
    SIGHTLINE_LAUNCH_FUNCTIONS(SIGHTLINE_INDEX)
#undef SIGHTLINE_INDEX
        kFunctions
};

struct Entry {
    const char* symbol; // as libcuda exports it
    const char* base;   // as cuGetProcAddress is asked for it
    const char* pt;     // the suffix of its per-thread-default-stream export
    LaunchActivity activity;
};
const Entry kEntries[kFunctions] = {
#define SIGHTLINE_ENTRY(fn, base, pt, activity, karg) {#fn, base, pt, LaunchActivity::activity},
    SIGHTLINE_LAUNCH_FUNCTIONS(SIGHTLINE_ENTRY)
#undef SIGHTLINE_ENTRY
};

// The real functions, legacy stream [0] and per-thread default stream [1], as the driver handed
// them out; a wrapper is handed out only after its real function is stored.
std::atomic<void*> g_real[kFunctions][2];
std::atomic<uint32_t> g_name_ids[kFunctions];

std::atomic<bool> g_on{false};
std::atomic<uint64_t> g_count{0};
std::atomic<uint32_t> g_segment{0};
LaunchSink g_sink{};
thread_local int t_depth = 0;
thread_local int64_t t_tid = 0;

// The OS thread id, asked once per thread. (A forked child keeps its parent's value, but a child
// records nothing: the collector stops recording there.)
int64_t threadId() {
    if (t_tid == 0) t_tid = int64_t(syscall(SYS_gettid));
    return t_tid;
}

using dlsym_fn = void* (*)(void*, const char*);
dlsym_fn realDlsym();

// Kernel names by CUfunction (or CUkernel, which the runtime of CUDA 12 and later passes to
// cuLaunchKernel): a direct-mapped cache per thread before a shared table, so that the driver is
// asked once per kernel.
struct NameSlot {
    const void* key;
    uint32_t id;
};
thread_local NameSlot t_names[64];
std::mutex g_names_mutex;
std::unordered_map<const void*, uint32_t>* g_names = new std::unordered_map<const void*, uint32_t>(); // never freed

bool realDriverProc(const char* symbol, void** pfn); // the real cuGetProcAddress, below

// The driver's name of a kernel, asked through the real cuGetProcAddress (a driver call: no
// loader lock, which dlopen or dlsym would take here, inside a job's launch).
uint32_t resolveKernelName(const void* fn) {
    using GetName = CUresult (*)(const char**, const void*);
    static std::atomic<void*> func_name{nullptr}, kernel_name{nullptr};
    for (auto [slot, symbol] : {std::pair{&func_name, "cuFuncGetName"}, std::pair{&kernel_name, "cuKernelGetName"}})
        if (!slot->load()) {
            void* p = nullptr;
            if (realDriverProc(symbol, &p)) slot->store(p);
        }
    const char* name = nullptr;
    auto ask = [&](std::atomic<void*>& f) {
        void* p = f.load();
        return p && reinterpret_cast<GetName>(p)(&name, fn) == CUDA_SUCCESS && name;
    };
    if (!ask(func_name) && !ask(kernel_name)) return 0; // a CUkernel (the runtime's) answers to the second
    return g_sink.intern ? g_sink.intern(name) : 0;
}

uint32_t kernelNameId(const void* fn) {
    if (!fn) return 0;
    NameSlot& slot = t_names[(reinterpret_cast<uintptr_t>(fn) >> 4) & 63];
    if (slot.key == fn) return slot.id;
    {
        std::lock_guard<std::mutex> lock(g_names_mutex);
        if (auto it = g_names->find(fn); it != g_names->end()) {
            slot = {fn, it->second};
            return it->second;
        }
    }
    const uint32_t id = resolveKernelName(fn); // not under the lock: the driver and the recorder take their own
    {
        std::lock_guard<std::mutex> lock(g_names_mutex);
        g_names->emplace(fn, id);
    }
    slot = {fn, id};
    return id;
}

uint32_t functionNameId(int index) {
    uint32_t id = g_name_ids[index].load(std::memory_order_relaxed);
    if (id == 0 && g_sink.intern) {
        id = g_sink.intern(kEntries[index].symbol);
        g_name_ids[index].store(id, std::memory_order_relaxed);
    }
    return id;
}

// One counted call: numbered as it begins, recorded as it returns.
struct Counted {
    capture::LaunchRecord r;
    Counted(int index, const void* fn) {
        ++t_depth;
        capture::initHeader(r, capture::RecordType::Launch);
        const bool numbered = kEntries[index].activity != LaunchActivity::Sync;
        r.count = numbered ? g_count.fetch_add(1, std::memory_order_relaxed) + 1 : 0;
        r.segment = g_segment.load(std::memory_order_relaxed);
        r.activity = uint32_t(kEntries[index].activity);
        r.name_id = functionNameId(index);
        r.kernel_name_id = kernelNameId(fn);
        r.tid = threadId();
        r.start_ns = realtimeNs();
    }
    void done(CUresult result) {
        r.end_ns = realtimeNs();
        r.return_value = int32_t(result);
        if (g_sink.emit) g_sink.emit(r);
    }
    ~Counted() { --t_depth; }
};

// The wrapper's signature: the declared function's, but for cuCtxSynchronize, whose two versions
// (no argument; a context) share one wrapper that passes a context through: on x86-64, the only
// place the hooks are installed, an argument register the first version ignores costs nothing.
template <int Index, typename Declared>
struct SignatureOf {
    using type = Declared;
};
template <typename Declared>
struct SignatureOf<I_cuCtxSynchronize, Declared> {
    using type = decltype(&::cuCtxSynchronize_v2);
};

template <int Index, int PT, int KernelArg, typename F>
struct Wrapper;

template <int Index, int PT, int KernelArg, typename... A>
struct Wrapper<Index, PT, KernelArg, CUresult (*)(A...)> {
    static CUresult CUDAAPI call(A... a) {
        auto real = reinterpret_cast<CUresult(CUDAAPI*)(A...)>(g_real[Index][PT].load(std::memory_order_relaxed));
        if (!g_on.load(std::memory_order_acquire) || t_depth > 0) return real(a...);
        const void* fn = nullptr;
        if constexpr (KernelArg >= 0) fn = reinterpret_cast<const void*>(std::get<KernelArg>(std::tie(a...)));
        Counted c(Index, fn);
        const CUresult r = real(a...);
        c.done(r);
        return r;
    }
};

void* const kWrappers[kFunctions][2] = {
#define SIGHTLINE_WRAPPERS(fn, base, pt, activity, karg)                                                   \
    {reinterpret_cast<void*>(&Wrapper<I_##fn, 0, karg, SignatureOf<I_##fn, decltype(&::fn)>::type>::call), \
     reinterpret_cast<void*>(&Wrapper<I_##fn, 1, karg, SignatureOf<I_##fn, decltype(&::fn)>::type>::call)},
    SIGHTLINE_LAUNCH_FUNCTIONS(SIGHTLINE_WRAPPERS)
#undef SIGHTLINE_WRAPPERS
};

// Hands out the wrapper of a real function, storing the real one for it.
void* wrap(int index, int pt, void* real) {
    void* expected = nullptr;
    if (!g_real[index][pt].compare_exchange_strong(expected, real) && expected != real)
        return real; // a second, different implementation of the same function: left unwrapped
    return kWrappers[index][pt];
}

// ---- cuGetProcAddress: both of its ABIs (CUDA 12 added the status argument)
using GetProcAddress2 = CUresult(CUDAAPI*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
using GetProcAddress1 = CUresult(CUDAAPI*)(const char*, void**, int, cuuint64_t);
std::atomic<void*> g_real_gpa2{nullptr}, g_real_gpa1{nullptr};
CUresult CUDAAPI wrappedGetProcAddress2(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
CUresult CUDAAPI wrappedGetProcAddress1(const char*, void**, int, cuuint64_t);

void wrapProc(const char* symbol, void** pfn, cuuint64_t flags) {
    if (!symbol || !pfn || !*pfn) return;
    if (std::strcmp(symbol, "cuGetProcAddress") == 0) { // asked for itself: which ABI comes back depends on the version asked
        if (*pfn == g_real_gpa2.load()) *pfn = reinterpret_cast<void*>(&wrappedGetProcAddress2);
        else if (*pfn == g_real_gpa1.load()) *pfn = reinterpret_cast<void*>(&wrappedGetProcAddress1);
        return;
    }
    const int pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ? 1 : 0;
    for (int i = 0; i < kFunctions; ++i)
        if (std::strcmp(symbol, kEntries[i].base) == 0) {
            *pfn = wrap(i, pt, *pfn);
            return;
        }
}

bool realDriverProc(const char* symbol, void** pfn) {
    *pfn = nullptr;
    constexpr int kVersion = 12030; // cuFuncGetName and cuKernelGetName came with CUDA 12.3
    if (void* p = g_real_gpa2.load())
        return reinterpret_cast<GetProcAddress2>(p)(symbol, pfn, kVersion, CU_GET_PROC_ADDRESS_DEFAULT, nullptr) == CUDA_SUCCESS && *pfn;
    if (void* p = g_real_gpa1.load())
        return reinterpret_cast<GetProcAddress1>(p)(symbol, pfn, kVersion, CU_GET_PROC_ADDRESS_DEFAULT) == CUDA_SUCCESS && *pfn;
    return false;
}

CUresult CUDAAPI wrappedGetProcAddress2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult* status) {
    const CUresult r = reinterpret_cast<GetProcAddress2>(g_real_gpa2.load())(symbol, pfn, version, flags, status);
    if (r == CUDA_SUCCESS) wrapProc(symbol, pfn, flags);
    return r;
}

CUresult CUDAAPI wrappedGetProcAddress1(const char* symbol, void** pfn, int version, cuuint64_t flags) {
    const CUresult r = reinterpret_cast<GetProcAddress1>(g_real_gpa1.load())(symbol, pfn, version, flags);
    if (r == CUDA_SUCCESS) wrapProc(symbol, pfn, flags);
    return r;
}

// ---- dlsym: what it finds of the driver's, wrapped
bool hooksDisabled() {
    static const bool off = [] {
        const char* v = std::getenv("SIGHTLINE_LAUNCH_HOOKS");
        return v && std::strcmp(v, "0") == 0;
    }();
    return off;
}

void* wrapDlsymResult(const char* name, void* p) {
    if (!p || !name || name[0] != 'c' || name[1] != 'u' || hooksDisabled()) return p;
    if (std::strcmp(name, "cuGetProcAddress_v2") == 0) {
        g_real_gpa2.store(p);
        return reinterpret_cast<void*>(&wrappedGetProcAddress2);
    }
    if (std::strcmp(name, "cuGetProcAddress") == 0) {
        g_real_gpa1.store(p);
        return reinterpret_cast<void*>(&wrappedGetProcAddress1);
    }
    for (int i = 0; i < kFunctions; ++i) {
        const size_t n = std::strlen(kEntries[i].symbol);
        if (std::strncmp(name, kEntries[i].symbol, n) != 0) continue;
        if (name[n] == '\0') return wrap(i, 0, p);
        if (std::strcmp(name + n, kEntries[i].pt) == 0) return wrap(i, 1, p);
    }
    return p;
}

} // namespace
} // namespace sightline::collector

using sightline::collector::realDlsym;

extern "C" {
__attribute__((visibility("hidden"))) void sightline_dlsym_stub(); // the stub below, by a name no one else has
// glibc's dlsym, found past this library; read by the stub below.
__attribute__((visibility("hidden"))) void* sightline_real_dlsym = nullptr;

__attribute__((visibility("hidden"))) void* sightline_dlsym_wrapped(void* handle, const char* name) {
    return sightline::collector::wrapDlsymResult(name, realDlsym()(handle, name));
}
}

namespace sightline::collector {
namespace {
dlsym_fn realDlsym() {
    void* p = __atomic_load_n(&sightline_real_dlsym, __ATOMIC_ACQUIRE);
    if (!p) {
        p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!p) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        __atomic_store_n(&sightline_real_dlsym, p, __ATOMIC_RELEASE);
    }
    return reinterpret_cast<dlsym_fn>(p);
}

__attribute__((constructor)) void initHooks() { realDlsym(); }
} // namespace
} // namespace sightline::collector

#if defined(__x86_64__)
// The process's dlsym. dlsym(RTLD_NEXT, ...) answers relative to its caller, found by its return
// address, so that case jumps straight to glibc's with the caller's return address untouched;
// every other lookup goes through sightline_dlsym_wrapped, which wraps what it finds of the
// driver's. (Before glibc's is known, which only a constructor running ahead of this library's
// could see, RTLD_NEXT takes the wrapped path too, answering relative to this library.)
asm(R"(
    .text
    .globl dlsym
    .type dlsym, @function
    .globl sightline_dlsym_stub
    .hidden sightline_dlsym_stub
dlsym:
sightline_dlsym_stub:
    cmpq $-1, %rdi
    jne 1f
    movq sightline_real_dlsym(%rip), %rax
    testq %rax, %rax
    jz 1f
    jmp *%rax
1:
    jmp sightline_dlsym_wrapped
    .size dlsym, .-dlsym
)");
#endif

namespace sightline::collector {

bool launchCountingAvailable() {
#if defined(__x86_64__)
    if (hooksDisabled()) return false;
    // Ours is the process's dlsym only when the collector came first (LD_PRELOAD).
    return realDlsym() && realDlsym()(RTLD_DEFAULT, "dlsym") == reinterpret_cast<void*>(&sightline_dlsym_stub);
#else
    return false;
#endif
}

void setLaunchCounting(bool on, const LaunchSink& sink) {
    if (on == g_on.load()) return;
    if (on) {
        g_sink = sink;
        g_count.store(0);
        g_segment.fetch_add(1);
    }
    g_on.store(on, std::memory_order_release);
}

uint64_t launchesCounted() { return g_count.load(std::memory_order_relaxed); }

std::string launchCountSummary() {
    size_t named = 0, unnamed = 0;
    {
        std::lock_guard<std::mutex> lock(g_names_mutex);
        for (const auto& [fn, id] : *g_names) ++(id ? named : unnamed);
    }
    return std::to_string(g_count.load()) + " launch calls counted in window " + std::to_string(g_segment.load()) + "; " +
        std::to_string(named) + " kernels named by the driver, " + std::to_string(unnamed) + " not";
}

} // namespace sightline::collector
