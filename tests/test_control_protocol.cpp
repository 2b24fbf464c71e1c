// The attach control protocol: every valid frame parses; every malformed one (random bytes,
// truncations, wrong version, oversized, unknown type, wrong payload size, a window that is both
// or neither timed and counted) is refused or waits for more, never crashes.
#include "sightline/control_protocol.h"

#include <random>

#include <catch2/catch.hpp>

using namespace sightline::control;

namespace {
ParseResult parseAll(const std::vector<uint8_t>& bytes, Message& m, std::string& error) {
    size_t used = 0;
    return parse(bytes.data(), bytes.size(), m, used, error);
}
} // namespace

TEST_CASE("valid frames parse, and every prefix of one asks for more", "[control]") {
    WindowRequest w{10'000, 0, 1};
    const auto frame = encode(Type::OpenWindow, &w, sizeof w);
    Message m;
    std::string error;
    REQUIRE(parseAll(frame, m, error) == ParseResult::Ok);
    CHECK(m.type == Type::OpenWindow);
    REQUIRE(m.payload.size() == sizeof w);
    for (size_t cut = 0; cut < frame.size(); ++cut) {
        const std::vector<uint8_t> prefix(frame.begin(), frame.begin() + long(cut));
        CHECK(parseAll(prefix, m, error) == ParseResult::NeedMore);
    }
    CHECK(parseAll(encode(Type::Status), m, error) == ParseResult::Ok);
    const std::string text = "refused";
    CHECK(parseAll(encode(Type::Error, text.data(), uint32_t(text.size())), m, error) == ParseResult::Ok);
}

TEST_CASE("malformed frames are refused with a reason", "[control]") {
    Message m;
    std::string error;
    auto header = [](uint32_t magic, uint16_t version, uint16_t type, uint32_t length) {
        std::vector<uint8_t> b(sizeof(FrameHeader) + std::min<uint32_t>(length, 64));
        const FrameHeader h{magic, version, type, length};
        std::memcpy(b.data(), &h, sizeof h);
        return b;
    };
    CHECK(parseAll(header(0x12345678, kVersion, 1, 0), m, error) == ParseResult::Invalid);
    CHECK(error == "bad magic");
    CHECK(parseAll(header(kMagic, 2, 1, 0), m, error) == ParseResult::Invalid);
    CHECK_THAT(error, Catch::Contains("protocol version 2"));
    CHECK(parseAll(header(kMagic, kVersion, 77, 0), m, error) == ParseResult::Invalid);
    CHECK_THAT(error, Catch::Contains("unknown message type"));
    CHECK(parseAll(header(kMagic, kVersion, uint16_t(Type::Error), kMaxPayload + 1), m, error) == ParseResult::Invalid);
    CHECK_THAT(error, Catch::Contains("oversized"));
    CHECK(parseAll(header(kMagic, kVersion, uint16_t(Type::OpenWindow), 4), m, error) == ParseResult::Invalid);
    CHECK_THAT(error, Catch::Contains("wrong payload size"));
    for (WindowRequest w : {WindowRequest{0, 0, 0}, WindowRequest{100, 5, 0}, WindowRequest{100, 0, 7},
                            WindowRequest{uint64_t(1) << 60, 0, 0}}) {
        CHECK(parseAll(encode(Type::OpenWindow, &w, sizeof w), m, error) == ParseResult::Invalid);
    }
    const std::vector<uint8_t> garbage = {'h', 'e', 'l', 'l', 'o'};
    CHECK(parseAll(garbage, m, error) == ParseResult::Invalid);
}

TEST_CASE("random bytes never crash the parser", "[control]") {
    std::mt19937 rng(1234);
    Message m;
    std::string error;
    size_t ok = 0;
    for (int i = 0; i < 200'000; ++i) {
        std::vector<uint8_t> b(size_t(rng() % 40));
        for (auto& x : b) x = uint8_t(rng());
        if (i % 3 == 0 && b.size() >= 4) std::memcpy(b.data(), &kMagic, 4); // often past the magic check
        if (i % 9 == 0 && b.size() >= 6) b[4] = uint8_t(kVersion), b[5] = 0;
        size_t used = 0;
        const ParseResult r = parse(b.data(), b.size(), m, used, error);
        if (r == ParseResult::Ok) {
            ++ok;
            CHECK(used <= b.size());
        }
    }
    CHECK(ok < 200'000);
}

TEST_CASE("the socket directory is per user", "[control]") {
    CHECK(socketDirectory(1000, "/run/user/1000") == "/run/user/1000/sightline");
    CHECK(socketDirectory(1000, nullptr) == "/tmp/sightline-1000");
    CHECK(socketDirectory(1000, "") == "/tmp/sightline-1000");
}

TEST_CASE("a window request asks for hardware counters in 8 more bytes, and the short form reads without", "[control]") {
    Message m;
    std::string error;
    WindowRequest w{1000, 0, 0, 250, 0};
    REQUIRE(parseAll(encode(Type::OpenWindow, &w, sizeof w), m, error) == ParseResult::Ok);
    WindowRequest got{};
    std::memcpy(&got, m.payload.data(), sizeof got);
    CHECK(got.hw_interval_us == 250);
    // What a client sends without --hw, and every client before hardware sampling sent.
    REQUIRE(parseAll(encode(Type::OpenWindow, &w, kWindowRequestV1Size), m, error) == ParseResult::Ok);
    REQUIRE(m.payload.size() == sizeof(WindowRequest));
    std::memcpy(&got, m.payload.data(), sizeof got);
    CHECK(got.duration_ms == 1000);
    CHECK(got.hw_interval_us == 0);
    w.hw_interval_us = 2'000'000; // past a second
    CHECK(parseAll(encode(Type::OpenWindow, &w, sizeof w), m, error) == ParseResult::Invalid);
    CHECK(parseAll(encode(Type::OpenWindow, &w, 20), m, error) == ParseResult::Invalid); // neither size
}
