#include "sightline/strings.h"

namespace sightline {

StringTable::StringTable() {
    m_views.emplace_back();
    m_index.emplace(std::string_view{}, 0u);
}

StringId StringTable::intern(std::string_view text) {
    if (auto it = m_index.find(text); it != m_index.end())
        return StringId{it->second};
    const std::string& stored = m_storage.emplace_back(text);
    const auto id = static_cast<uint32_t>(m_views.size());
    m_views.emplace_back(stored);
    m_index.emplace(m_views.back(), id);
    m_bytes += stored.capacity() + 64;
    return StringId{id};
}

size_t StringTable::bytesUsed() const {
    return m_bytes + m_views.capacity() * sizeof(std::string_view);
}

} // namespace sightline
