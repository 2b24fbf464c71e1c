#include "cupti_session.h"

#include "decode.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <mutex>
#include <thread>
#include <vector>

#include <cupti.h>
#include <dlfcn.h>
#include <link.h>

namespace sightline::collector {

using namespace capture;

namespace {

// The CUPTI entry points the collector uses, resolved with dlsym.
struct CuptiApi {
    void* lib = nullptr;
    decltype(&cuptiSubscribe) subscribe = nullptr;
    decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
    decltype(&cuptiActivityRegisterCallbacks) registerCallbacks = nullptr;
    decltype(&cuptiActivityEnable) enable = nullptr;
    decltype(&cuptiActivityDisable) disable = nullptr;
    decltype(&cuptiActivityFlushAll) flushAll = nullptr;
    decltype(&cuptiActivityGetNextRecord) nextRecord = nullptr;
    decltype(&cuptiActivityGetNumDroppedRecords) dropped = nullptr;
    decltype(&cuptiActivityPushExternalCorrelationId) push = nullptr;
    decltype(&cuptiActivityPopExternalCorrelationId) pop = nullptr;
    decltype(&cuptiGetTimestamp) timestamp = nullptr;
    decltype(&cuptiGetResultString) resultString = nullptr;
    decltype(&cuptiGetCallbackName) callbackName = nullptr;
    decltype(&cuptiActivitySetAttribute) setAttribute = nullptr;
    decltype(&cuptiEnableCallback) enableCallback = nullptr;
    decltype(&cuptiEnableDomain) enableDomain = nullptr;                 // optional, with finalize: detaching
    decltype(&cuptiFinalize) finalize = nullptr;                         // optional
    decltype(&cuptiActivityEnableRuntimeApi) enableRuntimeApi = nullptr; // optional
    decltype(&cuptiActivityEnableDriverApi) enableDriverApi = nullptr;   // optional
    decltype(&cuptiGetDeviceId) deviceId = nullptr;                      // optional
};

// Detaching (cuptiFinalize) between windows. Disabling the activity kinds leaves CUPTI's hooks in
// the process and the job slower than before its first window; only finalising removes them, and
// CUPTI wants that done on an application thread as a CUDA call returns. So the collector asks
// for runtime-API callbacks, and the first call to return after that finalises (see onCallback).
// A window that opens while the request is still pending takes it back.
enum class Link : int { Attached,
                        Pending,
                        Finalizing,
                        Detached };

// Buffer pool: 8 MB buffers, at most 32 (256 MB) alive.
constexpr size_t kBufferBytes = size_t(8) << 20;
constexpr size_t kMaxBuffers = 32;

} // namespace

// What the session and CUPTI's callbacks share. It lives on the heap with the session and is
// never freed: a buffer may complete during CUPTI's own teardown at exit, after static
// destructors, and CUPTI may be started from a shared-library constructor.
struct CuptiSession::State {
    CuptiApi api;
    void (*on_first_context)() = nullptr;
    std::atomic<void (*)(int)> on_context_device{nullptr}; // the hardware sampler's
    CUpti_SubscriberHandle subscriber = nullptr;
    std::atomic<Link> link{Link::Detached}; // nothing subscribed before start()
    std::mutex link_mutex;
    std::condition_variable link_changed;
    Recorder* recorder = nullptr;
    // The buffer pool.
    std::mutex pool_mutex;
    std::vector<uint8_t*> free_buffers;
    size_t allocated = 0;
    uint64_t requested = 0;
    uint64_t declined = 0;
    std::atomic<uint64_t> incomplete{0}; // GPU activities flushed before they finished (no times), not written
    // Correlation ids: the base of this CUPTI session's ids and the largest written (DecodeContext).
    std::atomic<uint32_t> correlation_base{0}, max_correlation{0};
    // API names by domain and callback id, filled lazily.
    std::mutex names_mutex;
    std::vector<std::string> api_names[2];
    std::atomic<bool> shutdown{false};
};

namespace {

CuptiSession::State& cuptiState() { return cuptiSession().state(); }

void setLink(Link l) {
    {
        std::lock_guard<std::mutex> lock(cuptiState().link_mutex);
        cuptiState().link = l;
    }
    cuptiState().link_changed.notify_all();
}
// Waits (at most `limit`) while a finalisation runs; true if CUPTI is attached afterwards, with
// any pending detach taken back.
bool settleAttached(std::chrono::milliseconds limit) {
    Link expected = Link::Pending;
    if (cuptiState().link.compare_exchange_strong(expected, Link::Attached)) {
        cuptiState().api.enableDomain(0, cuptiState().subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
        return true;
    }
    std::unique_lock<std::mutex> lock(cuptiState().link_mutex);
    cuptiState().link_changed.wait_for(lock, limit, [] { return cuptiState().link.load() != Link::Finalizing; });
    return cuptiState().link.load() == Link::Attached;
}

const char* resultText(CUptiResult r) {
    const char* s = nullptr;
    if (cuptiState().api.resultString) cuptiState().api.resultString(r, &s);
    return s ? s : "unknown CUPTI error";
}

void decodeBuffer(uint8_t* buffer, size_t valid);

uint8_t* newBuffer() {
    auto* b = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
    if (b) std::memset(b, 0, kBufferBytes);
    return b;
}

// Buffers ready before recording starts, so that the first ones CUPTI asks for, on the job's
// thread, cost no allocation; given back when CUPTI is detached.
void fillPool() {
    std::lock_guard<std::mutex> lock(cuptiState().pool_mutex);
    while (cuptiState().free_buffers.size() < 4 && cuptiState().allocated < kMaxBuffers) {
        uint8_t* b = newBuffer();
        if (!b) return;
        cuptiState().free_buffers.push_back(b);
        ++cuptiState().allocated;
    }
}

// Frees the buffers CUPTI does not hold (all of them once it is detached); returns the bytes.
size_t releasePool() {
    std::lock_guard<std::mutex> lock(cuptiState().pool_mutex);
    const size_t n = cuptiState().free_buffers.size();
    for (uint8_t* b : cuptiState().free_buffers) std::free(b);
    cuptiState().free_buffers.clear();
    cuptiState().allocated -= n;
    return n * kBufferBytes;
}

void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *max_records = 0;
    *size = 0;
    *buffer = nullptr;
    std::lock_guard<std::mutex> lock(cuptiState().pool_mutex);
    ++cuptiState().requested;
    if (!cuptiState().free_buffers.empty()) {
        *buffer = cuptiState().free_buffers.back();
        cuptiState().free_buffers.pop_back();
    } else if (cuptiState().allocated < kMaxBuffers) {
        *buffer = newBuffer();
        if (*buffer) ++cuptiState().allocated;
    }
    if (*buffer) *size = kBufferBytes;
    else ++cuptiState().declined; // CUPTI counts what it drops for want of a buffer
}

void CUPTIAPI bufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    if (cuptiState().shutdown.load()) return; // the process is ending; the buffer is not needed again
    try {
        decodeBuffer(buffer, valid);
    } catch (...) {
        // out of memory while decoding: the records are lost, the job goes on
    }
    std::memset(buffer, 0, valid);
    std::lock_guard<std::mutex> lock(cuptiState().pool_mutex);
    cuptiState().free_buffers.push_back(buffer);
}

void decodeBuffer(uint8_t* buffer, size_t valid) {
    std::vector<char> out;
    out.reserve(valid);
    DecodeStats stats;
    DecodeContext ctx;
    ctx.intern = [](std::string_view s) { return cuptiState().recorder ? cuptiState().recorder->intern(s) : 0u; };
    ctx.api_name = [](uint32_t domain, uint32_t cbid) -> std::string_view {
        std::lock_guard<std::mutex> lock(cuptiState().names_mutex);
        auto& names = cuptiState().api_names[domain & 1];
        if (cbid >= names.size()) names.resize(cbid + 1);
        if (names[cbid].empty()) {
            const char* n = nullptr;
            if (cuptiState().api.callbackName)
                cuptiState().api.callbackName(domain == 0 ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, cbid, &n);
            names[cbid] = n ? n : "?";
            // CUPTI names runtime calls "cudaLaunchKernel_v7000"; keep the API's own name.
            const size_t v = names[cbid].rfind("_v");
            if (v != std::string::npos && v + 2 < names[cbid].size() && std::isdigit(static_cast<unsigned char>(names[cbid][v + 2])))
                names[cbid].resize(v);
        }
        return names[cbid];
    };
    ctx.correlation_base = cuptiState().correlation_base.load();
    CUpti_Activity* rec = nullptr;
    uint32_t count = 0;
    while (cuptiState().api.nextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        const size_t at = out.size();
        decodeActivity(rec, ctx, out, stats);
        count += out.size() > at ? 1 : 0;
    }
    if (stats.incomplete) cuptiState().incomplete += stats.incomplete;
    uint32_t seen = cuptiState().max_correlation.load();
    while (stats.max_correlation > seen && !cuptiState().max_correlation.compare_exchange_weak(seen, stats.max_correlation)) {}
    if (cuptiState().recorder) cuptiState().recorder->emitBulk(out, count);
}

template <typename F>
bool resolve(F& fn, const char* name) {
    fn = reinterpret_cast<F>(dlsym(cuptiState().api.lib, name));
    return fn != nullptr;
}

uint64_t monotonicNs() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

struct Kind {
    bool on;
    CUpti_ActivityKind kind;
};

std::vector<Kind> recordedKinds(const CuptiOptions& o) {
    return {{o.kernels, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL}, {o.memcpy, CUPTI_ACTIVITY_KIND_MEMCPY}, {o.memset, CUPTI_ACTIVITY_KIND_MEMSET}, {o.runtime, CUPTI_ACTIVITY_KIND_RUNTIME}, {o.driver, CUPTI_ACTIVITY_KIND_DRIVER}, {o.sync, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION}, {true, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION}, {o.nvtx, CUPTI_ACTIVITY_KIND_MARKER}, {o.overhead, CUPTI_ACTIVITY_KIND_OVERHEAD}};
}

} // namespace

