#include "sightline/import.h"

#include "input_file.h"
#include "sightline/capture_format.h"
#include "sightline/error.h"
#include "sightline/trace_db.h"

#include <cstdio>
#include <cstring>

#include <fmt/format.h>

namespace sightline {

const char* toString(InputFormat format) {
    switch (format) {
    case InputFormat::KinetoJson: return "PyTorch profiler JSON";
    case InputFormat::KinetoJsonGz: return "PyTorch profiler JSON (gzip)";
    case InputFormat::TraceDb: return "Sightline trace database";
    case InputFormat::Capture: return "Sightline capture";
    case InputFormat::Unknown: return "unknown";
    }
    return "unknown";
}

InputFormat detectFormat(const std::filesystem::path& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec))
        throw InputError(fmt::format("{}: no such file", path.string()));
    if (std::filesystem::is_directory(path, ec))
        throw InputError(fmt::format("{}: is a directory, not a trace file", path.string()));
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f)
        throw InputError(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
    unsigned char head[16] = {};
    const size_t got = std::fread(head, 1, sizeof head, f);
    std::fclose(f);
    if (got >= 2 && head[0] == 0x1f && head[1] == 0x8b)
        return InputFormat::KinetoJsonGz;
    if (got == 16 && std::memcmp(head, "SQLite format 3", 16) == 0)
        return InputFormat::TraceDb;
    if (got >= 7 && std::memcmp(head, capture::kFileMagic, 7) == 0) // any format version
        return InputFormat::Capture;
    for (size_t i = 0; i < got; ++i) {
        const unsigned char c = head[i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
            continue;
        if (c == 0xEF && i + 2 < got && head[i + 1] == 0xBB && head[i + 2] == 0xBF) { // UTF-8 BOM
            i += 2;
            continue;
        }
        return (c == '{' || c == '[') ? InputFormat::KinetoJson : InputFormat::Unknown;
    }
    return got == 0 ? InputFormat::KinetoJson : InputFormat::Unknown; // empty: the JSON reader says so
}

Trace importTrace(const std::filesystem::path& path, const ProgressFn& progress) {
    const InputFormat format = detectFormat(path);
    switch (format) {
    case InputFormat::TraceDb:
        return readTraceDb(path);
    case InputFormat::Capture:
        return importCapture(path);
    case InputFormat::KinetoJson:
    case InputFormat::KinetoJsonGz: {
        detail::TraceText text = detail::readTraceText(path);
        if (text.size() == 0)
            throw InputError(fmt::format("{}: the file is empty", path.string()));
        return importKinetoJson(text.data(), text.size(), text.capacity(), path.string(), progress);
    }
    case InputFormat::Unknown:
        break;
    }
    throw InputError(fmt::format("{}: not a trace Sightline can read (expected PyTorch profiler JSON, "
                                 ".json.gz, a Sightline capture or trace database)",
                                 path.string()));
}

} // namespace sightline
