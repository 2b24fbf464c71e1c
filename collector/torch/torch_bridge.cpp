// libsightline_torch.so: records PyTorch ops through a global RecordFunction callback. Kernels are
// linked to the op that launched them by the importer (the innermost op around the launch call on
// its thread), or, when the collector asks (correlate_ops), through a CUPTI external correlation id
// pushed around each op. Loaded by the collector once libtorch is in the process; talks to it only
// through SightlineCollectorApi.
//
// Two callbacks: one on user ranges only, always registered (it counts steps for step windows and
// records the ranges during a window), and one on ops, registered only while the collector records
// (sightline_torch_record_ops). With no callback on their scope, ops take RecordFunction's fast
// path, so a dormant collector costs them nothing.
//
// Collectives (Collective records, linked to their op by its id): c10d's NCCL backend opens an op
// named "record_param_comms" around each collective with its metadata in the thread's debug info;
// for that op alone the bridge reads it. Backends that do not (gloo, in torch 2.11) are seen when
// input shapes are recorded: c10d's dispatcher ops ("c10d::allreduce_", ...) then carry their
// tensors and process group.
#include "sightline/collector_api.h"

#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/csrc/distributed/c10d/ParamCommsUtils.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <sys/syscall.h>
#include <unistd.h>

namespace {

using sightline::capture::CollectiveRecord;
using sightline::capture::OpKind;
using sightline::capture::OpRecord;
using sightline::capture::RecordType;

const SightlineCollectorApi* g_api = nullptr;
std::atomic<uint64_t> g_next_id{1};

// An op begun on this thread and not yet ended. Ops nest on their thread, so these form a stack;
// keeping them here spares an allocation per op.
struct OpenOp {
    const at::RecordFunction* fn;
    uint64_t start_ns, id;
    uint32_t shapes_id, dtypes_id;
    const char* name; // fn->name(), looked up once per op; null for user ranges (looked up at their end)
};

// A direct-mapped cache of op names by the address of their text: most come from operator
// schemas (stable addresses), but some are built per call (autograd's "evaluate_function: ..."),
// so a slot is trusted only while its text still matches.
struct NameSlot {
    const char* ptr = nullptr;
    std::string text;
    uint32_t id = 0;
};
constexpr size_t kNameSlots = 1024;

// A direct-mapped cache of the interned input-shapes and dtypes texts by the inputs' signature
// (each input's kind, dtype and sizes, as integers): building and hashing the texts is most of an
// op's cost with shapes, and a step repeats the same few hundred signatures.
struct ShapesSlot {
    std::vector<int64_t> signature;
    uint32_t shapes_id = 0, dtypes_id = 0;
};
constexpr size_t kShapesSlots = 512;

struct ThreadState {
    int64_t tid = 0;
    std::array<NameSlot, kNameSlots> name_slots;
    std::array<ShapesSlot, kShapesSlots> shapes_slots;
    std::vector<int64_t> signature; // reused buffer
    std::vector<OpenOp> open;
    std::unordered_map<std::string, uint32_t, sightline::capture::StringViewHash, std::equal_to<>> names; // this thread's interned strings
    std::string dims, types;                                                                              // reused buffers for the shapes text
};
// The thread's state, through a plain pointer: a thread_local object with a constructor is reached
// through a wrapper function on every access (a fifth of the bridge's time per op on the CPU
// profile of bench/op_overhead.cpp). The owner, touched once per thread, frees it at thread exit.
thread_local ThreadState* t_state = nullptr;
struct ThreadStateOwner {
    ~ThreadStateOwner() {
        delete t_state;
        t_state = nullptr;
    }
};
thread_local ThreadStateOwner t_state_owner;

ThreadState& threadState() {
    if (ThreadState* st = t_state) return *st;
    (void)&t_state_owner;
    t_state = new ThreadState();
    return *t_state;
}

int64_t threadId(ThreadState& st) {
    if (st.tid == 0) st.tid = int64_t(syscall(SYS_gettid));
    return st.tid;
}

// Looks a string up in this thread's cache before asking the collector (which takes a lock).
uint32_t internCached(ThreadState& st, std::string_view text) {
    auto& cache = st.names;
    if (auto it = cache.find(text); it != cache.end()) return it->second;
    const uint32_t id = g_api->intern(text.data(), text.size());
    if (id != 0) cache.emplace(std::string(text), id);
    return id;
}

// An op's name by the address of its text first (no hashing), then by the text.
uint32_t internName(ThreadState& st, const char* name) {
    NameSlot& slot = st.name_slots[(reinterpret_cast<uintptr_t>(name) >> 3) % kNameSlots];
    const size_t n = std::strlen(name);
    if (slot.ptr == name && slot.text.size() == n && std::memcmp(slot.text.data(), name, n) == 0 && slot.id != 0) return slot.id;
    const uint32_t id = internCached(st, std::string_view(name, n));
    slot.ptr = name;
    slot.text.assign(name, n);
    slot.id = id;
    return id;
}

void appendInt(std::string& out, int64_t v) {
    char buf[24];
    char* end = buf + sizeof buf;
    char* p = end;
    const bool negative = v < 0;
    uint64_t u = negative ? uint64_t(0) - uint64_t(v) : uint64_t(v);
    do {
        *--p = char('0' + u % 10);
        u /= 10;
    } while (u);
    if (negative) *--p = '-';
    out.append(p, size_t(end - p));
}

// Kineto's "Input Dims" / "Input type" text: one entry per input, [] for non-tensors.
void describeInputs(const at::RecordFunction& fn, std::string& dims, std::string& types) {
    dims.assign(1, '[');
    types.assign(1, '[');
    bool first = true;
    for (const c10::IValue& v : fn.inputs()) {
        if (!first) {
            dims += ", ";
            types += ", ";
        }
        first = false;
        if (v.isTensor() && v.toTensor().defined()) {
            const at::Tensor& t = v.toTensor();
            dims += '[';
            bool f = true;
            for (int64_t s : t.sizes()) {
                if (!f) dims += ", ";
                f = false;
                appendInt(dims, s);
            }
            dims += ']';
            types += '"';
            types += t.dtype().name();
            types += '"';
        } else {
            dims += "[]";
            types += v.isScalar() ? "\"Scalar\"" : "\"\"";
        }
    }
    dims += ']';
    types += ']';
}

// The inputs' signature: per input, a tensor's dtype (offset past the two other tags), its rank
// and sizes; -1 for a scalar, -2 for anything else (an undefined tensor included): exactly what
// describeInputs writes, so equal signatures give equal texts.
void inputSignature(const at::RecordFunction& fn, std::vector<int64_t>& sig) {
    sig.clear();
    for (const c10::IValue& v : fn.inputs()) {
        if (v.isTensor() && v.toTensor().defined()) {
            const at::Tensor& t = v.toTensor();
            const auto sizes = t.sizes();
            sig.push_back(int64_t(t.scalar_type()) + 16);
            sig.push_back(int64_t(sizes.size()));
            sig.insert(sig.end(), sizes.begin(), sizes.end());
        } else {
            sig.push_back(v.isScalar() ? -1 : -2);
        }
    }
}

uint64_t hashSignature(const std::vector<int64_t>& sig) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ sig.size();
    for (int64_t v : sig) {
        h ^= uint64_t(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    }
    return h;
}

// The op's interned shapes and dtypes texts, from the thread's cache when its inputs' signature
// was seen before.
void internInputs(const at::RecordFunction& fn, ThreadState& st, OpenOp& op) {
    inputSignature(fn, st.signature);
    ShapesSlot& slot = st.shapes_slots[hashSignature(st.signature) % kShapesSlots];
    if (slot.shapes_id == 0 || slot.signature != st.signature) {
        describeInputs(fn, st.dims, st.types);
        slot.shapes_id = internCached(st, st.dims);
        slot.dtypes_id = internCached(st, st.types);
        slot.signature = st.signature;
    }
    op.shapes_id = slot.shapes_id;
    op.dtypes_id = slot.dtypes_id;
}

// A user range begun while recording (user ranges may end on another thread, so they travel in
// RecordFunction's context rather than on the thread's stack).
struct UserRange : public at::ObserverContext {
    OpenOp range{};
};

void emitOp(ThreadState& st, const at::RecordFunction& fn, const OpenOp& ctx, uint64_t end, OpKind kind) {
    OpRecord r;
    sightline::capture::initHeader(r, RecordType::Op);
    r.start_ns = ctx.start_ns;
    r.end_ns = end;
    r.tid = threadId(st);
    r.external_id = ctx.id;
    r.sequence = fn.seqNr();
    r.forward_tid = fn.forwardThreadId();
    r.name_id = internName(st, ctx.name ? ctx.name : fn.name());
    r.kind = uint32_t(kind);
    r.shapes_id = ctx.shapes_id;
    r.dtypes_id = ctx.dtypes_id;
    g_api->record_op(&r);
}

// c10d's op around a collective (at::kParamCommsCallName). One character decides for almost every
// other op, so they pay nothing measurable for the check.
bool isParamComms(const char* name) {
    return name && name[0] == 'r' && std::strcmp(name, "record_param_comms") == 0;
}

// A Collective record for op `op_id`, its strings interned.
CollectiveRecord collectiveRecord(uint64_t op_id, std::string_view name, at::ScalarType dtype, std::string_view group_name,
                                  std::string_view group_desc) {
    CollectiveRecord r;
    sightline::capture::initHeader(r, RecordType::Collective);
    r.op_id = op_id;
    ThreadState& st = threadState();
    r.name_id = internCached(st, name);
    r.dtype_id = internCached(st, c10::toString(dtype));
    r.element_size = uint32_t(c10::elementSize(dtype));
    r.group_name_id = internCached(st, group_name);
    r.group_desc_id = internCached(st, group_desc);
    return r;
}

// The collective's metadata, which c10d sets in the thread's debug info before it begins the op
// (and which lives as long as the op): written at the op's start.
void recordParamComms(uint64_t op_id) noexcept {
    try {
        const auto* info = dynamic_cast<const torch::ParamCommsDebugInfo*>(
            c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PARAM_COMMS_INFO));
        if (!info) return;
        CollectiveRecord r = collectiveRecord(op_id, info->getCollectiveName(), info->getDType(),
                                              info->getProcessGroupName(), info->getProcessGroupDesc());
        r.in_elements = info->getInMessageNelems();
        r.out_elements = info->getOutMessageNelems();
        r.rank = info->getRank();
        r.group_size = info->getWorldSize();
        r.global_rank_start = info->getGlobalRankStart();
        r.global_rank_stride = info->getGlobalRankStride();
        g_api->record_collective(&r);
    } catch (...) {
        // A type without an element size, or no memory: the op is still recorded, without its metadata.
    }
}

