// Writes a large trace database for benchmarks: the events of a source trace (any format Sightline
// reads) repeated until there are at least --events CPU and GPU events, each copy shifted in time
// by the source's span plus a gap, with its external ids, correlation ids and flow ids offset so
// that links stay unique (what bench/make_large_trace.py does to Kineto JSON, in memory).
//
// usage: sightline_make_large_db SOURCE OUTPUT.db --events N
#include "sightline/import.h"
#include "sightline/trace_db.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace sightline;

namespace {

struct Span {
    int64_t lo = INT64_MAX, hi = INT64_MIN, max_id = 0;
};

Span spanOf(const Trace& t) {
    Span s;
    for (const CpuEvent& e : t.cpu) {
        s.lo = std::min(s.lo, e.start_ns), s.hi = std::max(s.hi, e.end_ns);
        s.max_id = std::max({s.max_id, e.external_id, e.correlation});
    }
    for (const GpuEvent& g : t.gpu) {
        s.lo = std::min(s.lo, g.start_ns), s.hi = std::max(s.hi, g.end_ns);
        s.max_id = std::max({s.max_id, g.external_id, g.correlation});
    }
    for (const FlowPoint& f : t.flows) s.max_id = std::max(s.max_id, f.id);
    return s;
}

int64_t offsetId(int64_t id, int64_t off) { return id > 0 ? id + off : id; }

void appendCopy(Trace& out, const Trace& src, int64_t shift, int64_t off) {
    for (CpuEvent e : src.cpu) {
        e.start_ns += shift, e.end_ns += shift;
        e.external_id = offsetId(e.external_id, off), e.correlation = offsetId(e.correlation, off);
        out.cpu.push_back(e);
    }
    for (GpuEvent g : src.gpu) {
        g.start_ns += shift, g.end_ns += shift;
        g.external_id = offsetId(g.external_id, off), g.correlation = offsetId(g.correlation, off);
        out.gpu.push_back(g);
    }
    for (FlowPoint f : src.flows) {
        f.ts_ns += shift, f.id = offsetId(f.id, off);
        out.flows.push_back(f);
    }
    for (OverheadSpan o : src.overhead) {
        o.start_ns += shift, o.end_ns += shift;
        out.overhead.push_back(o);
    }
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 5 || std::string(argv[3]) != "--events") {
        std::fprintf(stderr, "usage: %s SOURCE OUTPUT.db --events N\n", argv[0]);
        return 2;
    }
    try {
        Trace t = importTrace(argv[1]);
        const Trace src = importTrace(argv[1]); // read twice (a Trace is not copied): the same string ids
        const size_t per_copy = src.cpu.size() + src.gpu.size();
        const size_t want = std::strtoull(argv[4], nullptr, 10);
        const Span s = spanOf(src);
        const size_t copies = per_copy ? (want + per_copy - 1) / per_copy : 1;
        for (size_t c = 1; c < copies; ++c)
            appendCopy(t, src, int64_t(c) * (s.hi - s.lo + 1'000'000), int64_t(c) * (s.max_id + 1));
        writeTraceDb(t, argv[2]);
        std::printf("%s: %zu copies, %zu CPU and %zu GPU events\n", argv[2], copies, t.cpu.size(), t.gpu.size());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}