// Frequent queries that do no work on the GPU and say nothing about it: PyTorch makes several
// around every launch (cudaGetLastError after each, device and capture-state queries), and each
// recorded call costs CUPTI a record. Kineto drops the most frequent of them from its traces too.
// Called after the RUNTIME and DRIVER kinds are enabled, which would otherwise override it.
constexpr CUpti_CallbackId kMutedRuntimeApis[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceCount_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceProperties_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaFuncGetAttributes_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaPointerGetAttributes_v4000,
    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetAttribute_v5000, CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetPriority_v5050,
    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetStreamPriorityRange_v5050,
    CUPTI_RUNTIME_TRACE_CBID_cudaOccupancyMaxActiveBlocksPerMultiprocessor_v6000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_v10000, CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v10010,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_ptsz_v10010,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v2_v11030,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v2_ptsz_v11030,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v12030,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_ptsz_v12030,
    CUPTI_RUNTIME_TRACE_CBID_cudaThreadExchangeStreamCaptureMode_v10010,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetFuncBySymbol_v11000};
constexpr CUpti_CallbackId kMutedDriverApis[] = {
    CUPTI_DRIVER_TRACE_CBID_cuKernelGetAttribute, CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress,
    CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2, CUPTI_DRIVER_TRACE_CBID_cuDeviceGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice, CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice_v2,
    CUPTI_DRIVER_TRACE_CBID_cuFuncGetAttribute, CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetStreamPriorityRange, CUPTI_DRIVER_TRACE_CBID_cuGetErrorString,
    CUPTI_DRIVER_TRACE_CBID_cuStreamIsCapturing, CUPTI_DRIVER_TRACE_CBID_cuStreamIsCapturing_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo, CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v2, CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v3, CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v3_ptsz,
    // one for every cudaLaunchKernel on the H200 (torch 2.11, CUDA 13): half the records
    CUPTI_DRIVER_TRACE_CBID_cuKernelGetName, CUPTI_DRIVER_TRACE_CBID_cuDriverGetVersion,
    CUPTI_DRIVER_TRACE_CBID_cuDeviceGet, CUPTI_DRIVER_TRACE_CBID_cuCtxGetLimit};

