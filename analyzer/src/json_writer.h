#pragma once
// Streaming JSON text out: a buffer flushed to a file (plain, gzip, or stdout) whenever it holds
// about a megabyte, so that a large document is never held in memory.
#include <concepts>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace sightline::detail {

class JsonWriter {
public:
    // Opens `path` for writing ("-": stdout; a name ending in ".gz": gzip). The text goes to a
    // temporary file beside `path` that finish() renames into place, so that a failed export
    // leaves no half-written file. Throws InputError when the file cannot be created.
    explicit JsonWriter(const std::filesystem::path& path);
    ~JsonWriter();
    JsonWriter(const JsonWriter&) = delete;
    JsonWriter& operator=(const JsonWriter&) = delete;

    // Plain text, copied as it is.
    JsonWriter& raw(std::string_view text) {
        m_buf.append(text);
        if (m_buf.size() >= kFlushAt) flush();
        return *this;
    }
    JsonWriter& raw(char c) {
        m_buf.push_back(c);
        return *this;
    }
    // A JSON string with its quotes: escapes, and invalid UTF-8 replaced by U+FFFD.
    JsonWriter& str(std::string_view text);
    template <std::integral T>
    JsonWriter& num(T v) { return integer(static_cast<int64_t>(v)); }
    JsonWriter& integer(int64_t v);
    JsonWriter& num(double v); // shortest exact text; null for NaN and infinities
    // Nanoseconds as microseconds with three decimals ("1234.567"), exact for any int64.
    JsonWriter& us(int64_t ns);

    uint64_t bytesWritten() const { return m_written + m_buf.size(); }
    // Writes what is left, closes and renames the file into place. Throws InputError on failure.
    void finish();

private:
    static constexpr size_t kFlushAt = size_t(1) << 20;
    void flush();

    std::filesystem::path m_path, m_temp;
    std::string m_buf;
    void* m_file = nullptr; // FILE* or gzFile
    bool m_gzip = false, m_stdout = false, m_failed = false;
    uint64_t m_written = 0;
};

// Whether `text` is one well-formed JSON value (with nothing after it but whitespace).
bool isJsonValue(std::string_view text);

} // namespace sightline::detail
