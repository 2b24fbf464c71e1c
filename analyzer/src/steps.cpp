#include "sightline/steps.h"

#include "sightline/step_names.h"

#include <algorithm>
#include <climits>

namespace sightline {

const char* toString(StepSource source) {
    switch (source) {
    case StepSource::ProfilerStep: return "ProfilerStep#N";
    case StepSource::UserRange: return "user range";
    case StepSource::Optimizer: return "optimizer steps";
    case StepSource::OptimizerKernels: return "optimizer kernels on the GPU";
    case StepSource::WholeTrace: return "whole trace";
    }
    return "?";
}

namespace {

std::vector<Step> collect(const Trace& t, StepSource source, bool (*match)(std::string_view)) {
    std::vector<Step> out;
    for (const CpuEvent& e : t.cpu)
        if (e.kind == CpuKind::UserAnnotation && match(t.str(e.name)))
            out.push_back(Step{std::string(t.str(e.name)), e.start_ns, e.end_ns, source});
    std::sort(out.begin(), out.end(), [](const Step& a, const Step& b) { return a.start_ns < b.start_ns; });
    // Nested matches (a "step" range inside a "train_step") count once: keep the outermost.
    std::vector<Step> outer;
    for (const Step& s : out)
        if (outer.empty() || s.start_ns >= outer.back().end_ns)
            outer.push_back(s);
    return outer;
}

// Steps of a trace of GPU activity alone: each ends where a run of optimizer kernels ends (a run
// allows a few other activities between its kernels); the first begins with the first activity.
// Work after the last run belongs to an unfinished step and is left out. Without optimizer
// kernels the whole GPU span is one step.
std::vector<Step> gpuSteps(const Trace& t, const Taxonomy& taxonomy) {
    constexpr size_t kMaxOthersInRun = 16;
    std::vector<const GpuEvent*> acts;
    for (const GpuEvent& g : t.gpu)
        if (g.kind != GpuKind::Annotation) acts.push_back(&g);
    std::sort(acts.begin(), acts.end(), [](const GpuEvent* a, const GpuEvent* b) { return a->start_ns < b->start_ns; });
    std::vector<Step> steps;
    if (acts.empty()) return steps;
    std::vector<int8_t> known(t.strings.size(), -1); // is an optimizer kernel, per name
    auto isOptimizer = [&](const GpuEvent& g) {
        int8_t& k = known[g.name.value];
        if (k < 0) k = taxonomy.classify(t.str(g.name)).family == "optimizer";
        return k == 1;
    };
    std::vector<int64_t> run_ends;
    size_t others = kMaxOthersInRun + 1;
    for (const GpuEvent* g : acts) {
        if (!isOptimizer(*g)) {
            ++others;
            continue;
        }
        if (others > kMaxOthersInRun) run_ends.push_back(g->end_ns);
        run_ends.back() = std::max(run_ends.back(), g->end_ns);
        others = 0;
    }
    int64_t begin = acts.front()->start_ns;
    for (size_t i = 0; i < run_ends.size(); ++i) {
        steps.push_back(Step{"step " + std::to_string(i + 1), begin, run_ends[i], StepSource::OptimizerKernels, true});
        begin = run_ends[i];
    }
    if (steps.empty()) {
        int64_t end = begin;
        for (const GpuEvent* g : acts) end = std::max(end, g->end_ns);
        steps.push_back(Step{"whole trace", begin, end, StepSource::WholeTrace, true});
    }
    return steps;
}

bool hostRecorded(const Trace& t) {
    return std::any_of(t.cpu.begin(), t.cpu.end(), [](const CpuEvent& e) { return e.kind == CpuKind::Op || e.kind == CpuKind::UserAnnotation; });
}

} // namespace

std::vector<Step> detectSteps(const Trace& t, const Taxonomy* taxonomy) {
    if (!hostRecorded(t) && !t.gpu.empty())
        return gpuSteps(t, taxonomy ? *taxonomy : Taxonomy::builtin());
    auto steps = collect(t, StepSource::ProfilerStep, step_names::isProfilerStep);
    if (!steps.empty())
        return steps;
    steps = collect(t, StepSource::UserRange, step_names::isStepRange);
    if (!steps.empty())
        return steps;

    int64_t first = INT64_MAX, last = INT64_MIN;
    for (const CpuEvent& e : t.cpu) {
        first = std::min(first, e.start_ns);
        last = std::max(last, e.end_ns);
    }
    auto optimizer = collect(t, StepSource::Optimizer, step_names::isOptimizerStep);
    if (!optimizer.empty()) {
        // Each step runs from the end of the previous optimizer step (or the trace start) to the
        // end of its own.
        int64_t begin = first;
        for (size_t i = 0; i < optimizer.size(); ++i) {
            steps.push_back(Step{"step " + std::to_string(i + 1), begin, optimizer[i].end_ns, StepSource::Optimizer});
            begin = optimizer[i].end_ns;
        }
        return steps;
    }
    if (first < last)
        steps.push_back(Step{"whole trace", first, last, StepSource::WholeTrace});
    return steps;
}

std::vector<size_t> steadySteps(const std::vector<Step>& steps, const std::vector<double>& step_ms) {
    std::vector<size_t> keep;
    for (size_t i = 0; i < steps.size(); ++i)
        keep.push_back(i);
    if (steps.size() >= 3)
        keep.erase(keep.begin());
    // A step more than twice the median of the other steps is warm-up too (compilation,
    // allocator growth, a first data load).
    if (keep.size() >= 2) {
        std::vector<size_t> filtered;
        for (size_t i : keep) {
            std::vector<double> others;
            for (size_t j : keep)
                if (j != i) others.push_back(step_ms[j]);
            std::nth_element(others.begin(), others.begin() + long(others.size() / 2), others.end());
            if (step_ms[i] <= 2 * others[others.size() / 2])
                filtered.push_back(i);
        }
        if (!filtered.empty())
            keep = filtered;
    }
    return keep;
}

} // namespace sightline
