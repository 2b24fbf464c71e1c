#pragma once
// Step windows: SIGHTLINE_STEPS=A:B records steps A to B (counting from 1), and sightline attach
// --steps N records the next N whole steps. Steps are counted by the same convention the analyzer
// uses: ProfilerStep#N or ranges named step / train_step / training_step / sightline.step*; if a
// job has none of those, by Optimizer.step#... ranges. Counting as the job runs, the collector
// cannot know that step ranges will come: it counts optimizer steps until the first step range
// begins, and from then on step ranges alone (a job whose warm-up carries only optimizer ranges).
#include <cstddef>
#include <cstdint>

namespace sightline::collector {

// Records steps first to last (counted from 1) from now on.
void startStepWindow(uint64_t first, uint64_t last);
// An attach window of `steps` whole steps: the step in progress is counted (step 1), not recorded.
void startAttachStepWindow(uint64_t steps);
// Ends any step window (an attach window closing); its extent, 0 where recording never turned on or off.
struct StepWindowExtent {
    uint64_t began_ns = 0, ended_ns = 0;
};
StepWindowExtent endStepWindow();
bool stepWindowFinished();

// The bridge's user-range callbacks (SightlineCollectorApi::user_range_begin / _end).
void onUserRangeBegin(const char* name, size_t n) noexcept;
void onUserRangeEnd(const char* name, size_t n) noexcept;

} // namespace sightline::collector
