#include "recorder.h"

#include "quiet_thread.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include <csignal>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace sightline::collector {

using namespace capture;

namespace {

// Each recording thread's ring: 4 MiB, about 58,000 op records. The writer looks at the rings every
// 10 ms and drains them once one is a quarter full (or every 100 ms), so a thread recording two
// million ops a second still has about 20 ms of room left.
constexpr size_t kRingBytes = size_t(4) << 20;
constexpr auto kPollEvery = std::chrono::milliseconds(10);
constexpr auto kDrainEvery = std::chrono::milliseconds(100);
constexpr size_t kChunkTarget = size_t(1) << 20;
constexpr size_t kMaxBulk = size_t(256) << 20;
std::atomic<uint64_t> g_generation{1};

// The recorders alive, by generation: a thread that ends hands its ring back to a live one only.
// Kept on the heap, never destroyed: threads end until the process's very end.
std::mutex& liveMutex() {
    static auto* m = new std::mutex;
    return *m;
}
std::unordered_set<uint64_t>& liveRecorders() {
    static auto* s = new std::unordered_set<uint64_t>;
    return *s;
}

// Set in a forked child, where the lock above may be held for ever by a thread that did not come
// along: no ring is handed back there (nothing is written in a child anyway).
std::atomic<bool> g_forked_child{false};

// The calling thread's ring. Plain thread_local values, read on every record: a thread_local with
// a destructor is reached through a wrapper function on every access, so the one that hands the
// ring back (ThreadCacheOwner) is touched once, when the thread gets its ring.
thread_local uint64_t t_generation = 0;
thread_local ThreadRing* t_ring = nullptr;
struct ThreadCacheOwner {
    // The thread is ending: its ring goes once the writer has drained it (a job that starts
    // threads by the thousand would otherwise keep 4 MiB for each).
    ~ThreadCacheOwner() {
        if (!t_ring || g_forked_child.load()) return;
        std::lock_guard<std::mutex> lock(liveMutex());
        if (liveRecorders().count(t_generation)) t_ring->retire();
        t_ring = nullptr;
        t_generation = 0;
    }
};
thread_local ThreadCacheOwner t_cache_owner;

// How CUPTI names the calling thread in its API and marker records: pthread_self()'s low 32 bits.
uint32_t cuptiThreadId() {
    const pthread_t self = pthread_self();
    uint32_t id = 0;
    std::memcpy(&id, &self, sizeof id);
    return id;
}

} // namespace

Recorder::Recorder(std::unique_ptr<ChunkSink> sink, const FileHeader& header)
    : m_sink(std::move(sink)), m_generation(g_generation.fetch_add(1)) {
    {
        std::lock_guard<std::mutex> lock(liveMutex());
        liveRecorders().insert(m_generation);
    }
    startChunk();
    if (!m_sink->write(&header, sizeof header)) {
        m_failed = true;
        std::fprintf(stderr, "sightline: cannot write the capture header; recording is off\n");
    }
    m_writer = quietThread([this] { writerLoop(); });
}

Recorder::~Recorder() {
    {
        std::lock_guard<std::mutex> lock(liveMutex());
        liveRecorders().erase(m_generation);
    }
    if (!m_abandoned) close();
}

size_t Recorder::ringCount() {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_rings.size();
}

ThreadRing* Recorder::threadRing() {
    if (t_generation == m_generation)
        return t_ring;
    (void)&t_cache_owner; // registers the thread's exit handler (above)
    auto ring = std::make_unique<ThreadRing>(kRingBytes);
    ThreadRing* raw = ring.get();
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_rings.push_back(std::move(ring));
    }
    t_generation = m_generation;
    t_ring = raw;
    // Name the thread in the capture.
    ThreadRecord tr;
    initHeader(tr, RecordType::Thread);
    tr.tid = int64_t(syscall(SYS_gettid));
    tr.cupti_tid = cuptiThreadId();
    char name[32] = {};
    pthread_getname_np(pthread_self(), name, sizeof name);
    tr.name_id = intern(name);
    raw->write(&tr, tr.h.size);
    return raw;
}

bool Recorder::emitBytes(const void* record, uint32_t size) { return writeRecord(record, size) != nullptr; }

