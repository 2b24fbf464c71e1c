// Op calls far longer on the host than their op's median (host_outliers.h).
#include "sightline/host_outliers.h"

#include "sightline/metric_passes.h"

#include <algorithm>
#include <climits>
#include <optional>
#include <unordered_map>

namespace sightline {

namespace {

// The median duration of each op name's calls; absent for names with too few calls.
std::unordered_map<uint32_t, int64_t> medianByName(const Trace& trace) {
    std::unordered_map<uint32_t, std::vector<int64_t>> durations;
    for (const CpuEvent& e : trace.cpu)
        if (e.kind == CpuKind::Op) durations[e.name.value].push_back(e.duration());
    std::unordered_map<uint32_t, int64_t> out;
    for (auto& [name, d] : durations) {
        if (d.size() < kOutlierMinCalls) continue;
        auto mid = d.begin() + long(d.size() / 2);
        std::nth_element(d.begin(), mid, d.end());
        out.emplace(name, *mid);
    }
    return out;
}

// A runtime or driver call that can wait for the device: a launch or an asynchronous memset or
// copy (blocked while the launch queue is full) or a synchronisation.
bool waitsForDevice(std::string_view n) {
    const bool enqueue = (n.starts_with("cudaMem") || n.starts_with("cuMem")) && n.find("Async") != std::string_view::npos;
    return enqueue || isLaunchCall(n) || isHostSyncCall(n);
}

// The calls that can wait for the device, by start.
class DeviceWaits {
public:
    explicit DeviceWaits(const Trace& trace) : m_trace(trace) {
        for (size_t i = 0; i < trace.cpu.size(); ++i) {
            const CpuEvent& e = trace.cpu[i];
            if ((e.kind == CpuKind::Runtime || e.kind == CpuKind::Driver) && waitsForDevice(trace.str(e.name))) m_calls.push_back(i);
        }
        std::sort(m_calls.begin(), m_calls.end(), [&](size_t a, size_t b) { return trace.cpu[a].start_ns < trace.cpu[b].start_ns; });
    }

    // Their time on the op's thread between `from` and the op's end.
    int64_t inside(const CpuEvent& op, int64_t from) const {
        auto it = std::lower_bound(m_calls.begin(), m_calls.end(), op.start_ns,
                                   [&](size_t i, int64_t ts) { return m_trace.cpu[i].start_ns < ts; });
        int64_t total = 0;
        for (; it != m_calls.end() && m_trace.cpu[*it].start_ns < op.end_ns; ++it) {
            const CpuEvent& c = m_trace.cpu[*it];
            if (c.thread == op.thread) total += std::max<int64_t>(0, std::min(c.end_ns, op.end_ns) - std::max(c.start_ns, from));
        }
        return total;
    }

private:
    const Trace& m_trace;
    std::vector<size_t> m_calls;
};

// When the device finished the work launched before a time: GPU activities by their launch call's
// start (their own start where the call is unknown), with the running maximum of their ends.
class DeviceDrain {
public:
    DeviceDrain(const Trace& trace, const std::vector<int32_t>& launch) {
        for (size_t g = 0; g < trace.gpu.size(); ++g)
            m_by_launch.emplace_back(launch[g] >= 0 ? trace.cpu[size_t(launch[g])].start_ns : trace.gpu[g].start_ns, trace.gpu[g].end_ns);
        std::sort(m_by_launch.begin(), m_by_launch.end());
        for (size_t k = 1; k < m_by_launch.size(); ++k) m_by_launch[k].second = std::max(m_by_launch[k].second, m_by_launch[k - 1].second);
    }

    // The latest end of the work launched before `ts`; INT64_MIN where none was.
    int64_t before(int64_t ts) const {
        auto it = std::lower_bound(m_by_launch.begin(), m_by_launch.end(), std::pair<int64_t, int64_t>{ts, INT64_MIN});
        return it == m_by_launch.begin() ? INT64_MIN : std::prev(it)->second;
    }

private:
    std::vector<std::pair<int64_t, int64_t>> m_by_launch;
};

// The time an op call spent waiting for the device: until the device had finished the work queued
// ahead of it (a GPU-bound step's host runs ahead and then waits, on a full launch queue or a
// synchronisation, whether or not the call that waited was recorded), then in calls that wait.
struct Waiting {
    Waiting(const Trace& trace, const std::vector<int32_t>& launch) : calls(trace), drain(trace, launch) {}
    int64_t of(const CpuEvent& op) const {
        const int64_t ready = std::clamp(drain.before(op.start_ns), op.start_ns, op.end_ns);
        return ready - op.start_ns + calls.inside(op, ready);
    }
    DeviceWaits calls;
    DeviceDrain drain;
};

// Whether a call of `duration` passes both tests against its op's median.
bool farOff(int64_t duration, int64_t median) {
    return duration - median >= kOutlierMinNs && double(duration) >= kOutlierFactor * double(median);
}

} // namespace

std::vector<HostOutlier> hostOutliers(const Trace& trace, const std::vector<int32_t>& launch) {
    const auto medians = medianByName(trace);
    std::optional<Waiting> waiting; // made at the first candidate: most traces have none
    std::vector<HostOutlier> out;
    for (size_t i = 0; i < trace.cpu.size(); ++i) {
        const CpuEvent& e = trace.cpu[i];
        if (e.kind != CpuKind::Op) continue;
        auto it = medians.find(e.name.value);
        if (it == medians.end() || !farOff(e.duration(), it->second)) continue;
        if (!waiting) waiting.emplace(trace, launch);
        const int64_t waited = waiting->of(e), own = e.duration() - waited;
        if (farOff(own, it->second)) out.push_back({i, it->second, own - it->second, waited});
    }
    return out;
}

std::vector<HostOutlier> hostOutliers(const Trace& trace) { return hostOutliers(trace, launchCalls(trace)); }

} // namespace sightline
