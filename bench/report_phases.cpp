// What the advisor's phases cost on a large trace, the what-if replay beside the formula pricing it
// replaced (docs/benchmarks.md, "The what-if replay").
//
// usage: sightline_report_phases TRACE [REPEAT]
// Prints each phase's wall time (best of REPEAT, default 3): import, op tree, metrics, building the
// replay's graph, the rules priced by the replay, and the same rules priced by their formulas, and
// the ratio of the advisor with the replay to the whole report without it.
#include "sightline/import.h"
#include "sightline/metrics.h"
#include "sightline/op_tree.h"
#include "sightline/replay.h"
#include "sightline/rules.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>

using namespace sightline;
using Clock = std::chrono::steady_clock;

namespace {

double bestMs(int repeat, const std::function<void()>& f) {
    double best = 1e300;
    for (int i = 0; i < repeat; ++i) {
        const auto t0 = Clock::now();
        f();
        best = std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    return best;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s TRACE [REPEAT]\n", argv[0]);
        return 2;
    }
    const int repeat = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
    Trace trace;
    const double import_ms = bestMs(1, [&] { trace = importTrace(argv[1]); });
    OpTree tree;
    const double tree_ms = bestMs(1, [&] { tree = buildOpTree(trace); });
    Metrics metrics;
    const double metrics_ms = bestMs(repeat, [&] { metrics = computeMetrics(trace, tree, Taxonomy::builtin()); });
    const RuleSet rules = RuleSet::builtin();
    std::unique_ptr<ReplayModel> model;
    const double graph_ms = bestMs(repeat, [&] { model = std::make_unique<ReplayModel>(trace, tree, Taxonomy::builtin(), metrics); });
    size_t fired = 0;
    const double replayed_ms = bestMs(repeat, [&] { fired = rules.evaluate(metrics, model.get()).size(); });
    const double formula_ms = bestMs(repeat, [&] { rules.evaluate(metrics); });
    std::printf("trace: %zu events, %zu steps, %zu findings\n", trace.eventCount(), metrics.steps.size(), fired);
    std::printf("  import              %9.1f ms\n  op tree             %9.1f ms\n  metrics             %9.1f ms\n", import_ms, tree_ms,
                metrics_ms);
    std::printf("  replay graph        %9.1f ms\n  rules, replayed     %9.1f ms\n  rules, by formula   %9.1f ms\n", graph_ms,
                replayed_ms, formula_ms);
    const double without = import_ms + tree_ms + metrics_ms + formula_ms;
    std::printf("report phases with the replay / without: %.3f\n", (without - formula_ms + graph_ms + replayed_ms) / without);
    return 0;
}
