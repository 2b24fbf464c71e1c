// sightline diff: a trace against itself reports no change; a slower trace is a regression.
#include "sightline/report/diff.h"
#include "sightline/import.h"
#include "synthetic_training.h"
#include "test_support.h"

#include <catch2/catch.hpp>

using namespace sightline;
using namespace sightline::test;

namespace {
Report reportOf(const Trace& t) { return buildReport(t, Taxonomy::builtin(), RuleSet::builtin(), ReportOptions{}); }
} // namespace

TEST_CASE("a trace diffed against itself shows no change", "[diff]") {
    const Trace t = importTrace(fixture("qwen3next_fallback_small.json.gz"));
    const Report r = reportOf(t);
    const Diff d = computeDiff(r, r, 5.0);
    CHECK(d.metrics.empty());
    CHECK(d.kernel_classes.empty());
    CHECK(d.ops.empty());
    CHECK(d.findings_new.empty());
    CHECK(d.findings_resolved.empty());
    CHECK_FALSE(d.regression());
    CHECK(d.stepChangePct() == 0);
    CHECK_THAT(formatDiffText(d, 10, false), Catch::Contains("no regression"));
}

TEST_CASE("a fix shows as resolved findings and a faster step, and the reverse is a regression", "[diff]") {
    const Report slow = reportOf(healthyStep([](auto& t) { t.kernels("aten::mul", kMulKernel, 600, 8); }).build());
    const Report fast = reportOf(healthyStep().build());
    const Diff better = computeDiff(slow, fast, 5.0);
    CHECK(better.stepChangePct() < -5);
    CHECK_FALSE(better.regression());
    CHECK(better.findings_resolved == std::vector<std::string>{"elementwise-storm"});
    REQUIRE(!better.kernel_classes.empty());
    CHECK(better.kernel_classes[0].name == "Elementwise mul");
    CHECK(better.kernel_classes[0].calls_before == 620);
    CHECK(better.kernel_classes[0].calls_after == 20);
    const Diff worse = computeDiff(fast, slow, 5.0);
    CHECK(worse.regression());
    CHECK(worse.findings_new == std::vector<std::string>{"elementwise-storm"});
    CHECK_FALSE(computeDiff(fast, slow, 1000.0).regression()); // within a generous limit
}
