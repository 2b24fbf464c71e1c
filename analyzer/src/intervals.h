#pragma once
// Time intervals [start, end) in ns: merging, total length, overlap of two merged lists.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace sightline {

using Interval = std::pair<int64_t, int64_t>;

// Sorted, merged copy of `v`; empty intervals dropped.
inline std::vector<Interval> mergedIntervals(std::vector<Interval> v) {
    std::sort(v.begin(), v.end());
    std::vector<Interval> out;
    for (const auto& iv : v) {
        if (iv.second <= iv.first) continue;
        if (!out.empty() && iv.first <= out.back().second)
            out.back().second = std::max(out.back().second, iv.second);
        else
            out.push_back(iv);
    }
    return out;
}

// Total length of a merged list.
inline int64_t totalLength(const std::vector<Interval>& merged) {
    int64_t sum = 0;
    for (const auto& iv : merged) sum += iv.second - iv.first;
    return sum;
}

// Length of the union of any intervals.
inline int64_t unionLength(std::vector<Interval> v) { return totalLength(mergedIntervals(std::move(v))); }

// Length of the intersection of two merged lists.
inline int64_t overlapLength(const std::vector<Interval>& a, const std::vector<Interval>& b) {
    int64_t sum = 0;
    size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
        const int64_t lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
        if (hi > lo) sum += hi - lo;
        (a[i].second < b[j].second) ? ++i : ++j;
    }
    return sum;
}

} // namespace sightline