ThreadRing* Recorder::writeRecord(const void* record, uint32_t size) {
    if (m_closed.load(std::memory_order_relaxed) || m_abandoned.load(std::memory_order_relaxed))
        return nullptr;
    if (size < sizeof(RecordHeader) || size % 8 != 0 || size > kRingBytes / 4)
        return nullptr; // not a record this format allows
    ThreadRing* ring = threadRing();
    if (ring->write(record, size)) return ring;
    m_ring_dropped.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
}

void Recorder::recordOp(const OpRecord& op) {
    if (ThreadRing* ring = writeRecord(&op, op.h.size)) ring->countOp();
}

uint64_t Recorder::eventsRecorded() {
    std::lock_guard<std::mutex> lock(m_mutex);
    return opsLocked() + m_bulk_total;
}

uint64_t Recorder::opsRecorded() {
    std::lock_guard<std::mutex> lock(m_mutex);
    return opsLocked();
}

uint64_t Recorder::opsLocked() const {
    uint64_t n = m_retired_ops;
    for (const auto& ring : m_rings) n += ring->ops();
    return n;
}

void Recorder::emitBulk(const std::vector<char>& records, uint32_t count) {
    if (m_closed || m_abandoned || records.empty())
        return;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (m_bulk.size() + records.size() > kMaxBulk) { // the writer cannot keep up: drop, count
            m_ring_dropped.fetch_add(count, std::memory_order_relaxed);
            return;
        }
        m_bulk.insert(m_bulk.end(), records.begin(), records.end());
        m_bulk_count += count;
        m_bulk_total += count;
    }
    m_wake.notify_one();
}

uint32_t Recorder::intern(std::string_view text) {
    if (m_abandoned.load(std::memory_order_relaxed))
        return 0; // a forked child: the parent's locks may be held by threads that are gone
    std::lock_guard<std::mutex> lock(m_mutex);
    auto it = m_strings.find(text); // no string built to look up
    if (it != m_strings.end())
        return it->second;
    const auto id = uint32_t(m_strings.size() + 1); // 0 is the empty string
    m_strings.emplace(std::string(text), id);
    StringRecord sr;
    initHeader(sr, RecordType::String);
    sr.id = id;
    sr.length = uint32_t(text.size());
    sr.h.size = alignedSize(sizeof sr + text.size());
    const size_t at = m_pending_strings.size();
    m_pending_strings.resize(at + sr.h.size, 0);
    std::memcpy(m_pending_strings.data() + at, &sr, sizeof sr);
    std::memcpy(m_pending_strings.data() + at + sizeof sr, text.data(), text.size());
    ++m_pending_string_count;
    return id;
}

void Recorder::setCounters(uint64_t cupti_dropped, uint64_t buffers_requested) {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_cupti_dropped = cupti_dropped;
    m_buffers_requested = buffers_requested;
}

// Under m_mutex: a new chunk buffer (a spare one when there is one), its header's room reserved.
void Recorder::startChunk() {
    if (!m_spare.empty()) {
        m_chunk = std::move(m_spare.back());
        m_spare.pop_back();
        m_chunk.clear();
    } else {
        m_chunk = std::vector<char>();
        m_chunk.reserve(kChunkTarget + (1 << 16));
    }
    m_chunk.resize(sizeof(ChunkHeader));
    m_chunk_records = 0;
}

// Under m_mutex: frame the chunk being built (its header in place) and queue it for writing.
void Recorder::sealChunk() {
    if (m_chunk.size() <= sizeof(ChunkHeader))
        return;
    const size_t payload = m_chunk.size() - sizeof(ChunkHeader);
    const ChunkHeader ch{kChunkMagic, uint32_t(payload), m_chunk_records, crc32(m_chunk.data() + sizeof(ChunkHeader), payload)};
    std::memcpy(m_chunk.data(), &ch, sizeof ch);
    m_ready.push_back(std::move(m_chunk));
    startChunk();
}

