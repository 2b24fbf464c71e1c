#pragma once
// Searching sorted arrays (internal to the analyzer).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sightline {

// How many of the sorted x are at most t (std::upper_bound's position), searched outward from
// `hint`, the previous answer, which it updates: O(log distance), so queries that come in nearly
// increasing order cost almost nothing, and any order stays correct.
inline size_t upperBoundFrom(const std::vector<int64_t>& x, int64_t t, size_t& hint) {
    const size_t n = x.size();
    size_t lo = std::min(hint, n), hi = lo, step = 1;
    if (lo > 0 && x[lo - 1] > t) { // the answer lies below lo
        while (lo > 0 && x[lo - 1] > t) {
            hi = lo;
            lo = lo > step ? lo - step : 0;
            step *= 2;
        }
    } else { // at or above lo
        while (hi < n && x[hi] <= t) {
            lo = hi + 1;
            hi = std::min(n, hi + step);
            step *= 2;
        }
    }
    hint = size_t(std::upper_bound(x.begin() + std::ptrdiff_t(lo), x.begin() + std::ptrdiff_t(hi), t) - x.begin());
    return hint;
}

// How many of the sorted x lie in [a, b).
inline size_t countIn(const std::vector<int64_t>& x, int64_t a, int64_t b) {
    if (b <= a) return 0;
    return size_t(std::lower_bound(x.begin(), x.end(), b) - std::lower_bound(x.begin(), x.end(), a));
}

} // namespace sightline
