#pragma once
// The collector's recording core: per-thread rings, interned strings, and the writer thread that
// drains them into the capture file as framed, checksummed chunks. It never throws and never
// aborts the process: on an error it says so in one line and stops recording.
#include "ring.h"
#include "sightline/capture_format.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <ctime>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace sightline::collector {

// CLOCK_REALTIME in ns: CUPTI's default clock, and so the clock of every time the collector takes.
inline uint64_t realtimeNs() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

// Where the chunks go: a file in production, memory in tests.
class ChunkSink {
public:
    virtual ~ChunkSink() = default;
    virtual bool write(const void* data, size_t size) = 0;
};

class Recorder {
public:
    // Opens the capture: writes the file header to `sink` and starts the writer thread.
    Recorder(std::unique_ptr<ChunkSink> sink, const capture::FileHeader& header);
    ~Recorder();
    Recorder(const Recorder&) = delete;
    Recorder& operator=(const Recorder&) = delete;

    // Hot path, any thread: copy one record into this thread's ring.
    template <typename T>
    void emit(const T& record) { emitBytes(&record, record.h.size); }
    // False when the record was dropped (and counted).
    bool emitBytes(const void* record, uint32_t size);
    // An op record, counted for opsRecorded().
    void recordOp(const capture::OpRecord& op);
    // Records produced in bulk off the application threads (decoded CUPTI buffers).
    void emitBulk(const std::vector<char>& records, uint32_t count);
    uint32_t intern(std::string_view text);

    // Drains everything now (the writer does this every interval on its own).
    void flush();
    // Final drain, counters, and the writer stopped. Idempotent.
    void close();

    uint64_t ringDropped() const { return m_ring_dropped.load(std::memory_order_relaxed); }
    // Rings held now: one per recording thread alive, or ended and not yet drained.
    size_t ringCount();
    void setCounters(uint64_t cupti_dropped, uint64_t buffers_requested);
    uint64_t opsRecorded();
    // Op records and CUPTI activities recorded so far (user ranges are ops).
    uint64_t eventsRecorded();
    // Forget everything after fork() in a child: nothing of the parent's is written twice.
    void abandonAfterFork();

private:
    ThreadRing* threadRing();
    // The ring the record went into, or null when it was dropped (and counted).
    ThreadRing* writeRecord(const void* record, uint32_t size);
    void writerLoop();
    bool drainDue(std::chrono::steady_clock::time_point last); // under m_mutex
    uint64_t opsLocked() const;                                // under m_mutex
    void drainAll();
    void startChunk();
    void sealChunk();
    void appendRecords(const char* data, size_t size, uint32_t count);

    std::unique_ptr<ChunkSink> m_sink;
    std::mutex m_mutex; // strings, bulk records, ring registry, chunk assembly
    std::unordered_map<std::string, uint32_t, capture::StringViewHash, std::equal_to<>> m_strings;
    std::vector<char> m_pending_strings;
    uint32_t m_pending_string_count = 0;
    std::vector<char> m_bulk;
    uint32_t m_bulk_count = 0;
    uint64_t m_bulk_total = 0;
    std::vector<std::unique_ptr<ThreadRing>> m_rings;
    uint64_t m_retired_ops = 0; // op records of the rings of ended threads, freed
    std::vector<char> m_chunk;  // a ChunkHeader's room, then whole records
    uint32_t m_chunk_records = 0;
    std::vector<std::vector<char>> m_spare; // written chunk buffers, for reuse
    std::vector<std::vector<char>> m_ready; // sealed chunks waiting for the disk
    std::mutex m_write_mutex;               // serialises chunk writes
    std::condition_variable m_wake;
    std::thread m_writer;
    bool m_stop = false;
    std::atomic<bool> m_closed{false};
    std::atomic<bool> m_abandoned{false};
    std::atomic<bool> m_failed{false};
    std::atomic<uint64_t> m_ring_dropped{0};
    uint64_t m_cupti_dropped = 0, m_buffers_requested = 0;
    const uint64_t m_generation; // distinguishes recorders for the thread-local ring cache
};

} // namespace sightline::collector