void Recorder::appendRecords(const char* data, size_t size, uint32_t count) {
    // Whole records, split into chunks of about kChunkTarget.
    if (m_chunk.size() + size <= kChunkTarget) {
        m_chunk.insert(m_chunk.end(), data, data + size);
        m_chunk_records += count;
        return;
    }
    size_t at = 0;
    while (at + sizeof(RecordHeader) <= size) {
        RecordHeader h;
        std::memcpy(&h, data + at, sizeof h);
        if (h.size < sizeof h || at + h.size > size) break;
        m_chunk.insert(m_chunk.end(), data + at, data + at + h.size);
        ++m_chunk_records;
        at += h.size;
        if (m_chunk.size() >= kChunkTarget) sealChunk();
    }
}

void Recorder::drainAll() {
    // m_write_mutex (outer) keeps chunks in the file in the order they were sealed; m_mutex
    // (inner) is held only while collecting, so threads that intern or register are not kept
    // waiting on the disk.
    std::lock_guard<std::mutex> write_lock(m_write_mutex);
    std::vector<std::vector<char>> ready;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        // Strings first, so that every record's strings precede it in the file.
        if (!m_pending_strings.empty()) {
            appendRecords(m_pending_strings.data(), m_pending_strings.size(), m_pending_string_count);
            m_pending_strings.clear();
            m_pending_string_count = 0;
        }
        for (auto it = m_rings.begin(); it != m_rings.end();) {
            ThreadRing& ring = **it;
            const bool ended = ring.retired(); // before the drain: then the drain takes its last records
            m_chunk_records += uint32_t(ring.drain(m_chunk));
            if (m_chunk.size() >= kChunkTarget) sealChunk();
            if (ended) {
                m_retired_ops += ring.ops();
                it = m_rings.erase(it);
            } else {
                ++it;
            }
        }
        if (!m_bulk.empty()) {
            appendRecords(m_bulk.data(), m_bulk.size(), m_bulk_count);
            m_bulk.clear();
            m_bulk_count = 0;
        }
        sealChunk();
        ready.swap(m_ready);
    }
    for (const auto& framed : ready) {
        // One buffer, one write: a kill mid-write leaves a torn last chunk that the reader drops
        // and counts.
        if (m_failed || m_abandoned) break;
        if (!m_sink->write(framed.data(), framed.size())) {
            m_failed = true;
            std::fprintf(stderr, "sightline: writing the capture failed; recording is off from here\n");
        }
    }
    std::lock_guard<std::mutex> lock(m_mutex);
    for (auto& buffer : ready)
        if (m_spare.size() < 4) m_spare.push_back(std::move(buffer));
}

bool Recorder::drainDue(std::chrono::steady_clock::time_point last) {
    if (m_stop || m_bulk.size() > kChunkTarget || std::chrono::steady_clock::now() - last >= kDrainEvery) return true;
    for (const auto& ring : m_rings)
        if (ring->quarterFull()) return true;
    return false;
}

void Recorder::writerLoop() {
    try {
        auto last = std::chrono::steady_clock::now();
        for (;;) {
            {
                std::unique_lock<std::mutex> wait_lock(m_mutex);
                while (!drainDue(last)) m_wake.wait_for(wait_lock, kPollEvery);
                if (m_stop) return;
            }
            drainAll();
            last = std::chrono::steady_clock::now();
        }
    } catch (...) {
        m_failed = true; // out of memory: stop recording, never take the job down
    }
}

void Recorder::flush() {
    if (!m_abandoned) drainAll();
}

void Recorder::close() {
    if (m_closed.exchange(true))
        return;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_stop = true;
    }
    m_wake.notify_all();
    if (m_writer.joinable())
        m_writer.join();
    CountersRecord c;
    initHeader(c, RecordType::Counters);
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        c.cupti_dropped = m_cupti_dropped;
        c.buffers_requested = m_buffers_requested;
    }
    c.ring_dropped = ringDropped();
    c.ops_recorded = opsRecorded();
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        appendRecords(reinterpret_cast<const char*>(&c), sizeof c, 1);
    }
    drainAll();
}

void Recorder::abandonAfterFork() {
    // In the child only the forking thread exists; the writer thread and maybe the owners of the
    // locks are gone. Nothing is written from here on, and the object is never destroyed (the
    // collector keeps it on the heap), so its thread object is never joined.
    g_forked_child = true;
    m_abandoned = true;
    m_closed = true;
}

} // namespace sightline::collector
