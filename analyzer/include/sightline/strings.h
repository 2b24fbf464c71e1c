#pragma once
// Interned strings: every name in a trace is stored once and referred to by a StringId.
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sightline {

// A name pattern of rules and replay edits: a name, or a prefix ending in '*'.
inline bool globMatch(std::string_view pattern, std::string_view name) {
    if (!pattern.empty() && pattern.back() == '*') return name.starts_with(pattern.substr(0, pattern.size() - 1));
    return name == pattern;
}

struct StringId {
    uint32_t value = 0; // 0 is the empty string
    friend bool operator==(StringId a, StringId b) { return a.value == b.value; }
    friend bool operator!=(StringId a, StringId b) { return a.value != b.value; }
    friend bool operator<(StringId a, StringId b) { return a.value < b.value; }
    bool empty() const { return value == 0; }
};

class StringTable {
public:
    StringTable();
    StringTable(const StringTable&) = delete;
    StringTable& operator=(const StringTable&) = delete;
    StringTable(StringTable&&) noexcept = default;
    StringTable& operator=(StringTable&&) noexcept = default;

    StringId intern(std::string_view text);
    std::string_view view(StringId id) const { return m_views[id.value]; }
    size_t size() const { return m_views.size(); }
    // Bytes held by the table (storage and index), for memory accounting.
    size_t bytesUsed() const;

private:
    struct Hash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
    };
    std::deque<std::string> m_storage; // stable addresses for the views
    std::vector<std::string_view> m_views;
    std::unordered_map<std::string_view, uint32_t, Hash, std::equal_to<>> m_index;
    size_t m_bytes = 0;
};

} // namespace sightline
