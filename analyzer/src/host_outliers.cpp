// Op calls far longer on the host than their op's median (host_outliers.h).
#include "sightline/host_outliers.h"

#include <algorithm>
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

} // namespace

std::vector<HostOutlier> hostOutliers(const Trace& trace) {
    const auto medians = medianByName(trace);
    std::vector<HostOutlier> out;
    for (size_t i = 0; i < trace.cpu.size(); ++i) {
        const CpuEvent& e = trace.cpu[i];
        if (e.kind != CpuKind::Op) continue;
        auto it = medians.find(e.name.value);
        if (it == medians.end()) continue;
        const int64_t median = it->second, excess = e.duration() - median;
        if (excess >= kOutlierMinNs && double(e.duration()) >= kOutlierFactor * double(median)) out.push_back({i, median, excess});
    }
    return out;
}

} // namespace sightline
