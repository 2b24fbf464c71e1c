#pragma once
// Several ranks of one data-parallel job analysed together (docs/multi-rank.md): clocks aligned,
// collectives matched across ranks, communication split into overlapped and exposed time, the
// rank the others wait on and by how much, and how unevenly the compute is spread.
#include "sightline/taxonomy.h"
#include "sightline/trace.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sightline {

struct RankInput {
    int rank = 0;
    std::string host; // empty when unknown
    const Trace* trace = nullptr;
};

// Rank and host as the trace records them (capture metadata "rank" / "host"); `fallback_rank`
// when the trace does not say.
RankInput rankInputOf(const Trace& trace, int fallback_rank);

struct RankStats {
    int rank = 0;
    std::string host;
    int64_t clock_offset_ns = 0; // subtracted from this rank's times to put it on rank 0's clock
    size_t steps = 0;
    double step_ms = 0;          // mean step time
    size_t collectives = 0;      // NCCL (or other communication) kernels
    int64_t compute_busy_ns = 0; // union of non-communication GPU activity
    int64_t comm_ns = 0;         // union of communication kernels
    int64_t overlap_ns = 0;      // communication hidden under compute
    int64_t exposed_comm_ns = 0; // communication with no compute beside it
    int64_t wait_ns = 0;         // time spent at matched collectives waiting for the last rank
    int64_t late_ns = 0;         // at collectives it reached last: how long after all others, summed
};

struct MultiRankAnalysis {
    std::vector<RankStats> ranks;   // sorted by rank
    size_t matched_collectives = 0; // collectives found on every rank (by type and order)
    bool clocks_aligned = false;    // true when hosts differ or are unknown and offsets were estimated
    int straggler = -1;             // rank the others wait on, -1 when none stands out
    double straggler_delay_ms_per_step = 0;
    int heaviest_rank = -1; // most compute busy time
    double imbalance = 0;   // heaviest compute / mean compute - 1
};

// Throws InputError when ranks repeat or fewer than two are given.
MultiRankAnalysis analyzeRanks(std::vector<RankInput> inputs, const Taxonomy& taxonomy);

// The job's figures as metrics for the rule engine (the ranks.* metrics of docs/metrics.md, and
// step.time_ms, the mean step time of the ranks), so that rule files judge stragglers and
// unbalanced work (rules/catalog/straggler-rank.toml, unbalanced-work.toml).
std::map<std::string, double> rankMetrics(const MultiRankAnalysis& analysis);

// Every rank on one timeline, for the GUI and SQL: times moved onto rank 0's clock (the analysis's
// offsets), threads named "rank R · NAME", GPUs renumbered in rank order with their rank in the
// metadata ("device_label.N" = "rank R · GPU D"), op ids and correlations kept apart per rank.
// Flow arrows are left out (the op links stay).
Trace mergeRanks(const std::vector<RankInput>& inputs, const MultiRankAnalysis& analysis);

} // namespace sightline
