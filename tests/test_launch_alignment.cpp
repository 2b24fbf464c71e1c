// Counted launch calls matched with CUPTI's GPU activities by number (sightline/launch_alignment.h):
// offsets, calls only one side numbered, two threads' calls crossed, graph launches, no fit at all.
#include "sightline/launch_alignment.h"
#include "sightline/strings.h"

#include <fmt/format.h>

#include <catch2/catch.hpp>

using namespace sightline;
using namespace sightline::detail;

namespace {

// A job's calls: kernels of five names in turn, every seventh call a copy.
struct Job {
    StringTable names;
    std::vector<CountedCall> calls;
    std::vector<RecordedActivity> activities;
    StringId kernel(int i) { return names.intern(fmt::format("_Z7kernel{}Pf", i % 5)); }
    void call(uint64_t count, int i) {
        if (i % 7 == 3) calls.push_back({count, LaunchKind::Memcpy, {}});
        else calls.push_back({count, LaunchKind::Kernel, kernel(i)});
    }
    void activity(uint32_t id, int i) {
        if (i % 7 == 3) activities.push_back({id, LaunchKind::Memcpy, {}});
        else activities.push_back({id, LaunchKind::Kernel, kernel(i)});
    }
};

} // namespace

TEST_CASE("counted calls are matched with the activities CUPTI numbered, at whatever offset", "[launch_alignment]") {
    for (uint32_t offset : {0u, 1000u}) {
        INFO("offset " << offset);
        Job j;
        for (int i = 1; i <= 300; ++i) {
            j.call(uint64_t(i), i);
            j.activity(uint32_t(i) + offset, i);
        }
        const LaunchAlignment a = alignLaunches(j.calls, j.activities);
        CHECK(a.matched == 300);
        CHECK(a.unmatched == 0);
        for (size_t k = 0; k < j.calls.size(); ++k) CHECK(a.correlation[k] == j.calls[k].count + offset);
    }
}

TEST_CASE("a call only CUPTI numbered, or only the collector counted, moves the offset and nothing else", "[launch_alignment]") {
    Job j;
    // CUPTI numbered a kernel the collector did not see (id 51), and the collector counted a call
    // (its 200th) that CUPTI did not number: ids run one ahead of the counts between the two.
    uint32_t id = 0;
    for (int i = 1; i <= 300; ++i) {
        if (i == 51) j.activities.push_back({++id, LaunchKind::Kernel, j.names.intern("_Z6unseenv")});
        j.call(uint64_t(i), i);
        if (i == 200) {
            j.calls.back().kernel = j.names.intern("_Z6failedv"); // made no activity
            continue;
        }
        j.activity(++id, i);
    }
    const LaunchAlignment a = alignLaunches(j.calls, j.activities);
    CHECK(a.unmatched == 1); // the call without an activity
    CHECK(a.offset_changes == 2);
    for (size_t k = 0; k < j.calls.size(); ++k) {
        const uint64_t c = j.calls[k].count;
        INFO("call " << c);
        CHECK(a.correlation[k] == (c < 51 ? c : c < 200 ? c + 1
                                       : c == 200       ? 0
                                                        : c));
    }
}

TEST_CASE("hundreds of activities in a row that the collector did not see (a library calling libcuda directly) are skipped over", "[launch_alignment]") {
    Job j;
    uint32_t id = 0;
    for (int i = 1; i <= 400; ++i) {
        if (i == 100)
            for (int foreign = 0; foreign < 300; ++foreign) j.activities.push_back({++id, LaunchKind::Kernel, j.names.intern("_Z7foreignv")});
        j.call(uint64_t(i), i);
        j.activity(++id, i);
    }
    const LaunchAlignment a = alignLaunches(j.calls, j.activities);
    CHECK(a.matched == 400);
    CHECK(a.unmatched == 0);
    for (size_t k = 0; k < j.calls.size(); ++k) CHECK(a.correlation[k] == j.calls[k].count + (j.calls[k].count < 100 ? 0 : 300));
}

TEST_CASE("calls counted before CUPTI numbered (a window opening) are left out, the rest matched", "[launch_alignment]") {
    Job j;
    for (int i = 1; i <= 100; ++i) {
        j.call(uint64_t(i), i);
        if (i > 3) j.activity(uint32_t(i - 3), i); // CUPTI's first id is the collector's 4th call
    }
    const LaunchAlignment a = alignLaunches(j.calls, j.activities);
    CHECK(a.matched == 97);
    for (size_t k = 0; k < j.calls.size(); ++k) CHECK(a.correlation[k] == (j.calls[k].count > 3 ? j.calls[k].count - 3 : 0));
}

TEST_CASE("two threads' calls numbered in opposite orders by the two counters are swapped back", "[launch_alignment]") {
    Job j;
    for (int i = 1; i <= 100; ++i) {
        j.call(uint64_t(i), i);
        j.activity(uint32_t(i == 40 ? 41 : i == 41 ? 40
                                                   : i),
                   i); // call 40 made activity 41, call 41 activity 40
    }
    const LaunchAlignment a = alignLaunches(j.calls, j.activities);
    CHECK(a.swapped == 2);
    CHECK(a.matched == 100);
    CHECK(a.correlation[39] == 41);
    CHECK(a.correlation[40] == 40);
    CHECK(a.correlation[41] == 42);
}

TEST_CASE("a graph launch takes the id its nodes share, and calls come in any order", "[launch_alignment]") {
    Job j;
    for (int i = 1; i <= 60; ++i) {
        if (i == 20) {
            j.calls.push_back({20, LaunchKind::Graph, {}});
            for (int node = 0; node < 3; ++node) j.activities.push_back({20, LaunchKind::Kernel, j.names.intern("_Z4nodev")});
            continue;
        }
        j.call(uint64_t(i), i);
        j.activity(uint32_t(i), i);
    }
    std::reverse(j.calls.begin(), j.calls.end()); // as threads' rings may hand them over
    const LaunchAlignment a = alignLaunches(j.calls, j.activities);
    CHECK(a.matched == 60);
    for (size_t k = 0; k < j.calls.size(); ++k) CHECK(a.correlation[k] == j.calls[k].count);
}

TEST_CASE("calls that fit no activity are all left unmatched, never paired by number alone", "[launch_alignment]") {
    Job j;
    for (int i = 1; i <= 50; ++i) {
        j.calls.push_back({uint64_t(i), LaunchKind::Kernel, j.names.intern(fmt::format("_Z4mine{}v", i))});
        j.activities.push_back({uint32_t(i), LaunchKind::Kernel, j.names.intern(fmt::format("_Z6theirs{}v", i))});
    }
    const LaunchAlignment a = alignLaunches(j.calls, j.activities);
    CHECK(a.matched == 0);
    CHECK(a.unmatched == 50);
    for (uint32_t id : a.correlation) CHECK(id == 0);
    CHECK(alignLaunches({}, j.activities).correlation.empty());
}