template <typename Enable, size_t N>
static void mute(Enable enable, const CUpti_CallbackId (&cbids)[N]) {
    if (enable)
        for (CUpti_CallbackId cbid : cbids) enable(cbid, 0);
}

static void muteChattyApis() {
    static const bool off = [] { // an experiment's switch: SIGHTLINE_CUPTI_MUTE=0 records them too
        const char* v = std::getenv("SIGHTLINE_CUPTI_MUTE");
        return v && std::string(v) == "0";
    }();
    if (off) return;
    mute(cuptiState().api.enableRuntimeApi, kMutedRuntimeApis);
    mute(cuptiState().api.enableDriverApi, kMutedDriverApis);
}

void CuptiSession::setRecording(bool on) {
    if (!m_active) return;
    if (on && !attached()) {
        std::string why;
        if (!subscribe(why)) {
            why += "; this window records CPU ops only";
            if (m_options.log) m_options.log(why.c_str());
            return;
        }
    }
    if (!attached()) return; // nothing to turn off: any CUPTI call now would bring it back
    for (const Kind& k : recordedKinds(m_options))
        if (k.on) (on ? cuptiState().api.enable : cuptiState().api.disable)(k.kind);
    if (on) muteChattyApis();
    // Only whole buffers: the work launched in the window may still be running, and a forced flush
    // would hand its records over without times. They come with a later flush (drain(), stop()).
    else cuptiState().api.flushAll(0);
}

