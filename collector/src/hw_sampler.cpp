#include "hw_sampler.h"

#include "quiet_thread.h"

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include <csignal>
#include <dlfcn.h>

#include <cupti.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>

namespace sightline::collector {

using namespace capture;

const std::vector<const char*>& hwMetrics() {
    static const std::vector<const char*> m = {
        "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
        "sm__warps_active.avg.pct_of_peak_sustained_elapsed",
        "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__bytes_read.sum",
        "dram__bytes_write.sum",
        "gr__cycles_active.avg.pct_of_peak_sustained_elapsed",
    };
    return m;
}

const std::vector<const char*>& hwFallbackMetrics() {
    static const std::vector<const char*> m = {
        "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
        "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "gr__cycles_active.avg.pct_of_peak_sustained_elapsed",
    };
    return m;
}

namespace {

// A CUPTI parameter block: zeroed, with its size set.
template <typename P>
P params(size_t size) {
    P p{};
    p.structSize = size;
    return p;
}

// The CUPTI entry points of PM sampling and the profiler host, resolved with dlsym.
struct PmApi {
    decltype(&cuptiGetResultString) resultString = nullptr;
    decltype(&cuptiGetTimestamp) timestamp = nullptr;
    decltype(&cuptiProfilerInitialize) profilerInit = nullptr;
    decltype(&cuptiDeviceGetChipName) chipName = nullptr;
    decltype(&cuptiPmSamplingEnable) enable = nullptr;
    decltype(&cuptiPmSamplingGetCounterAvailability) availability = nullptr;
    decltype(&cuptiPmSamplingSetConfig) setConfig = nullptr;
    decltype(&cuptiPmSamplingGetCounterDataSize) dataSize = nullptr;
    decltype(&cuptiPmSamplingCounterDataImageInitialize) dataInit = nullptr;
    decltype(&cuptiPmSamplingStart) start = nullptr;
    decltype(&cuptiPmSamplingStop) stop = nullptr;
    decltype(&cuptiPmSamplingDecodeData) decode = nullptr;
    decltype(&cuptiPmSamplingGetCounterDataInfo) dataInfo = nullptr;
    decltype(&cuptiPmSamplingCounterDataGetSampleInfo) sampleInfo = nullptr;
    decltype(&cuptiProfilerHostInitialize) hostInit = nullptr;
    decltype(&cuptiProfilerHostDeinitialize) hostDeinit = nullptr;
    decltype(&cuptiProfilerHostConfigAddMetrics) addMetrics = nullptr;
    decltype(&cuptiProfilerHostGetConfigImageSize) configSize = nullptr;
    decltype(&cuptiProfilerHostGetConfigImage) configImage = nullptr;
    decltype(&cuptiProfilerHostGetNumOfPasses) passes = nullptr;
    decltype(&cuptiProfilerHostEvaluateToGpuValues) evaluate = nullptr;

    bool load(void* lib) {
        bool ok = true;
        auto get = [&](auto& fn, const char* name) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
            ok = ok && fn;
        };
        get(resultString, "cuptiGetResultString"), get(timestamp, "cuptiGetTimestamp");
        get(profilerInit, "cuptiProfilerInitialize"), get(chipName, "cuptiDeviceGetChipName");
        get(enable, "cuptiPmSamplingEnable");
        get(availability, "cuptiPmSamplingGetCounterAvailability"), get(setConfig, "cuptiPmSamplingSetConfig");
        get(dataSize, "cuptiPmSamplingGetCounterDataSize"), get(dataInit, "cuptiPmSamplingCounterDataImageInitialize");
        get(start, "cuptiPmSamplingStart"), get(stop, "cuptiPmSamplingStop"), get(decode, "cuptiPmSamplingDecodeData");
        get(dataInfo, "cuptiPmSamplingGetCounterDataInfo"), get(sampleInfo, "cuptiPmSamplingCounterDataGetSampleInfo");
        get(hostInit, "cuptiProfilerHostInitialize"), get(hostDeinit, "cuptiProfilerHostDeinitialize");
        get(addMetrics, "cuptiProfilerHostConfigAddMetrics"), get(configSize, "cuptiProfilerHostGetConfigImageSize");
        get(configImage, "cuptiProfilerHostGetConfigImage"), get(passes, "cuptiProfilerHostGetNumOfPasses");
        get(evaluate, "cuptiProfilerHostEvaluateToGpuValues");
        return ok;
    }
    std::string text(CUptiResult r) const {
        const char* s = nullptr;
        if (resultString) resultString(r, &s);
        return s ? s : "CUPTI error " + std::to_string(int(r));
    }
};

// Why counters cannot be read, in words a user can act on.
std::string explain(const PmApi& api, const char* step, CUptiResult r) {
    if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES || r == CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES)
        return "this user may not read the GPU's performance counters (CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: run as root, "
               "or load the nvidia module with NVreg_RestrictProfilingToAdminUsers=0)";
    if (r == CUPTI_ERROR_HARDWARE_BUSY || r == CUPTI_ERROR_INVALID_OPERATION)
        return std::string("another profiler holds the GPU's counters (nsys, ncu, DCGM profiling, another --hw job): ") + step +
            ": " + api.text(r);
    return std::string(step) + ": " + api.text(r);
}

