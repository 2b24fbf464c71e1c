#pragma once
// The words that name the GPU activity kinds, in `sightline run --activities` and in the
// collector's SIGHTLINE_ACTIVITIES: one list for the command line's check and the collector's
// reading (collector_main.cpp maps them, in this order, to CuptiOptions).
#include <iterator>
#include <string_view>

namespace sightline::capture {

inline constexpr std::string_view kActivityWords[] = {"kernel", "memcpy", "memset", "runtime",
                                                      "driver", "sync", "nvtx", "overhead"};
inline constexpr size_t kActivityWordCount = std::size(kActivityWords);

} // namespace sightline::capture
