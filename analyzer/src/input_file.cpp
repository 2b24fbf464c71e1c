#include "input_file.h"

#include "sightline/error.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>
#include <zlib.h>

namespace sightline::detail {
namespace {

struct FileCloser {
    void operator()(FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

File openOrThrow(const std::filesystem::path& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw InputError(fmt::format("{}: is a directory, not a trace file", path.string()));
    File f(std::fopen(path.c_str(), "rb"));
    if (!f)
        throw InputError(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
    return f;
}

size_t fileSize(FILE* f) {
    std::fseek(f, 0, SEEK_END);
    long size = std::ftell(f);
    std::fseek(f, 0, SEEK_SET);
    return size < 0 ? 0 : static_cast<size_t>(size);
}

// Maps the file privately and, behind it, enough anonymous pages for simdjson's padding (a
// mapping past the end of a file would fault). Falls back to reading when mapping fails.
TraceText readPlain(FILE* f, const std::filesystem::path& path) {
    const size_t size = fileSize(f);
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t length = (size + simdjson::SIMDJSON_PADDING + page - 1) / page * page;
    if (size > 0) {
        void* region = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (region != MAP_FAILED) {
            void* file = mmap(region, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fileno(f), 0);
            if (file == region) {
                madvise(region, size, MADV_SEQUENTIAL);
                return TraceText::mapped(region, length, size);
            }
            munmap(region, length);
        }
    }
    simdjson::padded_string buffer(size);
    if (size && !buffer.data())
        throw InputError(fmt::format("{}: not enough memory to load {} bytes", path.string(), size));
    if (size && std::fread(buffer.data(), 1, size, f) != size)
        throw InputError(fmt::format("{}: read error: {}", path.string(), std::strerror(errno)));
    return TraceText::owned(std::move(buffer), size);
}

// Gunzips straight into a padded buffer. The gzip trailer's ISIZE (size mod 2^32) gives the size
// in the usual case, so the text is allocated once; a wrong guess grows the buffer by half.
TraceText readGzip(FILE* f, const std::filesystem::path& path) {
    const size_t compressed = fileSize(f);
    std::string in(compressed, '\0');
    if (compressed && std::fread(in.data(), 1, compressed, f) != compressed)
        throw InputError(fmt::format("{}: read error: {}", path.string(), std::strerror(errno)));
    size_t capacity = compressed * 8 + 4096;
    if (compressed >= 18) {
        uint32_t isize = 0;
        std::memcpy(&isize, in.data() + compressed - 4, 4);
        if (isize >= compressed / 2) // plausible; it wraps above 4 GiB
            capacity = size_t(isize) + 1;
    }
    TraceText text = TraceText::owned(simdjson::padded_string(capacity), 0);
    if (!text.data())
        throw InputError(fmt::format("{}: not enough memory to inflate {} bytes", path.string(), capacity));

    z_stream zs{};
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
        throw InputError("zlib: cannot initialise the decompressor");
    size_t used = 0; // input bytes handed to zlib
    auto feed = [&] {
        const size_t n = std::min<size_t>(in.size() - used, UINT32_MAX);
        zs.next_in = reinterpret_cast<Bytef*>(in.data() + used);
        zs.avail_in = static_cast<uInt>(n);
        used += n;
    };
    feed();
    for (;;) {
        if (capacity - text.size() < (1u << 16)) {
            capacity += capacity / 2 + (1u << 20);
            text.reserveOwned(capacity);
            if (!text.data())
                throw InputError(fmt::format("{}: not enough memory to inflate {} bytes", path.string(), capacity));
        }
        const size_t room = std::min<size_t>(capacity - text.size(), UINT32_MAX);
        zs.next_out = reinterpret_cast<Bytef*>(text.data() + text.size());
        zs.avail_out = static_cast<uInt>(room);
        const int rc = inflate(&zs, Z_NO_FLUSH);
        text.setSize(text.size() + room - zs.avail_out);
        if (zs.avail_in == 0 && used < in.size())
            feed();
        if (rc == Z_STREAM_END) {
            // A file may hold several gzip members one after another.
            const size_t rest = zs.avail_in;
            if (rest == 0 && used >= in.size())
                break;
            Bytef* next = zs.next_in;
            inflateReset(&zs);
            zs.next_in = next;
            zs.avail_in = static_cast<uInt>(rest);
            continue;
        }
        if (rc == Z_BUF_ERROR && zs.avail_in == 0) {
            inflateEnd(&zs);
            throw InputError(fmt::format("{}: truncated gzip file (the stream stops after {} "
                                         "uncompressed bytes): the trace was cut short",
                                         path.string(), text.size()));
        }
        if (rc != Z_OK && rc != Z_BUF_ERROR) {
            std::string why = zs.msg ? zs.msg : "corrupt data";
            inflateEnd(&zs);
            throw InputError(fmt::format("{}: corrupt gzip file: {}", path.string(), why));
        }
    }
    inflateEnd(&zs);
    return text;
}

} // namespace

TraceText::~TraceText() {
    if (m_map)
        munmap(m_map, m_map_length);
}

TraceText::TraceText(TraceText&& other) noexcept
    : m_buffer(std::move(other.m_buffer)), m_map(other.m_map), m_map_length(other.m_map_length), m_size(other.m_size) {
    other.m_map = nullptr;
    other.m_size = 0;
}

TraceText& TraceText::operator=(TraceText&& other) noexcept {
    if (this != &other) {
        if (m_map)
            munmap(m_map, m_map_length);
        m_buffer = std::move(other.m_buffer);
        m_map = other.m_map;
        m_map_length = other.m_map_length;
        m_size = other.m_size;
        other.m_map = nullptr;
        other.m_size = 0;
    }
    return *this;
}

TraceText TraceText::owned(simdjson::padded_string buffer, size_t size) {
    TraceText t;
    t.m_buffer = std::move(buffer);
    t.m_size = size;
    return t;
}

TraceText TraceText::mapped(void* map, size_t map_length, size_t size) {
    TraceText t;
    t.m_map = map;
    t.m_map_length = map_length;
    t.m_size = size;
    return t;
}

void TraceText::reserveOwned(size_t capacity) {
    simdjson::padded_string bigger(capacity);
    if (bigger.data() && m_size)
        std::memcpy(bigger.data(), m_buffer.data(), m_size);
    m_buffer = std::move(bigger);
}

bool isGzip(const std::filesystem::path& path) {
    File f = openOrThrow(path);
    unsigned char magic[2] = {0, 0};
    return std::fread(magic, 1, 2, f.get()) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

TraceText readTraceText(const std::filesystem::path& path) {
    const bool gz = isGzip(path);
    File f = openOrThrow(path);
    return gz ? readGzip(f.get(), path) : readPlain(f.get(), path);
}

} // namespace sightline::detail
