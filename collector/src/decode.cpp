#include "decode.h"

#include <cstring>

namespace sightline::collector {

using namespace capture;

namespace {

template <typename T>
void append(std::vector<char>& out, const T& rec) {
    const auto* p = reinterpret_cast<const char*>(&rec);
    out.insert(out.end(), p, p + sizeof rec);
}

uint32_t correlation(uint32_t id, const DecodeContext& ctx, DecodeStats& stats) {
    if (id == 0) return 0;
    const uint32_t v = id + ctx.correlation_base;
    if (v > stats.max_correlation) stats.max_correlation = v;
    return v;
}

// The fields CUPTI's kernel, memcpy and memset records share.
template <typename Out, typename In>
void gpuCommon(Out& r, const In& a, const DecodeContext& ctx, DecodeStats& stats) {
    r.start_ns = a.start;
    r.end_ns = a.end;
    r.device = a.deviceId;
    r.context = a.contextId;
    r.stream = a.streamId;
    r.correlation = correlation(a.correlationId, ctx, stats);
}

// A GPU activity flushed before it finished carries no times (CUPTI writes zeros): it cannot be
// placed on the timeline, so it is counted, not written.
template <typename In>
bool untimed(const In& a, DecodeStats& stats) {
    if (hasGpuTimes(a.start, a.end)) return false;
    ++stats.incomplete;
    return true;
}

uint32_t nameId(const DecodeContext& ctx, const char* name) {
    return name ? ctx.intern(std::string_view(name)) : 0;
}

} // namespace

// One case per CUPTI activity kind, each a straight copy of the activity's fields into its capture
// record: kept as one switch (over 100 lines) so that the whole mapping reads in one place.
void decodeActivity(const CUpti_Activity* record, const DecodeContext& ctx, std::vector<char>& out, DecodeStats& stats) {
    ++stats.records;
    switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        if (untimed(*k, stats)) return;
        KernelRecord r;
        initHeader(r, RecordType::Kernel);
        gpuCommon(r, *k, ctx, stats);
        r.graph_id_and_node = (uint64_t(k->graphId) << 32) | (k->graphNodeId & 0xffffffffu);
        r.name_id = nameId(ctx, k->name);
        r.grid[0] = k->gridX;
        r.grid[1] = k->gridY;
        r.grid[2] = k->gridZ;
        r.block[0] = k->blockX;
        r.block[1] = k->blockY;
        r.block[2] = k->blockZ;
        r.registers = k->registersPerThread;
        r.shared_memory = uint32_t(k->staticSharedMemory) + uint32_t(k->dynamicSharedMemory);
        append(out, r);
        return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        if (untimed(*m, stats)) return;
        MemcpyRecord r;
        initHeader(r, RecordType::Memcpy);
        gpuCommon(r, *m, ctx, stats);
        r.bytes = m->bytes;
        r.copy_kind = m->copyKind;
        r.src_kind = m->srcKind;
        r.dst_kind = m->dstKind;
        append(out, r);
        return;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        if (untimed(*m, stats)) return;
        MemsetRecord r;
        initHeader(r, RecordType::Memset);
        gpuCommon(r, *m, ctx, stats);
        r.bytes = m->bytes;
        r.value = m->value;
        append(out, r);
        return;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
        const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
        ApiRecord r;
        initHeader(r, RecordType::Api);
        r.start_ns = a->start;
        r.end_ns = a->end;
        r.tid = int64_t(a->threadId);
        r.correlation = correlation(a->correlationId, ctx, stats);
        r.cbid = uint32_t(a->cbid);
        r.domain = record->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? uint32_t(ApiDomain::Runtime) : uint32_t(ApiDomain::Driver);
        r.return_value = int32_t(a->returnValue);
        const std::string_view name = ctx.api_name(r.domain, r.cbid);
        r.name_id = name.empty() ? 0 : ctx.intern(name);
        append(out, r);
        return;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
        SyncRecord r;
        initHeader(r, RecordType::Sync);
        r.start_ns = s->start;
        r.end_ns = s->end;
        r.type = uint32_t(s->type);
        r.context = s->contextId;
        r.stream = s->streamId;
        r.correlation = correlation(s->correlationId, ctx, stats);
        r.event = s->cudaEventId;
        append(out, r);
        return;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
        ExternalCorrelationRecord r;
        initHeader(r, RecordType::ExternalCorrelation);
        r.external_id = e->externalId;
        r.external_kind = uint32_t(e->externalKind);
        r.correlation = correlation(e->correlationId, ctx, stats);
        append(out, r);
        return;
    }
    case CUPTI_ACTIVITY_KIND_MARKER: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMarker2*>(record);
        MarkerRecord r;
        initHeader(r, RecordType::Marker);
        r.ts_ns = m->timestamp;
        r.tid = m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? int64_t(m->objectId.pt.threadId) : 0;
        r.id = m->id;
        r.flags = (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) ? uint32_t(MarkerFlags::Instant)
            : (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START)             ? uint32_t(MarkerFlags::Start)
            : (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END)               ? uint32_t(MarkerFlags::End)
                                                                        : 0;
        r.name_id = nameId(ctx, m->name);
        r.domain_id = nameId(ctx, m->domain);
        append(out, r);
        return;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
        const auto* o = reinterpret_cast<const CUpti_ActivityOverhead3*>(record);
        OverheadRecord r;
        initHeader(r, RecordType::Overhead);
        r.start_ns = o->start;
        r.end_ns = o->end;
        r.kind = uint32_t(o->overheadKind);
        append(out, r);
        return;
    }
    case CUPTI_ACTIVITY_KIND_DEVICE: {
        const auto* d = reinterpret_cast<const CUpti_ActivityDevice5*>(record);
        DeviceRecord r;
        initHeader(r, RecordType::Device);
        r.id = d->id;
        r.name_id = nameId(ctx, d->name);
        r.total_memory = d->globalMemorySize;
        r.compute_major = d->computeCapabilityMajor;
        r.compute_minor = d->computeCapabilityMinor;
        r.sm_count = d->numMultiprocessors;
        r.max_threads_per_sm = d->maxWarpsPerMultiprocessor * d->numThreadsPerWarp;
        r.shared_memory_per_sm = d->maxSharedMemoryPerMultiprocessor;
        r.registers_per_sm = d->maxRegistersPerMultiprocessor;
        r.core_clock_khz = d->coreClockRate;
        append(out, r);
        return;
    }
    default:
        ++stats.unknown;
        return;
    }
}

} // namespace sightline::collector