// Serialises drain() with stop(): a drain that wakes after the session stopped does nothing.
// On the heap, never destroyed: a drain may still be asleep when the process exits.
static std::mutex& flushMutex() {
    static auto* m = new std::mutex;
    return *m;
}

void CuptiSession::drain(std::chrono::milliseconds wait) {
    if (!cuptiState().api.flushAll) return;
    std::this_thread::sleep_for(wait); // the GPU finishes what was launched before recording stopped
    std::lock_guard<std::mutex> lock(flushMutex());
    if (m_active && attached()) cuptiState().api.flushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

bool CuptiSession::attached() const { return cuptiState().link.load() == Link::Attached; }

void CuptiSession::detach(std::chrono::milliseconds wait) {
    {
        std::lock_guard<std::mutex> lock(flushMutex());
        if (!m_active || !m_options.detach || !cuptiState().api.finalize || !cuptiState().api.enableDomain || cuptiState().link.load() != Link::Attached) return;
        cuptiState().api.flushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); // what is left of the window, before CUPTI goes
        size_t dropped = 0;
        cuptiState().api.dropped(nullptr, 0, &dropped);
        m_dropped_before += dropped;
        cuptiState().link = Link::Pending;
        if (cuptiState().api.enableDomain(1, cuptiState().subscriber, CUPTI_CB_DOMAIN_RUNTIME_API) != CUPTI_SUCCESS) {
            cuptiState().link = Link::Attached;
            return;
        }
    }
    // A job that makes no CUDA call for a while leaves the request pending: the next call or the
    // next window settles it.
    std::unique_lock<std::mutex> lock(cuptiState().link_mutex);
    const bool done = cuptiState().link_changed.wait_for(lock, wait, [] { return cuptiState().link.load() == Link::Detached; });
    lock.unlock();
    // Detached, CUPTI holds no buffer: the pool goes back to the system until the next window.
    const size_t released = done ? releasePool() : 0;
    if (m_options.log && std::getenv("SIGHTLINE_DEBUG")) {
        const std::string line = done ? "CUPTI detached after the window; " + std::to_string(released >> 20) + " MB of buffers released"
                                      : std::string("CUPTI detach pending: no CUDA runtime call returned yet");
        m_options.log(line.c_str());
    }
}

std::string CuptiSession::findLibrary() {
    if (const char* p = std::getenv("SIGHTLINE_CUPTI_PATH"); p && *p) return p;
    // Prefer a copy already mapped (PyTorch's wheel), then the loader's search path.
    void* h = dlopen("libcupti.so.13", RTLD_LAZY | RTLD_NOLOAD);
    if (!h) h = dlopen("libcupti.so.13", RTLD_LAZY);
    if (!h) h = dlopen("/usr/local/cuda/lib64/libcupti.so.13", RTLD_LAZY);
    if (!h) h = dlopen("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13", RTLD_LAZY);
    if (!h) return {};
    link_map* map = nullptr;
    std::string path;
    if (dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name) path = map->l_name;
    return path;
}

void CuptiSession::onFirstContext(void (*fn)()) { cuptiState().on_first_context = fn; }
void CuptiSession::onContextDevice(void (*fn)(int)) { cuptiState().on_context_device = fn; }
void* CuptiSession::libraryHandle() { return cuptiState().api.lib; }

