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

    // Producer. False when there is no room (the record is dropped and counted by the caller).
    bool write(const void* record, uint32_t size);
    // Consumer: appends the whole records available to `out`; returns how many.
    size_t drain(std::vector<char>& out);
    size_t capacity() const { return m_cap; }

private:
    std::unique_ptr<char[]> m_buf;
    size_t m_cap;
    alignas(64) std::atomic<uint64_t> m_head{0}; // written by the producer
    alignas(64) std::atomic<uint64_t> m_tail{0}; // written by the consumer
};

} // namespace sightline::collector