bool isC10dOp(const char* name) { return name && name[0] == 'c' && std::strncmp(name, "c10d::", 6) == 0; }

// Elements of the tensors in an argument (a tensor, a list of them, or a list of lists); the
// first defined tensor's type goes to `dtype`.
int64_t elementsOf(const c10::IValue& v, at::ScalarType& dtype) {
    if (v.isTensor()) {
        const at::Tensor& t = v.toTensor();
        if (!t.defined()) return 0;
        if (dtype == at::ScalarType::Undefined) dtype = t.scalar_type();
        return t.numel();
    }
    int64_t n = 0;
    if (v.isTensorList()) {
        for (const at::Tensor& t : v.toTensorList()) n += elementsOf(c10::IValue(t), dtype);
    } else if (v.isList()) {
        for (const c10::IValue& e : v.toListRef()) n += elementsOf(e, dtype);
    }
    return n;
}

// A c10d dispatcher op's collective, from its inputs (recorded only with input shapes): the
// process group argument gives the group, the tensors the sizes (arguments named "output..." are
// the output; an op without one works in place). Named as c10d names it: "c10d::allreduce_" is
// "allreduce".
void recordC10dCollective(const at::RecordFunction& fn, const char* op_name, uint64_t op_id) noexcept {
    try {
        const auto schema = fn.operator_schema();
        if (!schema) return;
        const auto& args = schema->arguments();
        const auto inputs = fn.inputs();
        c10::intrusive_ptr<torch::CustomClassHolder> holder;
        const c10d::ProcessGroup* group = nullptr;
        int64_t in = 0, out = 0;
        at::ScalarType dtype = at::ScalarType::Undefined;
        for (size_t i = 0; i < inputs.size() && i < args.size(); ++i) {
            const c10::IValue& v = inputs[i];
            if (v.isObject()) {
                const auto& slots = v.toObjectRef().slots();
                if (!group && slots.size() == 1 && slots[0].isCapsule()) {
                    holder = slots[0].toCapsule();
                    group = dynamic_cast<const c10d::ProcessGroup*>(holder.get());
                }
            } else if (args[i].name().rfind("output", 0) == 0) {
                out += elementsOf(v, dtype);
            } else {
                in += elementsOf(v, dtype);
            }
        }
        if (!group || dtype == at::ScalarType::Undefined) return;
        std::string_view name = std::string_view(op_name).substr(6);
        if (name.ends_with('_')) name.remove_suffix(1);
        CollectiveRecord r = collectiveRecord(op_id, name, dtype, group->getGroupName(), group->getGroupDesc());
        r.in_elements = in;
        r.out_elements = out ? out : in;
        r.rank = group->getRank();
        r.group_size = group->getSize();
        r.global_rank_start = -1;
        r.global_rank_stride = -1;
        g_api->record_collective(&r);
    } catch (...) {
    }
}

