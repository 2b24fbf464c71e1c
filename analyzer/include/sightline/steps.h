#pragma once
// Training steps found in a trace (docs/metrics.md, "Steps").
#include "sightline/taxonomy.h"
#include "sightline/trace.h"

#include <string>
#include <vector>

namespace sightline {

enum class StepSource { ProfilerStep,
                        UserRange,
                        Optimizer,
                        OptimizerKernels,
                        WholeTrace };
const char* toString(StepSource source);

struct Step {
    std::string name;
    int64_t start_ns = 0; // CPU-side start of the step
    int64_t end_ns = 0;   // CPU-side end
    StepSource source = StepSource::WholeTrace;
    // Found on the GPU's timeline (a trace of GPU activity alone): start and end are GPU times.
    bool gpu_clock = false;
};

// In order of preference: ProfilerStep#N annotations; user ranges named "step", "train_step",
// "training_step" or starting with "sightline.step"; the intervals that end at each
// Optimizer.step#... annotation; else the whole trace as one step. A trace without CPU ops or
// annotations (GPU activity alone) has its steps found on the GPU's timeline: each ends with a run
// of optimizer kernels (the taxonomy's "optimizer" family; `taxonomy` defaults to the built-in one),
// else the whole GPU span is one step.
std::vector<Step> detectSteps(const Trace& trace, const Taxonomy* taxonomy = nullptr);

// Indices of the steps that count for the steady state: all but warm-up steps. With three or
// more steps the first is warm-up; so is any step more than twice the median of the others.
std::vector<size_t> steadySteps(const std::vector<Step>& steps, const std::vector<double>& step_ms);

} // namespace sightline
