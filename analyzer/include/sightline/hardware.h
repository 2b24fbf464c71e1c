#pragma once
// What the GPU's own counters say about the time a trace shows as busy (docs/hardware.md): SMs
// active, warps active, tensor-pipe activity and DRAM throughput, from counter samples taken over
// time (the collector's --hw: CUPTI PM sampling). Samples are device-wide, so the figures of a
// kernel are the GPU's over the kernel's time (kernels running beside it included); those of a
// kernel class, an op or a step are averages weighted by the time the samples cover.
#include "sightline/trace.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace sightline {

class Taxonomy;
struct Metrics;

enum class HwMetric : uint8_t { SmActive,
                                WarpsActive,
                                TensorActive,
                                DramPct,
                                DramBytesPerS,
                                Count };
inline constexpr size_t kHwMetrics = size_t(HwMetric::Count);

// Which figure a counter named as its source names it gives, false for one Sightline does not use.
bool hwMetricOf(std::string_view counter_name, HwMetric& out, bool& bytes);

struct HwFigures {
    std::array<double, kHwMetrics> value{NAN, NAN, NAN, NAN, NAN}; // %, or bytes/s for DramBytesPerS
    int64_t covered_ns = 0;                                        // time the samples covered
    double operator[](HwMetric m) const { return value[size_t(m)]; }
    bool known() const { return covered_ns > 0; }
};

// Sums of figures weighted by the time each covers.
class HwAverage {
public:
    void add(const HwFigures& f);
    HwFigures result() const;

private:
    std::array<double, kHwMetrics> m_sum{}, m_weight{};
    int64_t m_covered = 0;
};

// The samples of a trace by device, sorted, for averages over intervals.
class HwSeries {
public:
    explicit HwSeries(const Trace& trace);
    bool empty() const { return m_devices.empty(); }
    // The figures over [start_ns, end_ns) on `device`, each sample weighted by its overlap.
    HwFigures over(int32_t device, int64_t start_ns, int64_t end_ns) const;

private:
    struct Sample {
        int64_t start = 0, end = 0;
        std::array<double, kHwMetrics> v{NAN, NAN, NAN, NAN, NAN};
    };
    std::map<int32_t, std::vector<Sample>> m_devices;
};

// Figures over the kernels of each kernel class, family and op (the op whose external id a kernel
// carries: the op that launched it), steady steps only.
struct HwBreakdown {
    bool sampled = false; // the trace holds hardware samples
    HwFigures steady;     // over the steady steps (metrics hw.*: docs/metrics.md)
    std::map<std::string, HwFigures> classes, families, ops;
};

// The hardware pass of the metrics: each step's figures, the steady state's and the breakdown.
// Does nothing without samples.
void computeHardwareMetrics(const Trace& trace, const Taxonomy& taxonomy, Metrics& out);

// The DRAM bandwidth a device reaches in practice, bytes/s (about 4.3 TB/s on an H200, by a large
// device-to-device copy); NaN for a device Sightline has no figure for.
double dramCeiling(std::string_view device_name);

} // namespace sightline
