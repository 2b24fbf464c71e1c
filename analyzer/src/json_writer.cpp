#include "json_writer.h"

#include "sightline/error.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>
#include <zlib.h>

namespace sightline::detail {

namespace {

// Length of the valid UTF-8 sequence at the start of `s` (2 to 4 bytes; its first byte is not
// ASCII), or 0 when it is not one: overlong forms, surrogates and code points past U+10FFFF are
// invalid, as JSON readers such as simdjson require.
size_t utf8Length(std::string_view s) {
    const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
    const auto cont = [&](size_t i) { return i < s.size() && (b(i) & 0xC0) == 0x80; };
    const unsigned char c = b(0);
    if (c >= 0xC2 && c <= 0xDF)
        return cont(1) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (!cont(1) || !cont(2)) return 0;
        if (c == 0xE0 && b(1) < 0xA0) return 0;  // overlong
        if (c == 0xED && b(1) >= 0xA0) return 0; // surrogate
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (!cont(1) || !cont(2) || !cont(3)) return 0;
        if (c == 0xF0 && b(1) < 0x90) return 0;  // overlong
        if (c == 0xF4 && b(1) >= 0x90) return 0; // past U+10FFFF
        return 4;
    }
    return 0;
}

// A recursive-descent check of one JSON value; depth-limited so hostile input cannot exhaust the stack.
class Validator {
public:
    explicit Validator(std::string_view s) : m_s(s) {}
    bool whole() {
        if (!value(0)) return false;
        ws();
        return m_i == m_s.size();
    }

private:
    void ws() {
        while (m_i < m_s.size() && (m_s[m_i] == ' ' || m_s[m_i] == '\n' || m_s[m_i] == '\r' || m_s[m_i] == '\t')) ++m_i;
    }
    bool eat(char c) {
        ws();
        if (m_i < m_s.size() && m_s[m_i] == c) {
            ++m_i;
            return true;
        }
        return false;
    }
    bool literal(std::string_view word) {
        if (m_s.substr(m_i, word.size()) != word) return false;
        m_i += word.size();
        return true;
    }
    bool digits() {
        const size_t from = m_i;
        while (m_i < m_s.size() && m_s[m_i] >= '0' && m_s[m_i] <= '9') ++m_i;
        return m_i > from;
    }
    bool number() {
        if (m_s[m_i] == '-') ++m_i;
        if (m_i < m_s.size() && m_s[m_i] == '0') ++m_i;
        else if (!digits()) return false;
        if (m_i < m_s.size() && m_s[m_i] == '.' && (++m_i, !digits())) return false;
        if (m_i < m_s.size() && (m_s[m_i] == 'e' || m_s[m_i] == 'E')) {
            ++m_i;
            if (m_i < m_s.size() && (m_s[m_i] == '+' || m_s[m_i] == '-')) ++m_i;
            if (!digits()) return false;
        }
        return true;
    }
    bool string() {
        ++m_i; // the opening quote
        while (m_i < m_s.size()) {
            const auto c = static_cast<unsigned char>(m_s[m_i]);
            if (c == '"') {
                ++m_i;
                return true;
            }
            if (c < 0x20) return false;
            if (c == '\\') {
                if (++m_i >= m_s.size()) return false;
                const char e = m_s[m_i];
                if (e == 'u') {
                    for (int k = 1; k <= 4; ++k)
                        if (m_i + k >= m_s.size() || !std::isxdigit(static_cast<unsigned char>(m_s[m_i + k]))) return false;
                    m_i += 4;
                } else if (!std::strchr("\"\\/bfnrt", e) || e == 0) {
                    return false;
                }
                ++m_i;
            } else if (c >= 0x80) {
                const size_t n = utf8Length(m_s.substr(m_i));
                if (!n) return false;
                m_i += n;
            } else {
                ++m_i;
            }
        }
        return false;
    }
    bool value(int depth) {
        ws();
        if (m_i >= m_s.size() || depth > 64) return false;
        const char c = m_s[m_i];
        if (c == '"') return string();
        if (c == '[' || c == '{') return container(depth, c == '{');
        if (c == 't') return literal("true");
        if (c == 'f') return literal("false");
        if (c == 'n') return literal("null");
        return number();
    }
    bool container(int depth, bool object) {
        ++m_i;
        const char close = object ? '}' : ']';
        if (eat(close)) return true;
        do {
            if (object) {
                ws();
                if (m_i >= m_s.size() || m_s[m_i] != '"' || !string() || !eat(':')) return false;
            }
            if (!value(depth + 1)) return false;
        } while (eat(','));
        return eat(close);
    }

