// Importer for PyTorch profiler (Kineto) Chrome-trace JSON. One pass of simdjson's On-Demand
// parser over the text; nothing but the model is built (no DOM).
#include "sightline/error.h"
#include "sightline/import.h"

#include <cmath>
#include <cstring>
#include <vector>
#include <string_view>

#include <fmt/format.h>
#include <simdjson.h>

namespace sightline {
namespace {

using simdjson::ondemand::json_type;
using simdjson::ondemand::number_type;
using simdjson::ondemand::object;
using simdjson::ondemand::value;

// Kineto writes times in microseconds with three decimals. Splitting off the integral part keeps
// the nanoseconds exact for timestamps far from zero (epoch-based values near 5e12 us).
int64_t usToNs(double us) {
    const double whole = std::floor(us);
    return static_cast<int64_t>(whole) * 1000 + std::llround((us - whole) * 1000.0);
}

bool isWs(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// True when the whole document has been consumed (nothing but whitespace after the root).
bool atEnd(simdjson::ondemand::document& doc) {
    const char* at = nullptr;
    return doc.current_location().get(at) != simdjson::SUCCESS;
}

enum class Category : uint8_t {
    None, CpuOp, UserAnnotation, GpuUserAnnotation, Kernel, Memcpy, Memset, Runtime, Driver,
    PythonFunction, Overhead, FlowLaunch, FlowFwdBwd, Other
};

Category categoryOf(std::string_view cat) {
    // The common categories first.
    if (cat == "cpu_op") return Category::CpuOp;
    if (cat == "kernel" || cat == "Kernel") return Category::Kernel;
    if (cat == "cuda_runtime") return Category::Runtime;
    if (cat == "ac2g") return Category::FlowLaunch;
    if (cat == "fwdbwd") return Category::FlowFwdBwd;
    if (cat == "cuda_driver") return Category::Driver;
    if (cat == "gpu_memcpy") return Category::Memcpy;
    if (cat == "gpu_memset") return Category::Memset;
    if (cat == "user_annotation") return Category::UserAnnotation;
    if (cat == "gpu_user_annotation") return Category::GpuUserAnnotation;
    if (cat == "python_function") return Category::PythonFunction;
    if (cat == "overhead") return Category::Overhead;
    return Category::Other;
}

// Everything one trace event may carry that the model uses. Fields arrive in any order, so the
// event is collected first and filed afterwards.
struct RawEvent {
    char ph = 0;
    Category cat = Category::None;
    std::string_view name;
    int64_t pid = 0, tid = 0;
    bool pid_is_number = true, tid_is_number = true;
    double ts = 0, dur = 0;
    bool has_ts = false;
    int64_t id = 0;
    bool flow_end_binds_enclosing = false;
    // args
    int64_t external_id = 0, correlation = 0, sequence = -1, cbid = -1;
    int64_t device = -1, context = 0, stream = 0, registers = 0, shared_memory = 0;
    uint64_t bytes = 0;
    std::array<int32_t, 3> grid{0, 0, 0}, block{0, 0, 0};
    std::string_view input_dims, input_types, meta_name;
};

class KinetoReader {
public:
    explicit KinetoReader(Trace& trace) : m_trace(trace) {}

    // A whole document: an object with "traceEvents" or a bare list of events.
    void readDocument(simdjson::ondemand::document& doc);
    // The fields of the top-level object; returns whether it held "traceEvents".
    bool readTopObject(simdjson::ondemand::document& doc);
    // A list of trace events.
    void readEventList(value events);
    uint64_t eventsRead() const { return m_trace.quality.events_read; }

private:
    void readEvent(object obj, RawEvent& ev);
    void readArgs(object args, RawEvent& ev);
    void file(const RawEvent& ev);
    void readDevices(value devices);
    uint32_t thread(int64_t pid, int64_t tid);

    Trace& m_trace;
    int64_t m_last_pid = INT64_MIN, m_last_tid = INT64_MIN;
    uint32_t m_last_thread = 0;
};

int64_t asInt(value v) {
    int64_t i = 0;
    if (v.get_int64().get(i) == simdjson::SUCCESS)
        return i;
    double d = 0;
    if (v.get_double().get(d) == simdjson::SUCCESS)
        return static_cast<int64_t>(d);
    return 0;
}

// pid / tid / id: numbers in Kineto's output, strings for its synthetic rows ("Spans").
int64_t idOf(value v, bool& is_number) {
    json_type t;
    if (v.type().get(t) != simdjson::SUCCESS)
        return 0;
    if (t == json_type::number) {
        is_number = true;
        return asInt(v);
    }
    is_number = false;
    if (t == json_type::string) {
        std::string_view s;
        if (v.get_string().get(s) == simdjson::SUCCESS)
            return static_cast<int64_t>(std::hash<std::string_view>{}(s) & 0x7fffffffffffffffLL);
    }
    return 0;
}

std::array<int32_t, 3> dim3(value v) {
    std::array<int32_t, 3> out{0, 0, 0};
    simdjson::ondemand::array arr;
    if (v.get_array().get(arr) != simdjson::SUCCESS)
        return out;
    size_t i = 0;
    for (auto el : arr) {
        int64_t x = 0;
        if (i < 3 && el.get_int64().get(x) == simdjson::SUCCESS)
            out[i] = static_cast<int32_t>(x);
        ++i;
    }
    return out;
}

void KinetoReader::readArgs(object args, RawEvent& ev) {
    for (auto field : args) {
        std::string_view key = field.unescaped_key();
        value v = field.value();
        switch (key.size() ? key[0] : 0) {
        case 'E':
            if (key == "External id") ev.external_id = asInt(v);
            break;
        case 'c':
            if (key == "correlation") ev.correlation = asInt(v);
            else if (key == "cbid") ev.cbid = asInt(v);
            else if (key == "context") ev.context = asInt(v);
            break;
        case 'S':
            if (key == "Sequence number") ev.sequence = asInt(v);
            break;
        case 'd':
            if (key == "device") ev.device = asInt(v);
            break;
        case 's':
            if (key == "stream") ev.stream = asInt(v);
            else if (key == "shared memory") ev.shared_memory = asInt(v);
            break;
        case 'r':
            if (key == "registers per thread") ev.registers = asInt(v);
            break;
        case 'g':
            if (key == "grid") ev.grid = dim3(v);
            break;
        case 'b':
            if (key == "block") ev.block = dim3(v);
            else if (key == "bytes") ev.bytes = static_cast<uint64_t>(asInt(v));
            break;
        case 'I':
            if (key == "Input Dims" || key == "Input type") {
                std::string_view raw;
                simdjson::ondemand::array arr;
                if (v.get_array().get(arr) == simdjson::SUCCESS && arr.raw_json().get(raw) == simdjson::SUCCESS)
                    (key == "Input Dims" ? ev.input_dims : ev.input_types) = raw;
            }
            break;
        case 'n':
            if (key == "name") {
                std::string_view s;
                if (v.get_string().get(s) == simdjson::SUCCESS)
                    ev.meta_name = s;
            }
            break;
        default:
            break;
        }
    }
}

void KinetoReader::readEvent(object obj, RawEvent& ev) {
    for (auto field : obj) {
        std::string_view key = field.unescaped_key();
        value v = field.value();
        if (key == "ph") {
            std::string_view s;
            if (v.get_string().get(s) == simdjson::SUCCESS && !s.empty())
                ev.ph = s[0];
        } else if (key == "cat") {
            std::string_view s;
            if (v.get_string().get(s) == simdjson::SUCCESS)
                ev.cat = categoryOf(s);
        } else if (key == "name") {
            std::string_view s;
            if (v.get_string().get(s) == simdjson::SUCCESS)
                ev.name = s;
        } else if (key == "ts") {
            ev.has_ts = v.get_double().get(ev.ts) == simdjson::SUCCESS;
        } else if (key == "dur") {
            if (v.get_double().get(ev.dur) != simdjson::SUCCESS) ev.dur = 0;
        } else if (key == "pid") {
            ev.pid = idOf(v, ev.pid_is_number);
        } else if (key == "tid") {
            ev.tid = idOf(v, ev.tid_is_number);
        } else if (key == "id") {
            bool numeric = true;
            ev.id = idOf(v, numeric);
        } else if (key == "bp") {
            std::string_view s;
            ev.flow_end_binds_enclosing = v.get_string().get(s) == simdjson::SUCCESS && s == "e";
        } else if (key == "args") {
            object args;
            if (v.get_object().get(args) == simdjson::SUCCESS)
                readArgs(args, ev);
        }
    }
}

uint32_t KinetoReader::thread(int64_t pid, int64_t tid) {
    if (pid != m_last_pid || tid != m_last_tid) {
        m_last_pid = pid;
        m_last_tid = tid;
        m_last_thread = m_trace.threadIndex(pid, tid);
    }
    return m_last_thread;
}

void KinetoReader::file(const RawEvent& ev) {
    DataQuality& q = m_trace.quality;
    if (ev.ph == 'M') {
        // Thread names are the only metadata rows the model keeps.
        if (ev.name == "thread_name" && ev.pid_is_number && ev.tid_is_number && !ev.meta_name.empty())
            m_trace.threads[thread(ev.pid, ev.tid)].name = m_trace.strings.intern(ev.meta_name);
        else
            ++q.events_ignored;
        return;
    }
    if (ev.ph == 's' || ev.ph == 'f') {
        if (ev.cat != Category::FlowLaunch && ev.cat != Category::FlowFwdBwd) {
            ++q.events_ignored;
            return;
        }
        FlowPoint fp;
        fp.id = ev.id;
        fp.ts_ns = usToNs(ev.ts);
        fp.kind = ev.cat == Category::FlowLaunch ? FlowKind::LaunchToGpu : FlowKind::ForwardBackward;
        fp.is_start = ev.ph == 's';
        fp.thread = thread(ev.pid, ev.tid);
        m_trace.flows.push_back(fp);
        return;
    }
    if (ev.ph != 'X' || !ev.has_ts) {
        ++q.events_ignored;
        return;
    }
    const int64_t start = usToNs(ev.ts);
    int64_t dur = usToNs(ev.dur);
    if (dur < 0) {
        ++q.negative_durations;
        dur = 0;
    }
    switch (ev.cat) {
    case Category::CpuOp:
    case Category::UserAnnotation:
    case Category::Runtime:
    case Category::Driver:
    case Category::PythonFunction: {
        CpuEvent c;
        c.start_ns = start;
        c.end_ns = start + dur;
        c.name = m_trace.strings.intern(ev.name);
        c.thread = thread(ev.pid, ev.tid);
        c.kind = ev.cat == Category::CpuOp           ? CpuKind::Op
                 : ev.cat == Category::UserAnnotation ? CpuKind::UserAnnotation
                 : ev.cat == Category::Runtime        ? CpuKind::Runtime
                 : ev.cat == Category::Driver         ? CpuKind::Driver
                                                      : CpuKind::PythonFunction;
        c.external_id = ev.external_id;
        c.correlation = ev.correlation;
        c.sequence = ev.sequence;
        c.cbid = static_cast<int32_t>(ev.cbid);
        if (!ev.input_dims.empty())
            c.input_dims = m_trace.strings.intern(ev.input_dims);
        if (!ev.input_types.empty())
            c.input_types = m_trace.strings.intern(ev.input_types);
        m_trace.cpu.push_back(c);
        return;
    }
    case Category::Kernel:
    case Category::Memcpy:
    case Category::Memset:
    case Category::GpuUserAnnotation: {
        GpuEvent g;
        g.start_ns = start;
        g.end_ns = start + dur;
        g.name = m_trace.strings.intern(ev.name);
        g.kind = ev.cat == Category::Kernel   ? GpuKind::Kernel
                 : ev.cat == Category::Memcpy ? GpuKind::Memcpy
                 : ev.cat == Category::Memset ? GpuKind::Memset
                                              : GpuKind::Annotation;
        // Kineto puts the device in pid and the stream in tid; args repeat them for activities.
        g.device = static_cast<int32_t>(ev.device >= 0 ? ev.device : ev.pid);
        g.stream = static_cast<int32_t>(ev.stream ? ev.stream : ev.tid);
        g.context = static_cast<int32_t>(ev.context);
        g.correlation = ev.correlation;
        g.external_id = ev.external_id;
        g.bytes = ev.bytes;
        g.grid = ev.grid;
        g.block = ev.block;
        g.registers = static_cast<int32_t>(ev.registers);
        g.shared_memory = static_cast<int32_t>(ev.shared_memory);
        m_trace.gpu.push_back(g);
        return;
    }
    case Category::Overhead:
        m_trace.overhead.push_back(OverheadSpan{start, start + dur, m_trace.strings.intern(ev.name)});
        return;
    case Category::None:
    case Category::Other:
    case Category::FlowLaunch:
    case Category::FlowFwdBwd:
        // "Trace" spans and categories of other tools: counted, not modelled.
        ++(ev.cat == Category::Other ? q.unknown_categories : q.events_ignored);
        return;
    }
}

void KinetoReader::readEventList(value events) {
    simdjson::ondemand::array arr;
    if (events.get_array().get(arr) != simdjson::SUCCESS)
        throw InputError("\"traceEvents\" is not a list");
    for (auto element : arr) {
        object obj;
        if (auto err = element.get_object().get(obj))
            throw simdjson::simdjson_error(err);
        RawEvent ev;
        readEvent(obj, ev);
        ++m_trace.quality.events_read;
        file(ev);
    }
}

void KinetoReader::readDevices(value devices) {
    simdjson::ondemand::array arr;
    if (devices.get_array().get(arr) != simdjson::SUCCESS)
        return;
    for (auto element : arr) {
        object obj;
        if (element.get_object().get(obj) != simdjson::SUCCESS)
            continue;
        DeviceInfo d;
        for (auto field : obj) {
            std::string_view key = field.unescaped_key();
            value v = field.value();
            if (key == "id") d.id = static_cast<int32_t>(asInt(v));
            else if (key == "name") { std::string_view s; if (v.get_string().get(s) == simdjson::SUCCESS) d.name = s; }
            else if (key == "totalGlobalMem") d.total_memory = asInt(v);
            else if (key == "computeMajor") d.compute_major = static_cast<int32_t>(asInt(v));
            else if (key == "computeMinor") d.compute_minor = static_cast<int32_t>(asInt(v));
            else if (key == "numSms") d.sm_count = static_cast<int32_t>(asInt(v));
            else if (key == "maxThreadsPerMultiprocessor") d.max_threads_per_sm = static_cast<int32_t>(asInt(v));
            else if (key == "sharedMemPerMultiprocessor") d.shared_memory_per_sm = asInt(v);
            else if (key == "regsPerMultiprocessor") d.registers_per_sm = static_cast<int32_t>(asInt(v));
        }
        m_trace.devices.push_back(std::move(d));
    }
}

void KinetoReader::readDocument(simdjson::ondemand::document& doc) {
    json_type type;
    if (auto err = doc.type().get(type))
        throw simdjson::simdjson_error(err);
    if (type == json_type::array) { // the bare-list form of the Chrome trace format
        readEventList(doc.get_value());
        return;
    }
    if (type != json_type::object)
        throw InputError("JSON but not a trace: the top level is neither an object nor a list of events");
    if (!readTopObject(doc))
        throw InputError("JSON but not a trace: it has no \"traceEvents\" list (expected a PyTorch "
                         "profiler / Chrome trace export)");
}

bool KinetoReader::readTopObject(simdjson::ondemand::document& doc) {
    bool saw_events = false;
    object top = doc.get_object();
    for (auto field : top) {
        std::string_view key = field.unescaped_key();
        value v = field.value();
        if (key == "traceEvents") {
            readEventList(v);
            saw_events = true;
        } else if (key == "deviceProperties") {
            readDevices(v);
        } else {
            json_type t;
            if (v.type().get(t) != simdjson::SUCCESS)
                continue;
            std::string_view raw;
            if ((t == json_type::number || t == json_type::boolean) && !(raw = v.raw_json_token()).empty()) {
                while (!raw.empty() && (isWs(raw.back()) || raw.back() == ','))
                    raw.remove_suffix(1);
                m_trace.metadata[std::string(key)] = std::string(raw);
            } else if (t == json_type::string && v.get_string().get(raw) == simdjson::SUCCESS) {
                m_trace.metadata[std::string(key)] = std::string(raw);
            }
        }
    }
    return saw_events;
}

std::string describe(simdjson::error_code err) {
    switch (err) {
    case simdjson::TAPE_ERROR:
    case simdjson::INCOMPLETE_ARRAY_OR_OBJECT:
    case simdjson::INSUFFICIENT_PADDING:
        return "the JSON is incomplete or malformed (truncated file?)";
    case simdjson::EMPTY:
        return "the file is empty";
    case simdjson::CAPACITY:
        return "the JSON is larger than 4 GiB, the most one document can hold";
    case simdjson::UTF8_ERROR:
        return "the file is not UTF-8 text (is it binary?)";
    default:
        return fmt::format("not valid JSON ({})", simdjson::error_message(err));
    }
}


// ---- Chunked reading ------------------------------------------------------------------------
// simdjson indexes every structural character of a document (4 bytes each, about one per byte
// of Kineto's JSON), so one big document would cost about as much memory again as its text.
// Kineto writes one event per "{ ... }" block with a line break between events, and a raw line
// break can never sit inside a JSON string, so "}" "," <newline> "{" marks a candidate boundary.
// The events array is parsed in windows of about kWindow bytes cut at such boundaries; the comma
// between two windows is overwritten with "]" to close one and "[" to open the next. A window
// that is not a well-formed list (a candidate that was not between two events) makes the whole
// text fall back to a single-document parse after the commas are restored, so the result never
// depends on the layout.
constexpr size_t kWindow = size_t(8) << 20;

// Position of the comma of the first candidate boundary at or after `from`, or npos.
size_t findBoundary(std::string_view text, size_t from) {
    while (from < text.size()) {
        const void* hit = std::memchr(text.data() + from, '\n', text.size() - from);
        if (!hit)
            return std::string_view::npos;
        const size_t nl = static_cast<const char*>(hit) - text.data();
        from = nl + 1;
        size_t back = nl;
        while (back > 0 && isWs(text[back - 1])) --back;
        if (back == 0 || text[back - 1] != ',') continue;
        const size_t comma = back - 1;
        size_t before = comma;
        while (before > 0 && isWs(text[before - 1])) --before;
        if (before == 0 || text[before - 1] != '}') continue;
        size_t next = nl + 1;
        while (next < text.size() && isWs(text[next])) ++next;
        if (next < text.size() && text[next] == '{')
            return comma;
    }
    return std::string_view::npos;
}

// From a position inside the events array (depth 0 = directly in the array), the index of the
// "]" that closes it, or npos. Exact: tracks strings and escapes.
size_t scanToArrayEnd(std::string_view text, size_t from) {
    int depth = 0;
    bool in_string = false;
    for (size_t i = from; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') ++i;
            else if (c == '"') in_string = false;
            continue;
        }
        switch (c) {
        case '"': in_string = true; break;
        case '{': case '[': ++depth; break;
        case '}': if (--depth < 0) return std::string_view::npos; break;
        case ']': if (depth == 0) return i; --depth; break;
        default: break;
        }
    }
    return std::string_view::npos;
}

class ChunkedImport {
public:
    ChunkedImport(char* data, size_t size, size_t capacity, KinetoReader& reader, const ProgressFn& progress)
        : m_data(data), m_text(data, size), m_capacity(capacity), m_reader(reader), m_progress(progress) {}
    ~ChunkedImport() { restore(); }

