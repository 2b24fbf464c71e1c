// CUPTI activity records (built from the CUDA 13 CUPTI headers, no GPU needed) decoded into
// capture records.
#include "decode.h"
#include "hw_sampler.h"

#include <dlfcn.h>

#include <cstring>
#include <map>
#include <string>

#include <catch2/catch.hpp>

using namespace sightline::capture;
using namespace sightline::collector;

namespace {

struct Decoded {
    std::vector<char> bytes;
    std::map<std::string, uint32_t> strings;
    DecodeStats stats;
    template <typename T>
    T first(RecordType type) const {
        size_t at = 0;
        while (at < bytes.size()) {
            RecordHeader h;
            std::memcpy(&h, bytes.data() + at, sizeof h);
            if (h.type == uint16_t(type)) {
                T r;
                std::memcpy(&r, bytes.data() + at, sizeof r);
                return r;
            }
            at += h.size;
        }
        FAIL("no record of type " << int(type));
        return T{};
    }
};

template <typename Cupti>
Decoded decode(const Cupti& rec, uint32_t correlation_base = 0) {
    Decoded d;
    DecodeContext ctx;
    ctx.correlation_base = correlation_base;
    ctx.intern = [&](std::string_view s) {
        auto [it, inserted] = d.strings.try_emplace(std::string(s), uint32_t(d.strings.size() + 1));
        return it->second;
    };
    ctx.api_name = [](uint32_t domain, uint32_t cbid) -> std::string_view {
        return domain == 0 && cbid == 211 ? "cudaLaunchKernel" : "";
    };
    decodeActivity(reinterpret_cast<const CUpti_Activity*>(&rec), ctx, d.bytes, d.stats);
    return d;
}

} // namespace

TEST_CASE("a concurrent-kernel record decodes with its launch geometry and correlation", "[decode]") {
    CUpti_ActivityKernel10 k{};
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = 1000;
    k.end = 3500;
    k.name = "nvjet_sm90_tst_256x128";
    k.deviceId = 0;
    k.contextId = 1;
    k.streamId = 7;
    k.correlationId = 334650;
    k.gridX = 1024;
    k.gridY = 2;
    k.gridZ = 1;
    k.blockX = 128;
    k.blockY = 1;
    k.blockZ = 1;
    k.registersPerThread = 32;
    k.staticSharedMemory = 1024;
    k.dynamicSharedMemory = 2048;
    k.graphId = 5;
    k.graphNodeId = 9;
    const Decoded d = decode(k);
    const auto r = d.first<KernelRecord>(RecordType::Kernel);
    CHECK(r.start_ns == 1000);
    CHECK(r.end_ns == 3500);
    CHECK(r.name_id == d.strings.at("nvjet_sm90_tst_256x128"));
    CHECK(r.stream == 7);
    CHECK(r.correlation == 334650);
    CHECK(r.grid[0] == 1024);
    CHECK(r.grid[1] == 2);
    CHECK(r.block[0] == 128);
    CHECK(r.registers == 32);
    CHECK(r.shared_memory == 3072);
    CHECK(r.graph_id_and_node == ((uint64_t(5) << 32) | 9));
}

TEST_CASE("memcpy, memset, API, sync, external correlation, marker, overhead and device records decode", "[decode]") {
    CUpti_ActivityMemcpy6 m{};
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
    m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.bytes = 4096;
    m.start = 10;
    m.end = 20;
    m.correlationId = 77;
    const auto mr = decode(m).first<MemcpyRecord>(RecordType::Memcpy);
    CHECK(mr.bytes == 4096);
    CHECK(mr.copy_kind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD);
    CHECK(mr.correlation == 77);

    CUpti_ActivityMemset4 s{};
    s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    s.bytes = 4;
    s.value = 0;
    s.start = 30;
    s.end = 40;
    s.correlationId = 78;
    CHECK(decode(s).first<MemsetRecord>(RecordType::Memset).correlation == 78);

    CUpti_ActivityAPI a{};
    a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a.cbid = 211;
    a.start = 5;
    a.end = 9;
    a.threadId = 609;
    a.correlationId = 334650;
    const Decoded da = decode(a);
    const auto ar = da.first<ApiRecord>(RecordType::Api);
    CHECK(ar.domain == uint32_t(ApiDomain::Runtime));
    CHECK(ar.name_id == da.strings.at("cudaLaunchKernel"));
    CHECK(ar.tid == 609);
    a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
    a.cbid = 9999; // no known name: left unnamed, the analyzer says "cbid 9999"
    const auto dr = decode(a).first<ApiRecord>(RecordType::Api);
    CHECK(dr.domain == uint32_t(ApiDomain::Driver));
    CHECK(dr.name_id == 0);

    CUpti_ActivitySynchronization2 sy{};
    sy.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    sy.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
    sy.correlationId = 5;
    CHECK(decode(sy).first<SyncRecord>(RecordType::Sync).type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE);

    CUpti_ActivityExternalCorrelation x{};
    x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    x.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
    x.externalId = 84481;
    x.correlationId = 334650;
    const auto xr = decode(x).first<ExternalCorrelationRecord>(RecordType::ExternalCorrelation);
    CHECK(xr.external_id == 84481);
    CHECK(xr.correlation == 334650);

    CUpti_ActivityMarker2 mk{};
    mk.kind = CUPTI_ACTIVITY_KIND_MARKER;
    mk.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
    mk.timestamp = 123;
    mk.id = 42;
    mk.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
    mk.objectId.pt.threadId = 609;
    mk.name = "sightline.batch real_tokens=10 padded_tokens=16";
    mk.domain = nullptr;
    const Decoded dm = decode(mk);
    const auto mr2 = dm.first<MarkerRecord>(RecordType::Marker);
    CHECK(mr2.flags == uint32_t(MarkerFlags::Start));
    CHECK(mr2.tid == 609);
    CHECK(mr2.name_id == dm.strings.at("sightline.batch real_tokens=10 padded_tokens=16"));
    CHECK(mr2.domain_id == 0);

    CUpti_ActivityOverhead3 o{};
    o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
    o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST;
    o.start = 1;
    o.end = 2;
    CHECK(decode(o).first<OverheadRecord>(RecordType::Overhead).kind == CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST);

    CUpti_ActivityDevice5 dev{};
    dev.kind = CUPTI_ACTIVITY_KIND_DEVICE;
    dev.name = "NVIDIA H200";
    dev.numMultiprocessors = 132;
    dev.computeCapabilityMajor = 9;
    dev.globalMemorySize = 150'000'000'000ull;
    dev.maxWarpsPerMultiprocessor = 64;
    dev.numThreadsPerWarp = 32;
    const auto devr = decode(dev).first<DeviceRecord>(RecordType::Device);
    CHECK(devr.sm_count == 132);
    CHECK(devr.max_threads_per_sm == 2048);
}