// Called by CUPTI on the first CUDA context and, while a detach is pending, as runtime calls
// enter and return: the first to return finalises CUPTI, on the job's thread as CUPTI asks.
static void CUPTIAPI onCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
    if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
        uint32_t device = 0;
        const auto* rd = static_cast<const CUpti_ResourceData*>(data);
        const CuptiApi& api = cuptiState().api;
        if (auto fn = cuptiState().on_context_device.load(); fn && api.deviceId && rd && api.deviceId(rd->context, &device) == CUPTI_SUCCESS)
            fn(int(device));
        static std::once_flag once;
        std::call_once(once, [] {
            if (cuptiState().on_first_context) cuptiState().on_first_context();
        });
        return;
    }
    if (domain != CUPTI_CB_DOMAIN_RUNTIME_API || static_cast<const CUpti_CallbackData*>(data)->callbackSite != CUPTI_API_EXIT)
        return;
    Link expected = Link::Pending;
    if (!cuptiState().link.compare_exchange_strong(expected, Link::Finalizing)) return;
    cuptiState().api.unsubscribe(cuptiState().subscriber);
    cuptiState().api.finalize();
    cuptiState().subscriber = nullptr;
    setLink(Link::Detached);
}

bool CuptiSession::subscribe(std::string& why) {
    if (cuptiState().link.load() != Link::Detached && settleAttached(std::chrono::seconds(2))) return true;
    if (cuptiState().link.load() != Link::Detached) {
        why = "CUPTI did not finish detaching";
        return false;
    }
    // Claim CUPTI: on drivers before r610 only one subscriber may exist per process.
    CUptiResult r = cuptiState().api.subscribe(&cuptiState().subscriber, reinterpret_cast<CUpti_CallbackFunc>(&onCallback), nullptr);
    if (r != CUPTI_SUCCESS) {
        why = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
            ? "CUPTI is already used by another profiler in this process (torch.profiler, nsys?)"
            : std::string("CUPTI unavailable (no GPU or driver?): ") + resultText(r);
        return false;
    }
    // The callback hears of the first CUDA context: CUDA's runtime has registered its exit handlers
    // by then, so an exit handler registered now runs before them, while CUPTI can still flush.
    cuptiState().api.enableCallback(1, cuptiState().subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
    // Hand out pre-zeroed buffers so CUPTI need not zero them on the application thread.
    uint8_t zeroed = 1;
    size_t sz = sizeof zeroed;
    cuptiState().api.setAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &sz, &zeroed);
    fillPool();
    r = cuptiState().api.registerCallbacks(bufferRequested, bufferCompleted);
    if (r != CUPTI_SUCCESS) {
        why = std::string("cannot register CUPTI buffers: ") + resultText(r);
        cuptiState().api.unsubscribe(cuptiState().subscriber);
        return false;
    }
    // CUPTI numbers this session's launches from the start again: they follow the last session's.
    cuptiState().correlation_base = cuptiState().max_correlation.load();
    setLink(Link::Attached);
    writeClockRecord();
    return true;
}

