#pragma once
// The names that mark training steps (docs/metrics.md), shared by the analyzer, which finds steps
// in a trace, and the collector, which counts them live for step windows.
#include <string_view>

namespace sightline::step_names {

// ProfilerStep#N, as torch.profiler's schedule names its steps.
inline bool isProfilerStep(std::string_view n) { return n.starts_with("ProfilerStep#"); }
// A user range around one step.
inline bool isStepRange(std::string_view n) {
    return n == "step" || n == "train_step" || n == "training_step" || n.starts_with("sightline.step");
}
// Optimizer.step#..., the fallback: one step ends at each.
inline bool isOptimizerStep(std::string_view n) { return n.starts_with("Optimizer.step#"); }

} // namespace sightline::step_names
