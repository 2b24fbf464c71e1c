#pragma once
// Errors the analyzer reports to its callers. Each carries one actionable line for the user.
#include <stdexcept>
#include <string>

namespace sightline {

// Bad or unreadable input: a missing file, a truncated archive, JSON that is not a trace, a
// database newer than this reader. The CLI prints what() on one line and exits non-zero.
class InputError : public std::runtime_error {
public:
    explicit InputError(const std::string& message) : std::runtime_error(message) {}
};

// The user interrupted a long operation (for example from a progress callback).
class Cancelled : public std::runtime_error {
public:
    Cancelled() : std::runtime_error("cancelled") {}
};

} // namespace sightline