bool CuptiSession::start(Recorder& recorder, const CuptiOptions& o, bool record_now, std::string& why) {
    cuptiState().recorder = &recorder;
    const std::string path = findLibrary();
    if (path.empty()) {
        why = "CUPTI (libcupti.so.13) not found; set SIGHTLINE_CUPTI_PATH";
        return false;
    }
    cuptiState().api.lib = dlopen(path.c_str(), RTLD_LAZY | RTLD_GLOBAL);
    if (!cuptiState().api.lib) {
        why = std::string("cannot load ") + path + ": " + dlerror();
        return false;
    }
    bool ok = resolve(cuptiState().api.subscribe, "cuptiSubscribe") && resolve(cuptiState().api.unsubscribe, "cuptiUnsubscribe") &&
        resolve(cuptiState().api.registerCallbacks, "cuptiActivityRegisterCallbacks") &&
        resolve(cuptiState().api.enable, "cuptiActivityEnable") && resolve(cuptiState().api.disable, "cuptiActivityDisable") &&
        resolve(cuptiState().api.flushAll, "cuptiActivityFlushAll") && resolve(cuptiState().api.nextRecord, "cuptiActivityGetNextRecord") &&
        resolve(cuptiState().api.dropped, "cuptiActivityGetNumDroppedRecords") &&
        resolve(cuptiState().api.push, "cuptiActivityPushExternalCorrelationId") &&
        resolve(cuptiState().api.pop, "cuptiActivityPopExternalCorrelationId") && resolve(cuptiState().api.timestamp, "cuptiGetTimestamp") &&
        resolve(cuptiState().api.resultString, "cuptiGetResultString") && resolve(cuptiState().api.callbackName, "cuptiGetCallbackName") &&
        resolve(cuptiState().api.setAttribute, "cuptiActivitySetAttribute") &&
        resolve(cuptiState().api.enableCallback, "cuptiEnableCallback");
    if (!ok) {
        why = path + " lacks CUPTI entry points (too old?)";
        return false;
    }
    resolve(cuptiState().api.enableDomain, "cuptiEnableDomain");
    resolve(cuptiState().api.finalize, "cuptiFinalize");
    cuptiState().api.enableRuntimeApi = reinterpret_cast<decltype(cuptiState().api.enableRuntimeApi)>(dlsym(cuptiState().api.lib, "cuptiActivityEnableRuntimeApi"));
    cuptiState().api.enableDriverApi = reinterpret_cast<decltype(cuptiState().api.enableDriverApi)>(dlsym(cuptiState().api.lib, "cuptiActivityEnableDriverApi"));
    cuptiState().api.deviceId = reinterpret_cast<decltype(cuptiState().api.deviceId)>(dlsym(cuptiState().api.lib, "cuptiGetDeviceId"));
    if (!subscribe(why)) return false;
    cuptiState().recorder = &recorder;
    m_options = o;
    cuptiState().api.enable(CUPTI_ACTIVITY_KIND_DEVICE);
    for (const Kind& k : recordedKinds(o)) {
        if (!k.on || (!record_now && k.kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) continue;
        CUptiResult r = cuptiState().api.enable(k.kind);
        if (r != CUPTI_SUCCESS && k.kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
            why = std::string("cannot enable kernel tracing: ") + resultText(r);
            cuptiState().api.unsubscribe(cuptiState().subscriber);
            setLink(Link::Detached);
            return false;
        }
        if (!record_now) cuptiState().api.disable(k.kind); // enabled once to learn that tracing works
    }
    muteChattyApis();
    m_active = true;
    return true;
}

void CuptiSession::stop() {
    if (!m_active.exchange(false)) return;
    std::lock_guard<std::mutex> flush_lock(flushMutex());
    size_t dropped = 0;
    // A detach still pending is taken back: CUPTI must not be finalised while it is flushed here.
    if (settleAttached(std::chrono::seconds(2))) {
        cuptiState().api.flushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        cuptiState().shutdown = true;
        for (const Kind& k : recordedKinds(m_options))
            if (k.on) cuptiState().api.disable(k.kind);
        cuptiState().api.dropped(nullptr, 0, &dropped);
    }
    cuptiState().shutdown = true; // also when detached: a buffer finalising CUPTI still hands over is not needed
    writeClockRecord();
    uint64_t requested;
    {
        std::lock_guard<std::mutex> lock(cuptiState().pool_mutex);
        requested = cuptiState().requested;
        dropped += m_dropped_before + cuptiState().declined + cuptiState().incomplete.load();
    }
    if (cuptiState().recorder) cuptiState().recorder->setCounters(dropped, requested);
}

void CuptiSession::pushCorrelation(uint64_t id) {
    if (m_active && attached()) cuptiState().api.push(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
}

void CuptiSession::popCorrelation() {
    uint64_t last = 0;
    if (m_active && attached()) cuptiState().api.pop(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

uint64_t CuptiSession::timestamp() {
    uint64_t ts = 0;
    if (cuptiState().api.timestamp && attached() && cuptiState().api.timestamp(&ts) == CUPTI_SUCCESS) return ts;
    return realtimeNs();
}

void CuptiSession::writeClockRecord() {
    if (!cuptiState().recorder) return;
    ClockRecord c;
    initHeader(c, RecordType::Clock);
    c.realtime_ns = realtimeNs();
    c.monotonic_ns = monotonicNs();
    c.cupti_ns = timestamp();
    cuptiState().recorder->emit(c);
}

CuptiSession::CuptiSession() : m_state(new State()) {}

CuptiSession& cuptiSession() {
    static CuptiSession* s = new CuptiSession(); // never destroyed: used from atexit
    return *s;
}

} // namespace sightline::collector
