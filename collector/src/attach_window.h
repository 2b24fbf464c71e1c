#pragma once
// Attach windows (dormant mode, docs/attach.md): the job runs with nothing recorded and CUPTI left
// alone until `sightline attach` opens a window through the control endpoint.
#include "cupti_session.h"

#include <string>

namespace sightline::collector {

// Starts the control endpoint; windows record the activity kinds of `options` (CUPTI only where
// `cuda`). False, with a one-line reason, when the endpoint cannot be set up.
bool startDormant(const CuptiOptions& options, bool cuda, std::string& why);

} // namespace sightline::collector