TEST_CASE("a later CUPTI session's correlation ids are shifted past the earlier ones", "[decode]") {
    // After a detach CUPTI numbers launches from 1 again; one base shifts the kernel, its launch
    // call and its external correlation alike, so they still meet, and "none" (0) stays none.
    CUpti_ActivityKernel10 k{};
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = 10;
    k.end = 20;
    k.correlationId = 3;
    CUpti_ActivityAPI a{};
    a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a.cbid = 211;
    a.start = 5;
    a.end = 9;
    a.correlationId = 3;
    CUpti_ActivityExternalCorrelation x{};
    x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    x.externalId = 7;
    x.correlationId = 3;
    const Decoded dk = decode(k, 50000);
    CHECK(dk.first<KernelRecord>(RecordType::Kernel).correlation == 50003);
    CHECK(dk.stats.max_correlation == 50003);
    CHECK(decode(a, 50000).first<ApiRecord>(RecordType::Api).correlation == 50003);
    CHECK(decode(x, 50000).first<ExternalCorrelationRecord>(RecordType::ExternalCorrelation).correlation == 50003);
    CHECK(decode(k).first<KernelRecord>(RecordType::Kernel).correlation == 3);
    k.correlationId = 0;
    const Decoded none = decode(k, 50000);
    CHECK(none.first<KernelRecord>(RecordType::Kernel).correlation == 0);
    CHECK(none.stats.max_correlation == 0);
}

TEST_CASE("kinds the collector does not use are counted, not decoded", "[decode]") {
    CUpti_ActivityAPI a{};
    a.kind = CUPTI_ACTIVITY_KIND_NAME;
    const Decoded d = decode(a);
    CHECK(d.bytes.empty());
    CHECK(d.stats.unknown == 1);
}

TEST_CASE("GPU activities flushed before they finished are counted, not written", "[decode]") {
    CUpti_ActivityKernel10 k{};
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.name = "nvjet_sm90_tst_256x128"; // start and end left at zero, as a forced flush leaves them
    Decoded d = decode(k);
    CHECK(d.bytes.empty());
    CHECK(d.stats.incomplete == 1);
    CUpti_ActivityMemset4 m{};
    m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    m.start = 500;
    m.end = 400; // ends before it starts
    d = decode(m);
    CHECK(d.bytes.empty());
    CHECK(d.stats.incomplete == 1);
    m.end = 900;
    d = decode(m);
    CHECK_FALSE(d.bytes.empty());
    CHECK(d.stats.incomplete == 0);
}

TEST_CASE("the hardware sampler's metric sets take one pass on Hopper, by CUPTI's own host API", "[decode][hardware]") {
    // CUPTI's profiler host library answers without a GPU (chip GH100: H100, H200). The CUDA
    // toolkit's CUPTI is where scripts/setup.sh installs it; PyTorch's copy on a GPU machine.
    void* lib = nullptr;
    for (const char* path : {"libcupti.so.13", "/usr/local/cuda/lib64/libcupti.so.13", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"})
        if ((lib = dlopen(path, RTLD_LAZY | RTLD_LOCAL))) break;
    REQUIRE(lib != nullptr); // the CUDA 13 toolkit is a dependency of the build (DESIGN.md)
    std::string why;
    CHECK(sightline::collector::hwPassCount(lib, "GH100", sightline::collector::hwMetrics(), why) == 1);
    INFO(why);
    CHECK(sightline::collector::hwPassCount(lib, "GH100", sightline::collector::hwFallbackMetrics(), why) == 1);
    // A metric PM sampling cannot take in one pass is told apart (the sampler then falls back).
    const std::vector<const char*> heavy = {"sm__throughput.avg.pct_of_peak_sustained_elapsed"};
    CHECK(sightline::collector::hwPassCount(lib, "GH100", heavy, why) != 1);
}
