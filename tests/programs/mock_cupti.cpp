// A stand-in for libcupti.so, for CPU tests of how the collector drives CUPTI: subscribing,
// activity kinds, buffers, and detaching (cuptiFinalize) between windows and subscribing again.
// Loaded by the collector through SIGHTLINE_CUPTI_PATH. The test program calls mock_launch() for
// each "kernel launch": it runs the runtime-API callbacks the subscriber enabled and, with the
// kinds on, writes a launch-call record and a kernel record sharing a correlation id (only one of
// them at a window's edge, where the kinds are switched one after the other). Like CUPTI
// (as seen on the H200), correlation ids start from 1 again after cuptiFinalize.
#include <cupti.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <set>

#include <pthread.h>

namespace {

std::mutex g_mutex;
CUpti_CallbackFunc g_callback = nullptr;
void* g_userdata = nullptr;
bool g_subscribed = false, g_runtime_domain = false;
std::set<int> g_kinds;
CUpti_BuffersCallbackRequestFunc g_request = nullptr;
CUpti_BuffersCallbackCompleteFunc g_complete = nullptr;
uint8_t* g_buffer = nullptr;
size_t g_size = 0, g_used = 0;
uint32_t g_correlation = 0;
std::atomic<int> g_subscribes{0}, g_finalizes{0}, g_api_records{0}, g_kernel_records{0}, g_busy_subscribes{0};

uint64_t nowNs() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

size_t recordSize(const CUpti_Activity* r) {
    return r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ? sizeof(CUpti_ActivityKernel10) : sizeof(CUpti_ActivityAPI);
}

// Hands the current buffer to the subscriber (under g_mutex; the callback must not call back in).
void completeLocked() {
    if (!g_buffer) return;
    uint8_t* b = g_buffer;
    const size_t size = g_size, used = g_used;
    g_buffer = nullptr;
    g_used = 0;
    if (g_complete) g_complete(nullptr, 0, b, size, used);
}

template <typename T>
void appendLocked(const T& rec) {
    if (g_buffer && g_used + sizeof rec > g_size) completeLocked();
    if (!g_buffer) {
        size_t max_records = 0;
        if (g_request) g_request(&g_buffer, &g_size, &max_records);
        g_used = 0;
        if (!g_buffer || g_size < sizeof rec) {
            g_buffer = nullptr;
            return; // no buffer: the record is dropped
        }
    }
    std::memcpy(g_buffer + g_used, &rec, sizeof rec);
    g_used += sizeof rec;
}

} // namespace

extern "C" {

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata) {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_subscribed) {
        ++g_busy_subscribes;
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    g_subscribed = true;
    g_callback = callback;
    g_userdata = userdata;
    *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&g_callback);
    ++g_subscribes;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_subscribed = false;
    g_runtime_domain = false;
    g_callback = nullptr;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain domain) {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) g_runtime_domain = enable != 0;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId) {
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                    CUpti_BuffersCallbackCompleteFunc complete) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_request = request;
    g_complete = complete;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_kinds.insert(int(kind));
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_kinds.erase(int(kind));
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t) {
    std::lock_guard<std::mutex> lock(g_mutex);
    completeLocked();
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
    uint8_t* next = *record ? reinterpret_cast<uint8_t*>(*record) + recordSize(*record) : buffer;
    if (next + sizeof(CUpti_Activity) > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = reinterpret_cast<CUpti_Activity*>(next);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
    *dropped = 0;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind, uint64_t) { return CUPTI_SUCCESS; }
CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind, uint64_t* last) {
    if (last) *last = 0;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
    *timestamp = nowNs();
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult, const char** str) {
    *str = "mock CUPTI error";
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain, uint32_t, const char** name) {
    *name = "cudaLaunchKernel_v7000";
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute, size_t*, void*) { return CUPTI_SUCCESS; }
CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi(CUpti_CallbackId, uint8_t) { return CUPTI_SUCCESS; }
CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId, uint8_t) { return CUPTI_SUCCESS; }

CUptiResult CUPTIAPI cuptiFinalize(void) {
    std::lock_guard<std::mutex> lock(g_mutex);
    completeLocked();
    g_kinds.clear();
    g_subscribed = false;
    g_runtime_domain = false;
    g_callback = nullptr;
    g_request = nullptr;
    g_complete = nullptr;
    g_correlation = 0;
    ++g_finalizes;
    return CUPTI_SUCCESS;
}

