#include "ring.h"

#include <cstddef>
#include <cstring>

namespace sightline::collector {

using capture::RecordHeader;

ThreadRing::ThreadRing(size_t capacity_pow2) : m_buf(new char[capacity_pow2]), m_cap(capacity_pow2) {
    std::memset(m_buf.get(), 0, m_cap); // fault the pages in now, not on the hot path
}

bool ThreadRing::write(const void* record, uint32_t size) {
    // A record must say its own size, at least a header's, a multiple of 8: the consumer steps
    // from record to record by it, so a wrong one (a bug in whoever made the record) is refused
    // here rather than sending the writer thread round the ring for ever.
    uint32_t says;
    std::memcpy(&says, static_cast<const char*>(record) + offsetof(RecordHeader, size), sizeof says);
    if (says != size || size < sizeof(RecordHeader) || size % 8 != 0 || size > m_cap)
        return false;
    const uint64_t head = m_head.load(std::memory_order_relaxed);
    const uint64_t tail = m_tail.load(std::memory_order_acquire);
    const size_t at = size_t(head & (m_cap - 1));
    const size_t to_end = m_cap - at;
    const size_t pad = to_end < size ? to_end : 0;
    if (head + pad + size - tail > m_cap)
        return false;
    if (pad) {
        RecordHeader filler{0, 0, uint32_t(pad)};
        std::memcpy(m_buf.get() + at, &filler, sizeof filler);
    }
    std::memcpy(m_buf.get() + (pad ? 0 : at), record, size);
    m_head.store(head + pad + size, std::memory_order_release);
    return true;
}

size_t ThreadRing::drain(std::vector<char>& out) {
    uint64_t tail = m_tail.load(std::memory_order_relaxed);
    const uint64_t head = m_head.load(std::memory_order_acquire);
    size_t n = 0;
    while (tail < head) {
        const size_t at = size_t(tail & (m_cap - 1));
        RecordHeader h;
        std::memcpy(&h, m_buf.get() + at, sizeof h);
        if (h.type != 0) {
            out.insert(out.end(), m_buf.get() + at, m_buf.get() + at + h.size);
            ++n;
        }
        tail += h.size;
    }
    m_tail.store(tail, std::memory_order_release);
    return n;
}

} // namespace sightline::collector