std::mutex g_ops_mutex;
at::CallbackHandle g_ops_handle = 0;
std::atomic<bool> g_shapes{false};    // the registered op callback asked for inputs
std::atomic<bool> g_correlate{false}; // push external correlation ids (collector's correlate_ops)

void pushCorrelation(uint64_t id) {
    if (g_correlate.load(std::memory_order_relaxed)) g_api->push_correlation(id);
}
void popCorrelation() {
    if (g_correlate.load(std::memory_order_relaxed)) g_api->pop_correlation();
}

// Ops: registered only while recording.
std::unique_ptr<at::ObserverContext> onOpEnter(const at::RecordFunction& fn) {
    if (!g_api->enabled()) return nullptr;
    ThreadState& st = threadState();
    OpenOp op{&fn, 0, g_next_id.fetch_add(1, std::memory_order_relaxed), 0, 0, fn.name()};
    if (g_shapes.load(std::memory_order_relaxed) && fn.needsInputs()) internInputs(fn, st, op);
    if (isParamComms(op.name))
        recordParamComms(op.id);
    else if (op.shapes_id != 0 && isC10dOp(op.name))
        recordC10dCollective(fn, op.name, op.id);
    pushCorrelation(op.id);
    op.start_ns = g_api->now_ns();
    st.open.push_back(op);
    return nullptr;
}

