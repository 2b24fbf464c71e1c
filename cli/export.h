#pragma once
// sightline export: a trace as Chrome trace-event JSON (Perfetto, chrome://tracing), with its
// steps and the advisor's findings marked on the timeline.
#include "sightline/rules.h"
#include "sightline/trace.h"

#include <string>

namespace sightline {

// Writes `trace` (read from `trace_path`) to `output`; returns the exit status.
int exportTrace(const Trace& trace, const std::string& trace_path, const std::string& output, const RuleSet& rules);

} // namespace sightline
