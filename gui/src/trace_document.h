#pragma once
// What the GUI shows of one trace: the trace, its op tree, the report (tables, metrics,
// findings) and the timeline's tracks. Built off the UI thread; read-only afterwards.
#include "sightline/report/report.h"
#include "sightline/hardware.h"
#include "sightline/import.h"
#include "sightline/op_tree.h"
#include "sightline/rules.h"
#include "sightline/taxonomy.h"
#include "sightline/trace.h"

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sightline::gui {

// One row of the timeline: events of one CPU thread at one nesting depth, or of one GPU stream.
struct Track {
    std::string label;
    bool gpu = false;
    uint32_t group = 0;           // thread index or stream number
    int32_t device = 0;           // the GPU of a stream's track
    std::vector<uint32_t> events; // indices into Trace::cpu or Trace::gpu, sorted by start
    std::vector<int64_t> max_end; // running maximum of the events' ends, for range queries
    // Coarse coverage for drawing whole-trace views fast: busy nanoseconds per bucket.
    std::vector<float> coverage; // fraction of each bucket covered, kBuckets entries
    // A hardware-counter track (docs/hardware.md): no events; drawn from TraceDocument::hwSeries(),
    // `metric` on `device`, as a percentage (DRAM bandwidth against the device's ceiling).
    bool counter = false;
    HwMetric metric = HwMetric::SmActive;
};

class TraceDocument {
public:
    static constexpr size_t kBuckets = 4096;

    // Throws InputError for bad input and Cancelled when `cancelled` becomes true.
    static std::unique_ptr<TraceDocument> load(const std::string& path, const std::atomic<bool>& cancelled,
                                               const std::function<void(double)>& progress = {});

    const Trace& trace() const { return m_trace; }
    const OpTree& tree() const { return m_tree; }
    const Report& report() const { return m_report; }
    const std::vector<Track>& tracks() const { return m_tracks; }
    const std::vector<std::string>& gpuFamily() const { return m_gpu_family; } // per GPU event
    const HwSeries& hwSeries() const { return *m_hw; }                         // hardware samples (empty without)
    // A counter track's value over [a, b): its metric's average there, in %; NaN without samples.
    double counterValue(const Track& track, int64_t a, int64_t b) const;
    int64_t begin() const { return m_begin; }
    int64_t end() const { return m_end; }
    // GPU events launched by a CPU event (by external id).
    std::vector<uint32_t> kernelsOf(uint32_t cpu_index) const;
    // The track a CPU event is drawn on; -1 for events not drawn (folded, bookkeeping).
    int trackOfCpu(uint32_t cpu_index) const;
    // The track of a GPU stream; -1 when it has none.
    int trackOfStream(int32_t device, int32_t stream) const;

private:
    void buildTracks();
    void addCounterTracks();

    Trace m_trace;
    OpTree m_tree;
    Report m_report;
    std::vector<Track> m_tracks;
    std::vector<std::string> m_gpu_family;
    std::unique_ptr<HwSeries> m_hw;
    std::vector<std::pair<int64_t, uint32_t>> m_gpu_by_external;
    std::vector<int> m_slot_track;                             // (thread, capped depth) -> track
    std::map<std::pair<int32_t, int32_t>, int> m_stream_track; // (device, stream) -> track
    int64_t m_begin = 0, m_end = 1;
};

} // namespace sightline::gui