void onOpExit(const at::RecordFunction& fn, at::ObserverContext*) {
    ThreadState& st = threadState();
    auto& open = st.open;
    if (open.empty()) return; // begun before recording started
    const uint64_t end = g_api->now_ns();
    size_t i = open.size();
    while (i > 0 && open[i - 1].fn != &fn) --i;
    if (i == 0) return; // not begun while recording
    // Ops above it that never ended here (none in practice) are dropped, their ids popped.
    while (open.size() > i) {
        popCorrelation();
        open.pop_back();
    }
    popCorrelation();
    const OpenOp op = open.back();
    open.pop_back();
    emitOp(st, fn, op, end, OpKind::Op);
}

// User ranges: always registered; recorded while the collector records, counted always.
std::unique_ptr<at::ObserverContext> onUserEnter(const at::RecordFunction& fn) {
    const std::string_view name = fn.name();
    g_api->user_range_begin(name.data(), name.size()); // may close a window first: then not recorded
    if (!g_api->enabled()) return nullptr;             // only counted, at its end
    auto ctx = std::make_unique<UserRange>();
    ctx->range.fn = &fn;
    ctx->range.id = g_next_id.fetch_add(1, std::memory_order_relaxed);
    pushCorrelation(ctx->range.id);
    ctx->range.start_ns = g_api->now_ns();
    return ctx;
}

void onUserExit(const at::RecordFunction& fn, at::ObserverContext* base) {
    if (auto* ctx = static_cast<UserRange*>(base)) {
        const uint64_t end = g_api->now_ns();
        popCorrelation();
        emitOp(threadState(), fn, ctx->range, end, OpKind::UserAnnotation);
    }
    const std::string_view name = fn.name();
    g_api->user_range_end(name.data(), name.size());
}

template <typename F>
int guarded(const char* what, F fn) {
    try {
        fn();
        return 0;
    } catch (const std::exception& e) {
        std::string line = std::string(what) + ": " + e.what();
        g_api->log(line.c_str());
        return 1;
    }
}

} // namespace

extern "C" __attribute__((visibility("default"))) int sightline_torch_init(const SightlineCollectorApi* api) {
    if (!api || api->version != kSightlineCollectorApiVersion) return 1;
    g_api = api;
    return guarded("cannot register the PyTorch user-range callback", [] {
        at::addGlobalCallback(at::RecordFunctionCallback(onUserEnter, onUserExit).scopes({at::RecordScope::USER_SCOPE}));
    });
}

extern "C" __attribute__((visibility("default"))) int sightline_torch_record_ops(int on) {
    if (!g_api) return 1;
    std::lock_guard<std::mutex> lock(g_ops_mutex);
    if (g_ops_handle != 0) {
        at::removeCallback(g_ops_handle);
        g_ops_handle = 0;
    }
    if (!on) return 0;
    g_shapes = g_api->record_shapes != 0;
    g_correlate = g_api->correlate_ops != 0;
    return guarded("cannot register the PyTorch op callback", [] {
        g_ops_handle = at::addGlobalCallback(at::RecordFunctionCallback(onOpEnter, onOpExit)
                                                 .needsInputs(g_api->record_shapes != 0)
                                                 .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
    });
}