    // True when the whole trace was read in windows; false (text restored) to ask for the
    // single-document parse.
    bool run();
    void keepPatches() { m_patched.clear(); }

private:
    bool parseHead(size_t bracket);
    bool parseTail(size_t array_end);
    bool parseWindow(size_t open, size_t close);
    void patch(size_t pos, char c) {
        m_patched.emplace_back(pos, m_data[pos]);
        m_data[pos] = c;
    }
    void restore() {
        for (auto it = m_patched.rbegin(); it != m_patched.rend(); ++it)
            m_data[it->first] = it->second;
        m_patched.clear();
    }

    char* m_data;
    std::string_view m_text;
    size_t m_capacity;
    KinetoReader& m_reader;
    const ProgressFn& m_progress;
    simdjson::ondemand::parser m_parser;
    std::vector<std::pair<size_t, char>> m_patched;
};

bool ChunkedImport::parseHead(size_t bracket) {
    // The text up to the events array, closed as if the array were empty: it must parse as an
    // object whose "traceEvents" key is this array (not a look-alike inside a string).
    std::string head(m_text.substr(0, bracket + 1));
    head += "]}";
    simdjson::padded_string padded(head);
    simdjson::ondemand::parser parser;
    simdjson::ondemand::document doc;
    if (parser.iterate(padded).get(doc))
        return false;
    try {
        return m_reader.readTopObject(doc) && atEnd(doc);
    } catch (const std::exception&) {
        return false;
    }
}

bool ChunkedImport::parseTail(size_t array_end) {
    size_t p = array_end + 1;
    while (p < m_text.size() && isWs(m_text[p])) ++p;
    if (p < m_text.size() && m_text[p] == '}') {
        for (++p; p < m_text.size(); ++p)
            if (!isWs(m_text[p])) return false;
        return true;
    }
    if (p >= m_text.size() || m_text[p] != ',')
        return false;
    std::string tail = "{" + std::string(m_text.substr(p + 1));
    simdjson::padded_string padded(tail);
    simdjson::ondemand::parser parser;
    simdjson::ondemand::document doc;
    if (parser.iterate(padded).get(doc))
        return false;
    try {
        return !m_reader.readTopObject(doc) && atEnd(doc);
    } catch (const std::exception&) {
        return false;
    }
}

bool ChunkedImport::parseWindow(size_t open, size_t close) {
    simdjson::padded_string_view view(m_data + open, close + 1 - open, m_capacity - open);
    simdjson::ondemand::document doc;
    if (m_parser.iterate(view).get(doc))
        return false;
    try {
        m_reader.readEventList(doc.get_value());
        return atEnd(doc);
    } catch (const std::exception&) {
        return false;
    }
}

bool ChunkedImport::run() {
    const size_t key = m_text.find("\"traceEvents\"");
    if (key == std::string_view::npos)
        return false;
    size_t p = key + 13;
    while (p < m_text.size() && isWs(m_text[p])) ++p;
    if (p >= m_text.size() || m_text[p] != ':') return false;
    ++p;
    while (p < m_text.size() && isWs(m_text[p])) ++p;
    if (p >= m_text.size() || m_text[p] != '[') return false;
    const size_t bracket = p;
    if (!parseHead(bracket))
        return false;
    size_t open = bracket;
    for (;;) {
        const size_t boundary = findBoundary(m_text, std::min(m_text.size(), open + kWindow));
        if (boundary == std::string_view::npos) {
            const size_t end = scanToArrayEnd(m_text, open + 1);
            if (end == std::string_view::npos || !parseWindow(open, end) || !parseTail(end)) {
                restore();
                return false;
            }
            break;
        }
        patch(boundary, ']');
        if (!parseWindow(open, boundary)) {
            restore();
            return false;
        }
        m_data[boundary] = '['; // the same byte opens the next window
        open = boundary;
        if (m_progress)
            m_progress(double(open) / double(m_text.size()));
    }
    return true;
}

} // namespace

Trace importKinetoJson(char* data, size_t size, size_t capacity, const std::string& source,
                       const ProgressFn& progress) {
    auto fresh = [&] {
        Trace trace;
        trace.source = source;
        trace.format = "kineto-json";
        return trace;
    };
    Trace trace = fresh();
    {
        KinetoReader reader(trace);
        ChunkedImport chunked(data, size, capacity, reader, progress);
        if (chunked.run()) {
            chunked.keepPatches(); // the text is not used again
            return trace;
        }
    }
    // Not in Kineto's layout (or not valid): one document, with simdjson's own error messages.
    trace = fresh();
    try {
        simdjson::ondemand::parser parser(std::max<size_t>(size, 64));
        simdjson::padded_string_view view(data, size, capacity);
        simdjson::ondemand::document doc;
        if (auto err = parser.iterate(view).get(doc))
            throw simdjson::simdjson_error(err);
        KinetoReader reader(trace);
        reader.readDocument(doc);
        if (!atEnd(doc))
            throw simdjson::simdjson_error(simdjson::TRAILING_CONTENT);
    } catch (const simdjson::simdjson_error& e) {
        throw InputError(fmt::format("{}: {}", source, describe(e.error())));
    } catch (const InputError& e) {
        throw InputError(fmt::format("{}: {}", source, e.what()));
    }
    if (progress)
        progress(1.0);
    return trace;
}

} // namespace sightline
