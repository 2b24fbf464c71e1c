// Counted launch calls matched with GPU activities by number, checked by kind and name.
#include "sightline/launch_alignment.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <optional>
#include <unordered_map>

namespace sightline::detail {

namespace {

constexpr int64_t kFirstReach = 4096;  // how far the first offset may be from first id minus first count
constexpr int64_t kResyncReach = 1024; // how far the offset may move where a pairing fails (calls only one side saw in a row)
constexpr size_t kSpan = 16;           // calls an offset is tried on

bool fits(const CountedCall& c, const RecordedActivity& a) {
    if (c.kind == LaunchKind::Graph) return true; // a graph's nodes share its id, whatever they are
    if (c.kind != a.kind) return false;
    return c.kind != LaunchKind::Kernel || c.kernel.empty() || c.kernel == a.name;
}

// One alignment of counted calls with recorded activities: the calls in count order, walked
// once with the offset between the collector's count and CUPTI's correlation id.
class Aligner {
public:
    Aligner(const std::vector<CountedCall>& calls, const std::vector<RecordedActivity>& activities) : m_calls(calls) {
        for (const RecordedActivity& a : activities) m_by_id.emplace(a.correlation, &a);
        m_order.resize(calls.size());
        for (size_t i = 0; i < m_order.size(); ++i) m_order[i] = i;
        std::sort(m_order.begin(), m_order.end(), [&](size_t a, size_t b) { return calls[a].count < calls[b].count; });
        m_out.correlation.assign(calls.size(), 0);
    }

    LaunchAlignment run() {
        const std::optional<int64_t> first = firstOffset();
        if (!first) {
            m_out.unmatched = m_calls.size();
            return std::move(m_out);
        }
        walk(*first);
        return std::move(m_out);
    }

private:
    // 1 the activity numbered count + d fits the call, 0 there is none, -1 it is another's.
    int at(size_t k, int64_t d) const {
        const int64_t id = int64_t(m_calls[k].count) + d;
        if (id <= 0 || id > int64_t(UINT32_MAX)) return 0; // no such id: a call made before CUPTI numbered
        const auto it = m_by_id.find(uint32_t(id));
        if (it == m_by_id.end()) return 0;
        return fits(m_calls[k], *it->second) ? 1 : -1;
    }

    // Whether offset dd fits the calls from `from` on: seven in eight of those that meet an activity
    // there (a call meeting none says nothing), or, with fewer than four calls left, the first.
    bool fitsFrom(size_t from, int64_t dd) const {
        const size_t end = std::min(from + kSpan, m_order.size());
        if (end - from < 4) return at(m_order[from], dd) > 0;
        size_t fit = 0, met = 0;
        for (size_t j = from; j < end; ++j) {
            const int r = at(m_order[j], dd);
            fit += r > 0;
            met += r != 0;
        }
        return fit > 0 && fit * 8 >= met * 7;
    }

    // The offset nearest `d` (itself first when `with_d`) that the call at `i` and the calls from it
    // fit. Nearest, not best: a training job repeats itself, so offsets of a whole step (or of a
    // loop's turn) fit as well. An id is given once, in call order (two crossed calls aside), so a
    // new offset may not reach back to ids already given, where the repeating pattern fits too.
    std::optional<int64_t> nearest(size_t i, int64_t d, int64_t reach, bool with_d) const {
        for (int64_t step = with_d ? 0 : 1; step <= reach; ++step)
            for (int64_t dd : {d - step, d + step}) {
                if (int64_t(m_calls[m_order[i]].count) + dd > m_last_id && at(m_order[i], dd) > 0 && fitsFrom(i, dd)) return dd;
                if (step == 0) break;
            }
        return std::nullopt;
    }

    // Both counters start together, CUPTI's perhaps shifted past an earlier window's ids (the
    // collector's decoding keeps a capture's ids unique): the search starts from first id minus
    // first count. Each of the first calls finds its nearest fitting offset (a call made as the
    // window opened may have no activity, and then only a repeat of the pattern fits it); the
    // nearest of those is taken.
    std::optional<int64_t> firstOffset() const {
        int64_t lowest = INT64_MAX;
        for (const auto& [id, a] : m_by_id) lowest = std::min<int64_t>(lowest, id);
        const int64_t start = m_by_id.empty() ? 0 : lowest - int64_t(m_calls[m_order[0]].count);
        std::optional<int64_t> first;
        for (size_t i = 0; i < std::min(kSpan, m_order.size()); ++i)
            if (const std::optional<int64_t> d = nearest(i, start, first ? std::abs(*first - start) : kFirstReach, true))
                if (!first || std::abs(*d - start) < std::abs(*first - start)) first = d;
        return first;
    }

    // Two threads' calls numbered in one order by the collector and in the other by CUPTI: true
    // when calls i and i + 1 pair crosswise at offset d (and are matched so).
    bool matchCrossed(size_t i, int64_t d) {
        if (i + 1 >= m_order.size()) return false;
        const size_t k = m_order[i], k2 = m_order[i + 1];
        if (m_calls[k2].count != m_calls[k].count + 1 || at(k, d + 1) <= 0 || at(k2, d - 1) <= 0) return false;
        m_out.correlation[k] = uint32_t(int64_t(m_calls[k].count) + d + 1);
        m_out.correlation[k2] = uint32_t(int64_t(m_calls[k2].count) + d - 1);
        m_last_id = std::max<int64_t>(m_last_id, m_out.correlation[k]);
        m_out.matched += 2;
        m_out.swapped += 2;
        return true;
    }

    void walk(int64_t d) {
        size_t misses = 0; // calls left unmatched in a row
        for (size_t i = 0; i < m_order.size();) {
            const size_t k = m_order[i];
            const int here = at(k, d);
            if (here >= 0) { // fits, or no activity has that id (dropped, or the call failed): nothing to check
                if (here > 0) {
                    m_out.correlation[k] = uint32_t(int64_t(m_calls[k].count) + d);
                    m_last_id = std::max<int64_t>(m_last_id, m_out.correlation[k]);
                    ++m_out.matched;
                }
                misses = 0;
                ++i;
                continue;
            }
            if (matchCrossed(i, d)) {
                i += 2;
                continue;
            }
            // A call one counter saw and the other did not: the nearest offset the next calls fit.
            // (After a long run of misses, only every kSpan-th call looks, so that a segment nothing
            // fits costs a bounded search per call.)
            if (misses < kSpan || misses % kSpan == 0)
                if (const std::optional<int64_t> moved = nearest(i, d, kResyncReach, false)) {
                    d = *moved;
                    ++m_out.offset_changes;
                    continue; // this call again, at the new offset
                }
            ++m_out.unmatched;
            ++misses;
            ++i;
        }
    }

    const std::vector<CountedCall>& m_calls;
    std::unordered_map<uint32_t, const RecordedActivity*> m_by_id;
    std::vector<size_t> m_order;
    int64_t m_last_id = 0;
    LaunchAlignment m_out;
};

} // namespace

LaunchAlignment alignLaunches(const std::vector<CountedCall>& calls, const std::vector<RecordedActivity>& activities) {
    if (calls.empty()) return {};
    return Aligner(calls, activities).run();
}

} // namespace sightline::detail
