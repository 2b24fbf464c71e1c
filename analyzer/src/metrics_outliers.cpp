// Host outliers per step and per op over the steady steps (host_outliers.h, docs/metrics.md).
#include "sightline/host_outliers.h"
#include "sightline/metric_passes.h"

#include <algorithm>

namespace sightline {

namespace {

// Whether an op around event i is an outlier too (its excess then holds this one's).
bool insideOutlier(const OpTree& tree, const std::vector<uint8_t>& outlier, size_t i) {
    for (int32_t p = tree.parent[i]; p != OpTree::kNone; p = tree.parent[size_t(p)])
        if (outlier[size_t(p)]) return true;
    return false;
}

} // namespace

void hostOutlierMetrics(const Trace& trace, const OpTree& tree, const std::vector<int32_t>& launch, Metrics& metrics) {
    std::vector<uint8_t> steady(metrics.steps.size(), 0);
    for (size_t i : metrics.steady) steady[i] = 1;
    metrics.outlier_calls = hostOutliers(trace, launch);
    const std::vector<HostOutlier>& outliers = metrics.outlier_calls;
    std::vector<uint8_t> outlier(trace.cpu.size(), 0), holds_outlier(trace.cpu.size(), 0);
    for (const HostOutlier& o : outliers) outlier[o.event] = 1;
    for (const HostOutlier& o : outliers)
        for (int32_t p = tree.parent[o.event]; p != OpTree::kNone && !holds_outlier[size_t(p)]; p = tree.parent[size_t(p)])
            holds_outlier[size_t(p)] = 1;
    for (const HostOutlier& o : outliers) {
        const int32_t s = o.event < metrics.cpu_step.size() ? metrics.cpu_step[o.event] : -1;
        if (s < 0) continue;
        if (!insideOutlier(tree, outlier, o.event)) { // a step's figure counts nested outliers once
            CountTime& step = metrics.steps[size_t(s)].host_outliers;
            ++step.count;
            step.ns += o.excess_ns;
        }
        if (!steady[size_t(s)] || holds_outlier[o.event]) continue; // by op: the innermost, which names the setup
        CountTime& op = metrics.host_outliers[std::string(trace.str(trace.cpu[o.event].name))];
        ++op.count;
        op.ns += o.excess_ns;
    }
}

} // namespace sightline
