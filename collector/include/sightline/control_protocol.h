#pragma once
// The control protocol between `sightline attach` / `sightline ps` and a dormant collector
// (docs/attach.md): length-framed binary messages over a Unix-domain socket. Header-only and
// dependency-free, shared by both sides. Every frame is checked: magic, version, type, length
// (at most kMaxPayload) and the payload's exact size for its type; anything else is refused.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace sightline::control {

inline constexpr uint32_t kMagic = 0x54434c53; // "SLCT"
inline constexpr uint16_t kVersion = 1;
inline constexpr uint32_t kMaxPayload = 4096;

enum class Type : uint16_t {
    Status = 1,     // request: no payload
    OpenWindow = 2, // request: WindowRequest
    StatusReply = 101,
    WindowReply = 102, // sent when the window has closed
    Busy = 103,        // a window is already open for another client
    Error = 104,       // payload: message text
};

struct FrameHeader {
    uint32_t magic;
    uint16_t version;
    uint16_t type;
    uint32_t length; // payload bytes after the header
};
static_assert(sizeof(FrameHeader) == 12);

struct WindowRequest {
    uint64_t duration_ms; // 0 when counting steps
    uint32_t steps;       // 0 when timed
    uint32_t shapes;      // 1: record input shapes
    // Since hardware sampling: the request may be 8 bytes longer. A client sends the first
    // kWindowRequestV1Size bytes alone unless it asks for hardware counters, so that collectors
    // from before still accept it; a collector reads a short request with these fields 0.
    uint32_t hw_interval_us; // 0: no hardware counters; else sample them at this interval
    uint32_t pad;
};
static_assert(sizeof(WindowRequest) == 24);
inline constexpr uint32_t kWindowRequestV1Size = 16;

struct StatusReplyBody {
    int64_t pid;
    int64_t start_realtime_ns;
    uint32_t window_open; // 1 while a window is recording
    uint32_t windows_done;
    uint32_t cuda_available;
    uint32_t pad;
};
static_assert(sizeof(StatusReplyBody) == 32);

struct WindowReplyBody {
    int64_t begin_ns, end_ns;  // CLOCK_REALTIME, the window's extent
    uint64_t ops, gpu_records; // op records (user ranges included), CUPTI activities
    char capture[256];         // the capture file the window was written to
};
static_assert(sizeof(WindowReplyBody) == 288);

struct Message {
    Type type;
    std::vector<uint8_t> payload;
};

// Serialises a message into one frame.
inline std::vector<uint8_t> encode(Type type, const void* payload = nullptr, uint32_t length = 0) {
    std::vector<uint8_t> out(sizeof(FrameHeader) + length);
    const FrameHeader h{kMagic, kVersion, uint16_t(type), length};
    std::memcpy(out.data(), &h, sizeof h);
    if (length) std::memcpy(out.data() + sizeof h, payload, length);
    return out;
}

// The payload size each type must have (or the most it may have, for Error).
inline std::optional<size_t> payloadSize(Type t) {
    switch (t) {
    case Type::Status:
    case Type::Busy: return 0;
    case Type::OpenWindow: return sizeof(WindowRequest); // or kWindowRequestV1Size (parse())
    case Type::StatusReply: return sizeof(StatusReplyBody);
    case Type::WindowReply: return sizeof(WindowReplyBody);
    case Type::Error: return std::nullopt; // any length up to kMaxPayload
    }
    return std::nullopt;
}

enum class ParseResult { Ok,
                         NeedMore,
                         Invalid };

// Parses one frame from the start of `data`. Invalid (with `error` set) for a bad magic, another
// version, an unknown type, an oversized length or a payload of the wrong size; NeedMore when
// the bytes so far are a valid prefix.
inline ParseResult parse(const uint8_t* data, size_t size, Message& out, size_t& consumed, std::string& error) {
    if (size < sizeof(FrameHeader)) {
        // A prefix can only be valid if its magic bytes so far match.
        const auto* magic = reinterpret_cast<const uint8_t*>(&kMagic);
        for (size_t i = 0; i < size && i < 4; ++i)
            if (data[i] != magic[i]) {
                error = "bad magic";
                return ParseResult::Invalid;
            }
        return ParseResult::NeedMore;
    }
    FrameHeader h;
    std::memcpy(&h, data, sizeof h);
    if (h.magic != kMagic) {
        error = "bad magic";
        return ParseResult::Invalid;
    }
    if (h.version != kVersion) {
        error = "protocol version " + std::to_string(h.version) + " (this side speaks 1)";
        return ParseResult::Invalid;
    }
    const Type t = Type(h.type);
    const bool known = t == Type::Status || t == Type::OpenWindow || t == Type::StatusReply || t == Type::WindowReply ||
        t == Type::Busy || t == Type::Error;
    if (!known) {
        error = "unknown message type " + std::to_string(h.type);
        return ParseResult::Invalid;
    }
    if (h.length > kMaxPayload) {
        error = "oversized message (" + std::to_string(h.length) + " bytes)";
        return ParseResult::Invalid;
    }
    const auto expect = payloadSize(t);
    const bool short_request = t == Type::OpenWindow && h.length == kWindowRequestV1Size;
    if (expect && h.length != *expect && !short_request) {
        error = "wrong payload size for its type";
        return ParseResult::Invalid;
    }
    if (size < sizeof h + h.length) return ParseResult::NeedMore;
    out.type = t;
    out.payload.assign(data + sizeof h, data + sizeof h + h.length);
    consumed = sizeof h + h.length;
    if (t == Type::OpenWindow) {
        WindowRequest w{};
        std::memcpy(&w, out.payload.data(), out.payload.size());
        out.payload.resize(sizeof w, 0); // a short request reads with the later fields 0
        if ((w.duration_ms == 0) == (w.steps == 0) || w.duration_ms > 24ull * 3600 * 1000 || w.steps > 1000000 || w.shapes > 1 ||
            w.hw_interval_us > 1000000) {
            error = "a window is either a duration or a number of steps, within bounds";
            return ParseResult::Invalid;
        }
    }
    return ParseResult::Ok;
}

// The per-user directory of control sockets: $XDG_RUNTIME_DIR/sightline, else /tmp/sightline-UID.
inline std::string socketDirectory(unsigned uid, const char* xdg_runtime_dir) {
    if (xdg_runtime_dir && *xdg_runtime_dir) return std::string(xdg_runtime_dir) + "/sightline";
    return "/tmp/sightline-" + std::to_string(uid);
}

// The control socket of one job, in that directory: PID.sock.
inline std::string socketPath(const std::string& directory, long pid) { return directory + "/" + std::to_string(pid) + ".sock"; }

} // namespace sightline::control
