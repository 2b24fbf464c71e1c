#pragma once
// A single-producer, single-consumer byte ring for one thread's records. The recording thread
// appends whole records without locks, allocation or syscalls; the writer thread drains them.
// A record that would not fit before the end is preceded by a padding record that fills the end.
#include "sightline/capture_format.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace sightline::collector {

class ThreadRing {
public:
    explicit ThreadRing(size_t capacity_pow2);

    // Producer. False when there is no room, or when the record's header does not give `size` as
    // its size (or that size is not a whole number of 8-byte words): the record is dropped and
    // counted by the caller.
    bool write(const void* record, uint32_t size);
    // Producer: counts one op record (a plain store: only the producer writes it).
    void countOp() { m_ops.store(m_ops.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
    // Consumer: appends the whole records available to `out`; returns how many.
    size_t drain(std::vector<char>& out);
    // Any thread: whether more than a quarter of the ring is waiting to be drained.
    bool quarterFull() const {
        return m_head.load(std::memory_order_relaxed) - m_tail.load(std::memory_order_relaxed) > m_cap / 4;
    }
    uint64_t ops() const { return m_ops.load(std::memory_order_relaxed); }
    // Producer, last: its thread is ending. A consumer that sees this before a drain has, after
    // that drain, every record the ring will ever hold.
    void retire() { m_retired.store(true, std::memory_order_release); }
    bool retired() const { return m_retired.load(std::memory_order_acquire); }

private:
    std::unique_ptr<char[]> m_buf;
    size_t m_cap;
    alignas(64) std::atomic<uint64_t> m_head{0}; // written by the producer
    std::atomic<uint64_t> m_ops{0};              // written by the producer
    std::atomic<bool> m_retired{false};          // written by the producer
    alignas(64) std::atomic<uint64_t> m_tail{0}; // written by the consumer
};

} // namespace sightline::collector
