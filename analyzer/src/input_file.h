#pragma once
// Loading a whole input file into memory, gunzipping it when it is gzip, into a buffer with the
// padding simdjson needs after the text.
#include <filesystem>
#include <string>

#include <simdjson.h>

namespace sightline::detail {

// The text of a trace: `size()` bytes at `data()`, followed by at least
// simdjson::SIMDJSON_PADDING readable bytes. A plain file is mapped copy-on-write (its pages come
// straight from the page cache, nothing is copied or zeroed); a gzip file is inflated into memory.
class TraceText {
public:
    TraceText() = default;
    ~TraceText();
    TraceText(TraceText&& other) noexcept;
    TraceText& operator=(TraceText&& other) noexcept;

    static TraceText owned(simdjson::padded_string buffer, size_t size);
    static TraceText mapped(void* map, size_t map_length, size_t size);

    char* data() { return m_map ? static_cast<char*>(m_map) : m_buffer.data(); }
    size_t size() const { return m_size; }
    size_t capacity() const { return m_map ? m_map_length : m_buffer.size() + simdjson::SIMDJSON_PADDING; }
    std::string_view view() { return {data(), m_size}; }
    // Grows the owned buffer to hold at least `capacity` bytes, keeping the first size() bytes.
    void reserveOwned(size_t capacity);
    void setSize(size_t size) { m_size = size; }

private:
    simdjson::padded_string m_buffer;
    void* m_map = nullptr;
    size_t m_map_length = 0;
    size_t m_size = 0;
};

// Throws InputError for a missing/unreadable file or a corrupt or truncated gzip stream.
TraceText readTraceText(const std::filesystem::path& path);

bool isGzip(const std::filesystem::path& path);

} // namespace sightline::detail
