// libsightline_torch.so: records PyTorch ops through a global RecordFunction callback and pushes
// each op's id as a CUPTI external correlation id around it, so every kernel maps to the op that
// launched it. Loaded by the collector once libtorch is in the process; talks to it only through
// SightlineCollectorApi.
#include "sightline/collector_api.h"

#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>

#include <atomic>
#include <string>
#include <string_view>
#include <unordered_map>

#include <sys/syscall.h>
#include <unistd.h>

namespace {

using sightline::capture::OpKind;
using sightline::capture::OpRecord;
using sightline::capture::RecordType;

const SightlineCollectorApi* g_api = nullptr;
std::atomic<uint64_t> g_next_id{1};

struct ThreadState {
    int64_t tid = 0;
    std::unordered_map<std::string, uint32_t> names; // this thread's interned names
};
thread_local ThreadState t_state;

int64_t threadId() {
    if (t_state.tid == 0) t_state.tid = int64_t(syscall(SYS_gettid));
    return t_state.tid;
}

uint32_t internCached(std::string_view name) {
    auto& cache = t_state.names;
    auto it = cache.find(std::string(name));
    if (it != cache.end()) return it->second;
    const uint32_t id = g_api->intern(name.data(), name.size());
    cache.emplace(std::string(name), id);
    return id;
}

// Kineto's "Input Dims" / "Input type" text: one entry per input, [] for non-tensors.
void describeInputs(const at::RecordFunction& fn, std::string& dims, std::string& types) {
    dims = "[";
    types = "[";
    bool first = true;
    for (const c10::IValue& v : fn.inputs()) {
        if (!first) {
            dims += ", ";
            types += ", ";
        }
        first = false;
        if (v.isTensor() && v.toTensor().defined()) {
            const at::Tensor& t = v.toTensor();
            dims += "[";
            bool f = true;
            for (int64_t s : t.sizes()) {
                if (!f) dims += ", ";
                f = false;
                dims += std::to_string(s);
            }
            dims += "]";
            types += "\"" + std::string(t.dtype().name()) + "\"";
        } else {
            dims += "[]";
            types += v.isScalar() ? "\"Scalar\"" : "\"\"";
        }
    }
    dims += "]";
    types += "]";
}

struct OpContext : public at::ObserverContext {
    bool counting_only = false;
    uint64_t start_ns = 0;
    uint64_t id = 0;
    uint32_t shapes_id = 0, dtypes_id = 0;
};

std::unique_ptr<at::ObserverContext> onEnter(const at::RecordFunction& fn) {
    const bool user = fn.scope() == at::RecordScope::USER_SCOPE;
    if (!g_api->enabled()) {
        // Outside a capture window only user ranges are followed, to count steps.
        if (!user) return nullptr;
        auto ctx = std::make_unique<OpContext>();
        ctx->counting_only = true;
        return ctx;
    }
    auto ctx = std::make_unique<OpContext>();
    ctx->id = g_next_id.fetch_add(1, std::memory_order_relaxed);
    if (g_api->record_shapes && fn.scope() != at::RecordScope::USER_SCOPE) {
        std::string dims, types;
        describeInputs(fn, dims, types);
        ctx->shapes_id = g_api->intern(dims.data(), dims.size());
        ctx->dtypes_id = g_api->intern(types.data(), types.size());
    }
    g_api->push_correlation(ctx->id);
    ctx->start_ns = g_api->now_ns();
    return ctx;
}

void onExit(const at::RecordFunction& fn, at::ObserverContext* base) {
    auto* ctx = static_cast<OpContext*>(base);
    if (!ctx) return;
    if (ctx->counting_only) {
        const std::string_view name = fn.name();
        g_api->user_range_end(name.data(), name.size());
        return;
    }
    const uint64_t end = g_api->now_ns();
    g_api->pop_correlation();
    OpRecord r;
    sightline::capture::initHeader(r, RecordType::Op);
    r.start_ns = ctx->start_ns;
    r.end_ns = end;
    r.tid = threadId();
    r.external_id = ctx->id;
    r.sequence = fn.seqNr();
    r.forward_tid = fn.forwardThreadId();
    r.name_id = internCached(fn.name());
    r.kind = uint32_t(fn.scope() == at::RecordScope::USER_SCOPE ? OpKind::UserAnnotation : OpKind::Op);
    r.shapes_id = ctx->shapes_id;
    r.dtypes_id = ctx->dtypes_id;
    g_api->record_op(&r);
    if (fn.scope() == at::RecordScope::USER_SCOPE) {
        const std::string_view name = fn.name();
        g_api->user_range_end(name.data(), name.size());
    }
}

} // namespace

extern "C" __attribute__((visibility("default"))) int sightline_torch_init(const SightlineCollectorApi* api) {
    if (!api || api->version != kSightlineCollectorApiVersion) return 1;
    g_api = api;
    try {
        at::addGlobalCallback(at::RecordFunctionCallback(onEnter, onExit)
                                  .needsInputs(api->record_shapes != 0)
                                  .needsIds(true)
                                  .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                                           at::RecordScope::USER_SCOPE}));
    } catch (const std::exception& e) {
        std::string line = std::string("cannot register the PyTorch op callback: ") + e.what();
        api->log(line.c_str());
        return 1;
    }
    return 0;
}