// A configured host object: the metric set's config image and what evaluates samples.
struct HostConfig {
    CUpti_Profiler_Host_Object* host = nullptr;
    std::vector<uint8_t> image;
    CUptiResult result = CUPTI_SUCCESS;
    const char* step = "";
};

HostConfig configure(const PmApi& api, const char* chip, const uint8_t* availability, const std::vector<const char*>& metrics) {
    HostConfig c;
    auto ip = params<CUpti_Profiler_Host_Initialize_Params>(CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
    ip.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
    ip.pChipName = chip;
    ip.pCounterAvailabilityImage = availability;
    if ((c.result = api.hostInit(&ip)) != CUPTI_SUCCESS) return c.step = "cuptiProfilerHostInitialize", c;
    c.host = ip.pHostObject;
    auto ap = params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
    ap.pHostObject = c.host;
    ap.ppMetricNames = const_cast<const char**>(metrics.data());
    ap.numMetrics = metrics.size();
    if ((c.result = api.addMetrics(&ap)) != CUPTI_SUCCESS) return c.step = "cuptiProfilerHostConfigAddMetrics", c;
    auto sp = params<CUpti_Profiler_Host_GetConfigImageSize_Params>(CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
    sp.pHostObject = c.host;
    if ((c.result = api.configSize(&sp)) != CUPTI_SUCCESS) return c.step = "cuptiProfilerHostGetConfigImageSize", c;
    c.image.resize(sp.configImageSize);
    auto gp = params<CUpti_Profiler_Host_GetConfigImage_Params>(CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
    gp.pHostObject = c.host;
    gp.configImageSize = c.image.size();
    gp.pConfigImage = c.image.data();
    if ((c.result = api.configImage(&gp)) != CUPTI_SUCCESS) c.step = "cuptiProfilerHostGetConfigImage";
    return c;
}

void release(const PmApi& api, HostConfig& c) {
    if (!c.host) return;
    auto dp = params<CUpti_Profiler_Host_Deinitialize_Params>(CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
    dp.pHostObject = c.host;
    api.hostDeinit(&dp);
    c.host = nullptr;
}

size_t passCount(const PmApi& api, HostConfig& c) {
    auto np = params<CUpti_Profiler_Host_GetNumOfPasses_Params>(CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
    np.configImageSize = c.image.size();
    np.pConfigImage = c.image.data();
    return api.passes(&np) == CUPTI_SUCCESS ? np.numOfPasses : 0;
}

constexpr uint32_t kMaxSamplesPerImage = 2048;
constexpr size_t kHardwareBuffer = size_t(128) << 20;

// One device's sampling, from enabling to disabling: every call of CUPTI's is made here, on the
// sampler's thread.
class Session {
public:
    Session(const PmApi& api, Recorder& rec, uint64_t interval_ns) : m_api(api), m_rec(rec), m_interval(interval_ns) {}
    bool open(int device, std::string& why);
    bool startSampling(std::string& why);
    void stopSampling();
    // Hands every completed sample over; false (with `why`) when sampling had to end (overflow).
    bool decode(std::string& why);
    void close();
    bool running() const { return m_running; }
    void status(int32_t result, const std::string& message, uint64_t cupti_ns);

private:
    bool initImage();
    void emitSample(size_t index);

    const PmApi& m_api;
    Recorder& m_rec;
    uint64_t m_interval;
    int m_device = -1;
    CUpti_PmSampling_Object* m_obj = nullptr;
    HostConfig m_config;
    std::vector<const char*> m_metrics;
    std::vector<uint32_t> m_metric_ids;
    std::vector<uint8_t> m_data;
    size_t m_emitted = 0;
    uint32_t m_overflows = 0;
    bool m_running = false;
};

void Session::status(int32_t result, const std::string& message, uint64_t cupti_ns) {
    HwStatusRecord r;
    initHeader(r, RecordType::HwStatus);
    r.interval_ns = m_interval;
    r.cupti_ns = cupti_ns;
    r.device = uint32_t(m_device);
    r.result = result;
    r.message_id = message.empty() ? 0 : m_rec.intern(message);
    r.overflows = m_overflows;
    m_rec.emit(r);
}

bool Session::open(int device, std::string& why) {
    m_device = device;
    auto pi = params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
    if (CUptiResult r = m_api.profilerInit(&pi); r != CUPTI_SUCCESS) return why = explain(m_api, "cuptiProfilerInitialize", r), false;
    auto cp = params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
    cp.deviceIndex = size_t(device);
    if (CUptiResult r = m_api.chipName(&cp); r != CUPTI_SUCCESS) return why = explain(m_api, "cuptiDeviceGetChipName", r), false;
    auto ep = params<CUpti_PmSampling_Enable_Params>(CUpti_PmSampling_Enable_Params_STRUCT_SIZE);
    ep.deviceIndex = size_t(device);
    if (CUptiResult r = m_api.enable(&ep); r != CUPTI_SUCCESS) return why = explain(m_api, "cuptiPmSamplingEnable", r), false;
    m_obj = ep.pPmSamplingObject;
    auto ap = params<CUpti_PmSampling_GetCounterAvailability_Params>(CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE);
    ap.deviceIndex = size_t(device);
    std::vector<uint8_t> avail;
    CUptiResult r = m_api.availability(&ap);
    if (r == CUPTI_SUCCESS) {
        avail.resize(ap.counterAvailabilityImageSize);
        ap.pCounterAvailabilityImage = avail.data();
        r = m_api.availability(&ap);
    }
    if (r != CUPTI_SUCCESS) return why = explain(m_api, "cuptiPmSamplingGetCounterAvailability", r), false;
    for (const auto* set : {&hwMetrics(), &hwFallbackMetrics()}) {
        release(m_api, m_config);
        m_config = configure(m_api, cp.pChipName, avail.data(), *set);
        if (m_config.result != CUPTI_SUCCESS || passCount(m_api, m_config) != 1) continue;
        auto sp = params<CUpti_PmSampling_SetConfig_Params>(CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE);
        sp.pPmSamplingObject = m_obj;
        sp.configSize = m_config.image.size();
        sp.pConfig = m_config.image.data();
        sp.hardwareBufferSize = kHardwareBuffer;
        sp.samplingInterval = m_interval;
        sp.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
        sp.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
        if ((r = m_api.setConfig(&sp)) != CUPTI_SUCCESS) continue;
        m_metrics = *set;
        break;
    }
    if (m_metrics.empty())
        return why = explain(m_api, m_config.result != CUPTI_SUCCESS ? m_config.step : "cuptiPmSamplingSetConfig",
                             m_config.result != CUPTI_SUCCESS ? m_config.result : r),
               false;
    for (const char* m : m_metrics) m_metric_ids.push_back(m_rec.intern(m));
    return initImage() || (why = "cannot set up the counter data image", false);
}

bool Session::initImage() {
    auto sp = params<CUpti_PmSampling_GetCounterDataSize_Params>(CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE);
    sp.pPmSamplingObject = m_obj;
    sp.pMetricNames = const_cast<const char**>(m_metrics.data());
    sp.numMetrics = m_metrics.size();
    sp.maxSamples = kMaxSamplesPerImage;
    if (m_api.dataSize(&sp) != CUPTI_SUCCESS) return false;
    m_data.assign(sp.counterDataSize, 0);
    auto ip = params<CUpti_PmSampling_CounterDataImage_Initialize_Params>(CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE);
    ip.pPmSamplingObject = m_obj;
    ip.counterDataSize = m_data.size();
    ip.pCounterData = m_data.data();
    m_emitted = 0;
    return m_api.dataInit(&ip) == CUPTI_SUCCESS;
}

bool Session::startSampling(std::string& why) {
    auto sp = params<CUpti_PmSampling_Start_Params>(CUpti_PmSampling_Start_Params_STRUCT_SIZE);
    sp.pPmSamplingObject = m_obj;
    if (CUptiResult r = m_api.start(&sp); r != CUPTI_SUCCESS) return why = explain(m_api, "cuptiPmSamplingStart", r), false;
    uint64_t now = 0;
    m_api.timestamp(&now);
    status(0, "", now);
    m_running = true;
    return true;
}

void Session::stopSampling() {
    auto sp = params<CUpti_PmSampling_Stop_Params>(CUpti_PmSampling_Stop_Params_STRUCT_SIZE);
    sp.pPmSamplingObject = m_obj;
    m_api.stop(&sp);
    m_running = false;
}

void Session::emitSample(size_t index) {
    auto ip = params<CUpti_PmSampling_CounterData_GetSampleInfo_Params>(CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE);
    ip.pPmSamplingObject = m_obj;
    ip.pCounterDataImage = m_data.data();
    ip.counterDataImageSize = m_data.size();
    ip.sampleIndex = index;
    if (m_api.sampleInfo(&ip) != CUPTI_SUCCESS) return;
    double values[16] = {};
    const size_t n = std::min(m_metrics.size(), std::size(values));
    auto ep = params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
    ep.pHostObject = m_config.host;
    ep.pCounterDataImage = m_data.data();
    ep.counterDataImageSize = m_data.size();
    ep.rangeIndex = index;
    ep.ppMetricNames = const_cast<const char**>(m_metrics.data());
    ep.numMetrics = n;
    ep.pMetricValues = values;
    if (m_api.evaluate(&ep) != CUPTI_SUCCESS) return;
    alignas(8) char buf[sizeof(HwSampleRecord) + 16 * sizeof(HwValue)];
    auto* r = reinterpret_cast<HwSampleRecord*>(buf);
    initHeader(*r, RecordType::HwSample);
    r->h.size = uint32_t(sizeof(HwSampleRecord) + n * sizeof(HwValue));
    r->start_ns = ip.startTimestamp;
    r->end_ns = ip.endTimestamp;
    r->device = uint32_t(m_device);
    r->count = uint32_t(n);
    auto* v = reinterpret_cast<HwValue*>(buf + sizeof(HwSampleRecord));
    for (size_t i = 0; i < n; ++i) v[i] = HwValue{m_metric_ids[i], 0, values[i]};
    m_rec.emitBytes(buf, r->h.size);
}

bool Session::decode(std::string& why) {
    for (int round = 0; round < 64; ++round) { // each round fills at most one image
        auto dp = params<CUpti_PmSampling_DecodeData_Params>(CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE);
        dp.pPmSamplingObject = m_obj;
        dp.pCounterDataImage = m_data.data();
        dp.counterDataImageSize = m_data.size();
        const CUptiResult r = m_api.decode(&dp);
        auto ip = params<CUpti_PmSampling_GetCounterDataInfo_Params>(CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE);
        ip.pCounterDataImage = m_data.data();
        ip.counterDataImageSize = m_data.size();
        if (m_api.dataInfo(&ip) == CUPTI_SUCCESS)
            for (; m_emitted < ip.numCompletedSamples; ++m_emitted) emitSample(m_emitted);
        if (dp.overflow || r == CUPTI_ERROR_OUT_OF_MEMORY) {
            ++m_overflows;
            why = "the GPU's sample buffer overflowed (samples lost); hardware sampling stopped: try a longer --hw-interval";
            return false;
        }
        if (r != CUPTI_SUCCESS) return why = explain(m_api, "cuptiPmSamplingDecodeData", r), false;
        if (dp.decodeStopReason != CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL) return true;
        if (!initImage()) return why = "cannot set up the counter data image", false;
    }
    return true;
}

// PM sampling is left enabled (the driver ends it with the process): disabling it finalises all
// of CUPTI, whose activity records the collector still flushes after the sampler stops.
void Session::close() { release(m_api, m_config); }

} // namespace

// What the sampler's thread and the collector share: CUPTI's PM sampling entry points and what
// the collector asks for.
struct HwSampler::State {
    PmApi api;
    std::mutex mutex;
    std::condition_variable wake, finished;
    bool want = false, stop = false, done = false, started = false;
    int device = -1;
};

namespace {

void logLine(const HwOptions& o, const std::string& why) {
    if (!o.log) return;
    const std::string line = "hardware counters not recorded: " + why + "; everything else is recorded";
    o.log(line.c_str());
}

// The sampler's thread: waits for a device and a window, then samples while windows are open,
// decoding every few milliseconds so that the GPU's buffer never fills.
void samplerLoop(HwSampler::State* state, Recorder* rec, HwOptions o) {
    HwSampler::State& s = *state;
    std::unique_lock<std::mutex> lock(s.mutex);
    s.wake.wait(lock, [&] { return s.stop || (s.want && s.device >= 0); });
    Session session(s.api, *rec, o.interval_ns);
    std::string why;
    const int device = s.device;
    const bool stopped = s.stop;
    lock.unlock();
    bool ok = !stopped && session.open(device, why);
    if (!ok && !why.empty()) session.status(-1, why, 0);
    const auto period = std::chrono::milliseconds(o.interval_ns < 20'000 ? 2 : 10);
    while (ok) {
        lock.lock();
        s.wake.wait_for(lock, session.running() ? period : std::chrono::milliseconds(200), [&] { return s.stop || s.want != session.running(); });
        const bool stop = s.stop, want = s.want && !stop;
        lock.unlock();
        const bool was_running = session.running();
        if (want && !was_running) ok = session.startSampling(why);
        if (ok && !want && was_running) session.stopSampling();
        // While sampling, and once after it stops: the rest of the window's samples.
        if (ok && (session.running() || was_running)) ok = session.decode(why);
        if (!ok) session.status(-1, why, 0);
        if (stop) break;
    }
    if (session.running()) session.stopSampling();
    session.close();
    if (!why.empty()) logLine(o, why);
    lock.lock();
    s.done = true;
    s.finished.notify_all();
}

} // namespace

size_t hwPassCount(void* cupti_lib, const char* chip, const std::vector<const char*>& metrics, std::string& why) {
    PmApi api;
    if (!cupti_lib || !api.load(cupti_lib)) return why = "this CUPTI has no PM sampling API (CUDA 12.6 or later)", 0;
    HostConfig c = configure(api, chip, nullptr, metrics);
    const size_t n = c.result == CUPTI_SUCCESS ? passCount(api, c) : 0;
    if (c.result != CUPTI_SUCCESS) why = explain(api, c.step, c.result);
    release(api, c);
    return n;
}

void HwSampler::start(Recorder& recorder, const HwOptions& options, void* cupti_lib) {
    State& s = *m_state;
    if (!s.api.load(cupti_lib)) return logLine(options, "this CUPTI has no PM sampling API (CUDA 12.6 or later)");
    if (!startQuietThread([state = m_state, rec = &recorder, options] { samplerLoop(state, rec, options); }))
        return logLine(options, "no thread for the sampler");
    std::lock_guard<std::mutex> lock(s.mutex);
    s.started = true;
}

void HwSampler::setDevice(int device) {
    State& s = *m_state;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        if (s.device >= 0) return;
        s.device = device;
    }
    s.wake.notify_all();
}

void HwSampler::setRecording(bool on) {
    State& s = *m_state;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        s.want = on;
    }
    s.wake.notify_all();
}

void HwSampler::stop(std::chrono::milliseconds wait) {
    State& s = *m_state;
    std::unique_lock<std::mutex> lock(s.mutex);
    s.stop = true;
    s.wake.notify_all();
    if (s.started) s.finished.wait_for(lock, wait, [&] { return s.done; });
}

HwSampler::HwSampler() : m_state(new State()) {}

HwSampler& hwSampler() {
    static auto* h = new HwSampler();
    return *h;
}

} // namespace sightline::collector
