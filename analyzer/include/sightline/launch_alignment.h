#pragma once
// Matching the launch calls a collector counted (capture::LaunchRecord) with the GPU activities
// CUPTI recorded without API calls, by number: CUPTI then gives one correlation id per call that
// makes GPU work, in call order, so the n-th counted call of a segment is the activity with id
// n + d for one offset d. The offset is the one nearest to first id minus first count that the
// first calls fit, and every pairing is checked by the
// activity's kind and, for kernels, its name, so that a call the collector did not see, or one
// CUPTI did not number, shifts nothing silently: the walk finds the new offset nearby (never
// reaching back to ids already given), and two
// threads' calls that crossed between the two counters are swapped back.
#include "sightline/capture_format.h"
#include "sightline/strings.h"

#include <cstdint>
#include <vector>

namespace sightline::detail {

// What a call made (Kernel, Memcpy, Memset, Graph), as the capture records it.
using LaunchKind = capture::LaunchActivity;

struct CountedCall {
    uint64_t count; // 1, 2, 3... in call order
    LaunchKind kind;
    StringId kernel; // the kernel's raw (mangled) name; empty when not a kernel or not known
};

struct RecordedActivity {
    uint32_t correlation;
    LaunchKind kind; // Kernel, Memcpy or Memset
    StringId name;   // raw (mangled) for kernels
};

struct LaunchAlignment {
    std::vector<uint32_t> correlation; // per call, the id of its activities; 0 when none was matched
    uint64_t matched = 0, unmatched = 0, swapped = 0, offset_changes = 0;
};

// Both lists of one segment (one capture window), in any order.
LaunchAlignment alignLaunches(const std::vector<CountedCall>& calls, const std::vector<RecordedActivity>& activities);

} // namespace sightline::detail
