#pragma once
// CUPTI activity records -> capture records. Kept apart from the CUPTI calls so that tests can
// feed it synthetic records built from the CUPTI headers, without a GPU.
#include "sightline/capture_format.h"

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include <cupti_activity.h>

namespace sightline::collector {

struct DecodeContext {
    std::function<uint32_t(std::string_view)> intern;
    // Name of a runtime (domain 0) or driver (domain 1) API by callback id; may return "".
    std::function<std::string_view(uint32_t domain, uint32_t cbid)> api_name;
    // Added to every correlation id (0, "none", stays 0). CUPTI numbers launches afresh after it
    // is finalised and subscribed again; the collector shifts each later session past the ids of
    // the ones before, so that ids stay unique within a capture.
    uint32_t correlation_base = 0;
};

struct DecodeStats {
    uint64_t records = 0;
    uint64_t unknown = 0;         // kinds the collector does not translate
    uint64_t incomplete = 0;      // GPU activities without times (flushed before they finished), not written
    uint32_t max_correlation = 0; // the largest correlation id written (after the base)
};

// Appends the capture record(s) for one CUPTI activity record to `out`.
void decodeActivity(const CUpti_Activity* record, const DecodeContext& ctx, std::vector<char>& out, DecodeStats& stats);

} // namespace sightline::collector
