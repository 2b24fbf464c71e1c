#pragma once
// Loading a whole input file into memory, gunzipping it when it is gzip, into a buffer with the
// padding simdjson needs after the text.
#include <filesystem>
#include <string>

#include <simdjson.h>

namespace sightline::detail {

// The text of a trace: the first `size` bytes of `buffer`, followed by at least
// simdjson::SIMDJSON_PADDING readable bytes.
struct TraceText {
    simdjson::padded_string buffer;
    size_t size = 0;
    std::string_view view() const { return {buffer.data(), size}; }
    size_t capacity() const { return buffer.size() + simdjson::SIMDJSON_PADDING; }
};

// Throws InputError for a missing/unreadable file or a corrupt or truncated gzip stream.
TraceText readTraceText(const std::filesystem::path& path);

bool isGzip(const std::filesystem::path& path);

} // namespace sightline::detail