// One launch by the calling thread: the runtime-API callbacks around it, then its records.
__attribute__((visibility("default"))) void mock_launch() {
    CUpti_CallbackFunc cb = nullptr;
    void* ud = nullptr;
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        if (g_subscribed && g_runtime_domain) {
            cb = g_callback;
            ud = g_userdata;
        }
    }
    CUpti_CallbackData data{};
    data.functionName = "cudaLaunchKernel";
    if (cb) {
        data.callbackSite = CUPTI_API_ENTER;
        cb(ud, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &data);
    }
    std::unique_lock<std::mutex> lock(g_mutex);
    const bool api = g_kinds.count(CUPTI_ACTIVITY_KIND_RUNTIME), kernel = g_kinds.count(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (api || kernel) {
        const uint32_t corr = ++g_correlation;
        const uint64_t t = nowNs();
        if (api) {
            CUpti_ActivityAPI a{};
            a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
            a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
            a.start = t;
            a.end = t + 2000;
            a.processId = 1;
            a.threadId = uint32_t(pthread_self());
            a.correlationId = corr;
            appendLocked(a);
            ++g_api_records;
        }
        if (kernel) {
            CUpti_ActivityKernel10 k{};
            k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
            k.start = t + 1000;
            k.end = t + 5000;
            k.name = "mock_kernel";
            k.streamId = 7;
            k.gridX = k.gridY = k.gridZ = k.blockX = k.blockY = k.blockZ = 1;
            k.correlationId = corr;
            appendLocked(k);
            ++g_kernel_records;
        }
    }
    lock.unlock();
    if (cb) { // without the lock, as CUPTI does: the subscriber may unsubscribe and finalise here
        data.callbackSite = CUPTI_API_EXIT;
        cb(ud, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &data);
    }
}

// PM sampling as a GPU that may not be sampled (for the collector's --hw): MOCK_CUPTI_PM=denied (the
// default) refuses it for want of privileges, as CUPTI does for a non-root user on a driver that
// restricts counters; MOCK_CUPTI_PM=busy enables it but finds the counters held by another
// profiler. The rest of the API is there (the collector resolves it all) and unsupported.
static bool pmBusy() {
    const char* m = std::getenv("MOCK_CUPTI_PM");
    return m && std::strcmp(m, "busy") == 0;
}
CUptiResult CUPTIAPI cuptiProfilerInitialize(CUpti_Profiler_Initialize_Params*) { return CUPTI_SUCCESS; }
CUptiResult CUPTIAPI cuptiDeviceGetChipName(CUpti_Device_GetChipName_Params* p) {
    p->pChipName = "GH100";
    return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiPmSamplingEnable(CUpti_PmSampling_Enable_Params* p) {
    if (!pmBusy()) return CUPTI_ERROR_INSUFFICIENT_PRIVILEGES;
    p->pPmSamplingObject = reinterpret_cast<CUpti_PmSampling_Object*>(p); // any non-null handle
    return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiPmSamplingGetCounterAvailability(CUpti_PmSampling_GetCounterAvailability_Params*) {
    return CUPTI_ERROR_HARDWARE_BUSY;
}
#define MOCK_UNSUPPORTED(fn, P) \
    CUptiResult CUPTIAPI fn(P*) { return CUPTI_ERROR_NOT_SUPPORTED; }
MOCK_UNSUPPORTED(cuptiPmSamplingDisable, CUpti_PmSampling_Disable_Params)
MOCK_UNSUPPORTED(cuptiPmSamplingSetConfig, CUpti_PmSampling_SetConfig_Params)
MOCK_UNSUPPORTED(cuptiPmSamplingGetCounterDataSize, CUpti_PmSampling_GetCounterDataSize_Params)
MOCK_UNSUPPORTED(cuptiPmSamplingCounterDataImageInitialize, CUpti_PmSampling_CounterDataImage_Initialize_Params)
MOCK_UNSUPPORTED(cuptiPmSamplingStart, CUpti_PmSampling_Start_Params)
MOCK_UNSUPPORTED(cuptiPmSamplingStop, CUpti_PmSampling_Stop_Params)
MOCK_UNSUPPORTED(cuptiPmSamplingDecodeData, CUpti_PmSampling_DecodeData_Params)
MOCK_UNSUPPORTED(cuptiPmSamplingGetCounterDataInfo, CUpti_PmSampling_GetCounterDataInfo_Params)
MOCK_UNSUPPORTED(cuptiPmSamplingCounterDataGetSampleInfo, CUpti_PmSampling_CounterData_GetSampleInfo_Params)
MOCK_UNSUPPORTED(cuptiProfilerHostInitialize, CUpti_Profiler_Host_Initialize_Params)
MOCK_UNSUPPORTED(cuptiProfilerHostDeinitialize, CUpti_Profiler_Host_Deinitialize_Params)
MOCK_UNSUPPORTED(cuptiProfilerHostConfigAddMetrics, CUpti_Profiler_Host_ConfigAddMetrics_Params)
MOCK_UNSUPPORTED(cuptiProfilerHostGetConfigImageSize, CUpti_Profiler_Host_GetConfigImageSize_Params)
MOCK_UNSUPPORTED(cuptiProfilerHostGetConfigImage, CUpti_Profiler_Host_GetConfigImage_Params)
MOCK_UNSUPPORTED(cuptiProfilerHostGetNumOfPasses, CUpti_Profiler_Host_GetNumOfPasses_Params)
MOCK_UNSUPPORTED(cuptiProfilerHostEvaluateToGpuValues, CUpti_Profiler_Host_EvaluateToGpuValues_Params)
#undef MOCK_UNSUPPORTED

__attribute__((visibility("default"))) void mock_report(FILE* out) {
    std::fprintf(out, "mock cupti: subscribes %d finalizes %d busy %d launch calls recorded %d kernels recorded %d\n",
                 g_subscribes.load(), g_finalizes.load(), g_busy_subscribes.load(), g_api_records.load(), g_kernel_records.load());
}

} // extern "C"
