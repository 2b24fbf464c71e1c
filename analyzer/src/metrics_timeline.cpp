// The GPU timeline of each step: its window on the GPU's clock, busy time, the compute stream and
// why it stood idle (docs/metrics.md, "Steps on the GPU's clock" and "Idle gaps").
#include "sightline/metric_passes.h"

#include "intervals.h"

#include <algorithm>
#include <climits>

namespace sightline {

namespace {

// A synchronisation that returned this soon before the GPU finished its last queued work waited for all of it.
constexpr int64_t kDrainSlackNs = 2'000;

struct HostSpan {
    int64_t start, end;
};

// Host spans sorted by start, with the running maximum of their ends, to ask in O(log n) whether
// any span overlaps an interval.
class SpanIndex {
public:
    void add(int64_t start, int64_t end) { m_spans.push_back({start, end}); }
    void finish() {
        std::sort(m_spans.begin(), m_spans.end(), [](const HostSpan& a, const HostSpan& b) { return a.start < b.start; });
        m_max_end.resize(m_spans.size());
        int64_t mx = INT64_MIN;
        for (size_t i = 0; i < m_spans.size(); ++i) m_max_end[i] = mx = std::max(mx, m_spans[i].end);
    }
    // Any span with start < b and end > a.
    bool overlaps(int64_t a, int64_t b) const {
        auto it = std::lower_bound(m_spans.begin(), m_spans.end(), b, [](const HostSpan& s, int64_t v) { return s.start < v; });
        return it != m_spans.begin() && m_max_end[size_t(it - m_spans.begin()) - 1] > a;
    }
    const std::vector<HostSpan>& spans() const { return m_spans; }

private:
    std::vector<HostSpan> m_spans;
    std::vector<int64_t> m_max_end;
};

struct Activity {
    int64_t start, end, queued; // queued: when the host's launch call returned
    int32_t stream;
    bool comm;
    bool launch_known; // its launch call is in the trace
};

// The end of the GPU work the host had launched before a time: activities sorted by when their
// launch began, with the running maximum of their ends.
class EarlierWork {
public:
    explicit EarlierWork(const MetricContext& ctx) {
        for (size_t gi = 0; gi < ctx.trace.gpu.size(); ++gi)
            if (ctx.trace.gpu[gi].kind != GpuKind::Annotation) m_work.emplace_back(ctx.launchBegin(gi), ctx.trace.gpu[gi].end_ns);
        std::sort(m_work.begin(), m_work.end());
        int64_t mx = INT64_MIN;
        for (auto& w : m_work) w.second = mx = std::max(mx, w.second);
    }
    // INT64_MIN when nothing was launched before `t`.
    int64_t endOfWorkLaunchedBefore(int64_t t) const {
        auto it = std::lower_bound(m_work.begin(), m_work.end(), std::make_pair(t, INT64_MIN));
        return it == m_work.begin() ? INT64_MIN : std::prev(it)->second;
    }

private:
    std::vector<std::pair<int64_t, int64_t>> m_work; // (launch begin, running max of ends)
};

// What the host was doing: synchronisations and DataLoader waits (all threads), and each step's
// launch calls.
struct HostActivity {
    SpanIndex syncs, loaders;
    std::vector<std::vector<int64_t>> launch_times; // per step, sorted
    std::vector<int64_t> all_launches;              // every launch call's start, in or out of a step, sorted
};

HostActivity hostActivity(const MetricContext& ctx) {
    HostActivity h;
    h.launch_times.resize(ctx.steps.size());
    for (size_t i = 0; i < ctx.trace.cpu.size(); ++i) {
        const CpuEvent& e = ctx.trace.cpu[i];
        const uint8_t flags = ctx.flags(e.name);
        if (flags & MetricContext::kSync) h.syncs.add(e.start_ns, e.end_ns);
        if (flags & MetricContext::kLoader) h.loaders.add(e.start_ns, e.end_ns);
        const bool api = e.kind == CpuKind::Runtime || e.kind == CpuKind::Driver;
        if (!api || !(flags & MetricContext::kLaunch) || !ctx.tree.counted[i]) continue;
        h.all_launches.push_back(e.start_ns);
        if (ctx.cpu_step[i] >= 0) h.launch_times[size_t(ctx.cpu_step[i])].push_back(e.start_ns);
    }
    h.syncs.finish();
    h.loaders.finish();
    for (auto& v : h.launch_times) std::sort(v.begin(), v.end());
    std::sort(h.all_launches.begin(), h.all_launches.end());
    return h;
}

std::vector<std::vector<Activity>> activitiesByStep(const MetricContext& ctx) {
    std::vector<std::vector<Activity>> acts(ctx.steps.size());
    for (size_t gi = 0; gi < ctx.trace.gpu.size(); ++gi) {
        const int32_t s = ctx.gpu_step[gi];
        if (s < 0) continue;
        const GpuEvent& g = ctx.trace.gpu[gi];
        acts[size_t(s)].push_back({g.start_ns, g.end_ns, ctx.launchEnd(gi), g.stream, ctx.classOf(g.name).isCommunication(),
                                   ctx.launch[gi] >= 0});
    }
    return acts;
}

// The stream with the most GPU time in the step, communication left out unless there is nothing else.
int32_t computeStream(const std::vector<Activity>& acts) {
    std::map<int32_t, int64_t> per_stream, per_comm_stream;
    for (const Activity& x : acts) (x.comm ? per_comm_stream : per_stream)[x.stream] += x.end - x.start;
    if (per_stream.empty()) per_stream = per_comm_stream;
    return std::max_element(per_stream.begin(), per_stream.end(), [](const auto& x, const auto& y) { return x.second < y.second; })->first;
}

// Gaps on the compute stream within the step's window and their causes. A gap is the host's fault
// only when the launch call of the work that ended it returned after the gap began.
void idleGaps(const HostActivity& host, std::vector<Activity> cs, StepMetrics& m) {
    std::sort(cs.begin(), cs.end(), [](const Activity& x, const Activity& y) { return x.start < y.start; });
    std::vector<Interval> civ;
    for (const Activity& x : cs) civ.emplace_back(std::max(x.start, m.begin_ns), std::max(x.end, m.begin_ns));
    m.compute_busy_ns = unionLength(civ);
    auto classify = [&](int64_t idle_from, const Activity& next) {
        const int64_t gap = next.start - idle_from;
        if (gap <= 0) return;
        ++m.idle.gaps;
        if (!next.launch_known) {
            m.idle.unknown_ns += gap;
            return;
        }
        if (next.queued < idle_from) {
            m.idle.dependency_ns += gap;
            return;
        }
        // The host issued the next work late: what was it doing?
        if (host.loaders.overlaps(idle_from, next.queued)) m.idle.dataloader_ns += gap;
        else if (host.syncs.overlaps(idle_from - 2'000, next.queued)) m.idle.sync_ns += gap;
        else m.idle.launch_ns += gap;
    };
    int64_t busy_until = m.begin_ns;
    for (const Activity& x : cs) {
        classify(busy_until, x);
        busy_until = std::max(busy_until, x.end);
    }
    const int64_t step_end = m.begin_ns + m.time_ns;
    if (step_end > busy_until) {
        ++m.idle.gaps;
        m.idle.tail_ns += step_end - busy_until;
    }
}

// Synchronisations between the last launch before the step and its start (the end of the step
// before, or the loop between steps) that returned only once the GPU had finished all the work
// launched before them: the step began on an empty queue, and the GPU waits for its first launches
// (docs/metrics.md, `sync.drained`).
uint64_t drainedSyncs(const HostActivity& host, const EarlierWork& earlier, int64_t step_start) {
    auto last = std::lower_bound(host.all_launches.begin(), host.all_launches.end(), step_start);
    const int64_t from = last == host.all_launches.begin() ? INT64_MIN : *std::prev(last);
    const std::vector<HostSpan>& spans = host.syncs.spans(); // by start
    auto first = std::lower_bound(spans.begin(), spans.end(), from, [](const HostSpan& x, int64_t v) { return x.start < v; });
    uint64_t n = 0;
    for (auto sp = first; sp != spans.end() && sp->start < step_start; ++sp) {
        const int64_t work_end = earlier.endOfWorkLaunchedBefore(sp->start);
        if (work_end != INT64_MIN && sp->end + kDrainSlackNs >= work_end) ++n;
    }
    return n;
}

} // namespace

void timelinePass(const MetricContext& ctx, std::vector<StepMetrics>& steps) {
    const HostActivity host = hostActivity(ctx);
    const std::vector<std::vector<Activity>> acts = activitiesByStep(ctx);
    const EarlierWork earlier(ctx);
    for (size_t s = 0; s < steps.size(); ++s) {
        StepMetrics& m = steps[s];
        const std::vector<Activity>& a = acts[s];
        // The window: from where the GPU finished the work launched before the step (the host may
        // have run ahead) to where the step's own work, or its host range, ends.
        m.begin_ns = m.step.gpu_clock ? m.step.start_ns : std::max(m.step.start_ns, earlier.endOfWorkLaunchedBefore(m.step.start_ns));
        m.host_ahead_ns = m.begin_ns - m.step.start_ns;
        m.drained_syncs = drainedSyncs(host, earlier, m.step.start_ns);
        int64_t end = std::max(m.step.end_ns, m.begin_ns);
        std::vector<Interval> iv;
        for (const Activity& x : a) {
            iv.emplace_back(std::max(x.start, m.begin_ns), std::max(x.end, m.begin_ns));
            end = std::max(end, x.end);
        }
        m.time_ns = end - m.begin_ns;
        m.gpu_busy_ns = unionLength(iv);
        if (a.empty()) {
            m.idle.launch_ns = m.time_ns;
            continue;
        }
        m.compute_stream = computeStream(a);
        std::vector<Activity> cs;
        for (const Activity& x : a)
            if (x.stream == m.compute_stream) cs.push_back(x);
        idleGaps(host, std::move(cs), m);
        // Synchronisations followed by more launches in the step.
        const auto& lt = host.launch_times[s];
        for (const HostSpan& sp : host.syncs.spans())
            if (sp.start >= m.step.start_ns && sp.start < m.step.end_ns && std::upper_bound(lt.begin(), lt.end(), sp.end) != lt.end())
                ++m.mid_step_syncs;
    }
}

} // namespace sightline
