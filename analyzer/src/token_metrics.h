#pragma once
// The tokens-and-padding pass of computeMetrics (docs/metrics.md, "Token annotations").
#include "sightline/metrics.h"

#include <vector>

namespace sightline {

// A batch annotation and the step it counts for (-1: none).
struct BatchMark {
    BatchRecord record;
    int32_t step = -1;
    int64_t pid = 0; // the process that wrote it (adapter ids are per process)
};

// Gives each step its batches: the parts of an adapter batch (one id) are merged and counted in
// the step of their first part; when a trace holds hand-written annotations too, the adapter's
// are left out (the job counts its own batches); sums and flags per step.
void assignBatches(const std::vector<BatchMark>& marks, std::vector<StepMetrics>& steps);

// The figures behind tokens.*, padding.*, batch.*, stack.*: over the steady steps whose batches
// are all known, and the batching simulator's packed-rows prediction (padding_sim.h).
TokenSummary summarizeTokens(const Metrics& metrics);

} // namespace sightline
