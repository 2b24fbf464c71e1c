#pragma once
// std::sort on two cores for large inputs: the halves side by side, then merged. The analysis's
// sorts of millions of events (op tree, metrics) are a good part of opening a large trace.
#include <algorithm>
#include <future>
#include <vector>

namespace sightline {

template <typename T, typename Less>
void sortOnTwoCores(std::vector<T>& v, Less less) {
    if (v.size() < (size_t(1) << 16)) {
        std::sort(v.begin(), v.end(), less);
        return;
    }
    const auto mid = v.begin() + long(v.size() / 2);
    auto first_half = std::async(std::launch::async, [&] { std::sort(v.begin(), mid, less); });
    std::sort(mid, v.end(), less);
    first_half.get();
    std::inplace_merge(v.begin(), mid, v.end(), less);
}

} // namespace sightline