    std::string_view m_s;
    size_t m_i = 0;
};

} // namespace

bool isJsonValue(std::string_view text) { return Validator(text).whole(); }

JsonWriter::JsonWriter(const std::filesystem::path& path) : m_path(path) {
    m_buf.reserve(kFlushAt + 4096);
    if (path == "-") {
        m_stdout = true;
        m_file = stdout;
        return;
    }
    m_gzip = path.extension() == ".gz";
    m_temp = path;
    m_temp += ".part";
    m_file = m_gzip ? static_cast<void*>(gzopen(m_temp.c_str(), "wb1")) : static_cast<void*>(std::fopen(m_temp.c_str(), "wb"));
    if (!m_file)
        throw InputError(fmt::format("{}: cannot write: {}", path.string(), std::strerror(errno ? errno : EIO)));
}

JsonWriter::~JsonWriter() {
    if (!m_file || m_stdout)
        return;
    if (m_gzip) gzclose(static_cast<gzFile>(m_file));
    else std::fclose(static_cast<FILE*>(m_file));
    std::error_code ec;
    std::filesystem::remove(m_temp, ec);
}

void JsonWriter::flush() {
    if (m_buf.empty() || m_failed)
        return;
    bool ok;
    if (m_gzip)
        ok = gzwrite(static_cast<gzFile>(m_file), m_buf.data(), static_cast<unsigned>(m_buf.size())) == int(m_buf.size());
    else
        ok = std::fwrite(m_buf.data(), 1, m_buf.size(), static_cast<FILE*>(m_file)) == m_buf.size();
    m_written += m_buf.size();
    m_buf.clear();
    if (!ok) {
        m_failed = true;
        throw InputError(fmt::format("{}: cannot write: {}", m_path.string(), std::strerror(errno ? errno : EIO)));
    }
}

void JsonWriter::finish() {
    flush();
    if (m_stdout) {
        if (std::fflush(stdout) != 0)
            throw InputError(fmt::format("cannot write to standard output: {}", std::strerror(errno)));
        return;
    }
    void* f = m_file;
    m_file = nullptr;
    const bool closed = m_gzip ? gzclose(static_cast<gzFile>(f)) == Z_OK : std::fclose(static_cast<FILE*>(f)) == 0;
    std::error_code ec;
    if (!closed) {
        std::filesystem::remove(m_temp, ec);
        throw InputError(fmt::format("{}: cannot write: {}", m_path.string(), std::strerror(errno ? errno : EIO)));
    }
    std::filesystem::rename(m_temp, m_path, ec);
    if (ec) {
        std::filesystem::remove(m_temp, ec);
        throw InputError(fmt::format("{}: cannot write: {}", m_path.string(), ec.message()));
    }
}

JsonWriter& JsonWriter::str(std::string_view text) {
    m_buf.push_back('"');
    size_t run = 0; // start of the stretch of plain characters not yet copied
    for (size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            ++i;
            continue;
        }
        if (c >= 0x80) {
            if (const size_t n = utf8Length(text.substr(i))) {
                i += n;
                continue;
            }
        }
        m_buf.append(text.substr(run, i - run));
        switch (c) {
        case '"': m_buf.append("\\\""); break;
        case '\\': m_buf.append("\\\\"); break;
        case '\n': m_buf.append("\\n"); break;
        case '\t': m_buf.append("\\t"); break;
        case '\r': m_buf.append("\\r"); break;
        default:
            if (c < 0x20) fmt::format_to(std::back_inserter(m_buf), "\\u{:04x}", unsigned(c));
            else m_buf.append("\xEF\xBF\xBD"); // a byte that starts no valid UTF-8 sequence
        }
        run = ++i;
    }
    m_buf.append(text.substr(run));
    m_buf.push_back('"');
    if (m_buf.size() >= kFlushAt) flush();
    return *this;
}

JsonWriter& JsonWriter::integer(int64_t v) {
    fmt::format_to(std::back_inserter(m_buf), "{}", v);
    return *this;
}

JsonWriter& JsonWriter::num(double v) {
    if (!std::isfinite(v))
        m_buf.append("null");
    else
        fmt::format_to(std::back_inserter(m_buf), "{}", v);
    return *this;
}

JsonWriter& JsonWriter::us(int64_t ns) {
    uint64_t a = static_cast<uint64_t>(ns);
    if (ns < 0) {
        m_buf.push_back('-');
        a = ~a + 1; // |ns|, also for INT64_MIN
    }
    fmt::format_to(std::back_inserter(m_buf), "{}.{:03}", a / 1000, unsigned(a % 1000));
    return *this;
}

} // namespace sightline::detail
