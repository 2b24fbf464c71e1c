// Multi-rank analysis on synthetic data-parallel jobs whose skew, waits and clock offsets are known.
#include "sightline/error.h"
#include "sightline/ranks.h"

#include <catch2/catch.hpp>

#include <map>
#include <set>

using namespace sightline;

namespace {

constexpr int64_t kMs = 1'000'000;

struct JobSpec {
    int ranks = 2;
    int steps = 4;
    double compute_ms = 10; // per step and rank, before the all-reduce
    int slow_rank = -1;     // this rank computes `delay_ms` longer every step
    double delay_ms = 0;
    double allreduce_ms = 2;              // time the all-reduce takes once every rank is there
    double overlapped_ms = 0;             // compute on a second stream running beside the all-reduce
    std::vector<int64_t> clock_offset_ns; // added to every time of a rank (a different host's clock)
    std::string host = "node0";           // "" gives each rank its own host
    bool cpu = false;                     // a CPU job over gloo: ops and "gloo:all_reduce" ranges, no kernels
    double step_range_ms = 0;             // > 0: the step's CPU range ends this soon, its GPU work later
};

std::vector<Trace> buildJob(const JobSpec& spec) {
    std::vector<Trace> traces(spec.ranks);
    int64_t t = 0;
    for (int s = 0; s < spec.steps; ++s) {
        int64_t arrival_last = 0;
        std::vector<int64_t> arrive(spec.ranks);
        for (int r = 0; r < spec.ranks; ++r) {
            double c = spec.compute_ms + (r == spec.slow_rank ? spec.delay_ms : 0);
            arrive[r] = t + static_cast<int64_t>(c * kMs);
            arrival_last = std::max(arrival_last, arrive[r]);
        }
        int64_t end = arrival_last + static_cast<int64_t>(spec.allreduce_ms * kMs);
        for (int r = 0; r < spec.ranks; ++r) {
            Trace& tr = traces[r];
            int64_t off = r < static_cast<int>(spec.clock_offset_ns.size()) ? spec.clock_offset_ns[r] : 0;
            uint32_t th = tr.threadIndex(100 + r, 1);
            CpuEvent step;
            step.start_ns = t + off;
            step.end_ns = (spec.step_range_ms > 0 ? t + static_cast<int64_t>(spec.step_range_ms * kMs) : end) + off;
            step.name = tr.strings.intern("ProfilerStep#" + std::to_string(s));
            step.kind = CpuKind::UserAnnotation;
            step.thread = th;
            tr.cpu.push_back(step);
            if (spec.cpu) {
                CpuEvent op;
                op.start_ns = t + off;
                op.end_ns = arrive[r] + off;
                op.name = tr.strings.intern("aten::mm");
                op.thread = th;
                tr.cpu.push_back(op);
                CpuEvent call = op; // the process group's own op: not compute
                call.start_ns = arrive[r] + off;
                call.end_ns = call.start_ns + kMs / 100;
                call.name = tr.strings.intern("c10d::allreduce_");
                tr.cpu.push_back(call);
                CpuEvent ar; // from the call to completion, ended on gloo's thread
                ar.start_ns = arrive[r] + off;
                ar.end_ns = end + off;
                ar.name = tr.strings.intern("gloo:all_reduce");
                ar.kind = CpuKind::UserAnnotation;
                ar.thread = tr.threadIndex(100 + r, 2);
                tr.cpu.push_back(ar);
                continue;
            }
            GpuEvent k;
            k.start_ns = t + off;
            k.end_ns = arrive[r] + off;
            k.name = tr.strings.intern("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn");
            k.stream = 7;
            tr.gpu.push_back(k);
            GpuEvent ar;
            ar.start_ns = arrive[r] + off;
            ar.end_ns = end + off;
            ar.name = tr.strings.intern("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
            ar.stream = 20;
            tr.gpu.push_back(ar);
            if (spec.overlapped_ms > 0) {
                GpuEvent o = k;
                o.start_ns = arrive[r] + off;
                o.end_ns = o.start_ns + static_cast<int64_t>(spec.overlapped_ms * kMs);
                o.stream = 8;
                tr.gpu.push_back(o);
            }
        }
        t = end + kMs / 10;
    }
    for (int r = 0; r < spec.ranks; ++r) {
        traces[r].source = "rank" + std::to_string(r);
        traces[r].metadata["rank"] = std::to_string(r);
        traces[r].metadata["host"] = spec.host.empty() ? "node" + std::to_string(r) : spec.host;
    }
    return traces;
}

MultiRankAnalysis analyze(const std::vector<Trace>& traces) {
    std::vector<RankInput> in;
    for (size_t r = 0; r < traces.size(); ++r) in.push_back(rankInputOf(traces[r], static_cast<int>(r)));
    return analyzeRanks(in, Taxonomy::builtin());
}

} // namespace

TEST_CASE("ranks: a delayed rank is named as the straggler with its delay") {
    for (int ranks : {2, 4}) {
        JobSpec spec;
        spec.ranks = ranks;
        spec.slow_rank = ranks - 1;
        spec.delay_ms = 3;
        auto a = analyze(buildJob(spec));
        REQUIRE(a.ranks.size() == static_cast<size_t>(ranks));
        CHECK(a.matched_collectives == 4);
        CHECK_FALSE(a.clocks_aligned);
        CHECK(a.straggler == ranks - 1);
        CHECK(a.straggler_delay_ms_per_step == Approx(3.0));
        for (const auto& r : a.ranks) {
            CHECK(r.steps == 4);
            CHECK(r.collectives == 4);
            // Every other rank waits 3 ms a step at the all-reduce; the straggler waits for no one.
            CHECK(r.wait_ns == (r.rank == spec.slow_rank ? 0 : 4 * 3 * kMs));
            // Nothing overlaps the all-reduce: all of it is exposed, waits included.
            CHECK(r.overlap_ns == 0);
            CHECK(r.exposed_comm_ns == r.comm_ns);
            CHECK(r.comm_ns == 4 * (2 * kMs + (r.rank == spec.slow_rank ? 0 : 3 * kMs)));
        }
        CHECK(a.heaviest_rank == ranks - 1);
        CHECK(a.imbalance == Approx(13.0 * ranks / (10.0 * (ranks - 1) + 13.0) - 1.0));
    }
}

TEST_CASE("ranks: a step whose CPU range ends before its GPU work lasts from its start to the next step's") {
    JobSpec spec;
    spec.slow_rank = 1;
    spec.delay_ms = 3;
    spec.step_range_ms = 1; // the host queues the step in 1 ms, then synchronises outside the range
    auto a = analyze(buildJob(spec));
    for (const auto& r : a.ranks) CHECK(r.step_ms == Approx(10 + 3 + 2 + 0.1)); // compute, delay, all-reduce, gap
    CHECK(a.straggler == 1);
    CHECK(a.straggler_delay_ms_per_step == Approx(3.0));
}

TEST_CASE("ranks: balanced ranks have no straggler and no imbalance") {
    auto a = analyze(buildJob(JobSpec{}));
    CHECK(a.straggler == -1);
    CHECK(a.imbalance == Approx(0.0));
    for (const auto& r : a.ranks) CHECK(r.wait_ns == 0);
}

TEST_CASE("ranks: a delay under 1% of the step is not called a straggler") {
    JobSpec spec;
    spec.slow_rank = 1;
    spec.delay_ms = 0.05; // 0.4% of a 12 ms step
    CHECK(analyze(buildJob(spec)).straggler == -1);
}

TEST_CASE("ranks: communication beside compute counts as overlapped, the rest as exposed") {
    JobSpec spec;
    spec.overlapped_ms = 1.5;
    auto a = analyze(buildJob(spec));
    for (const auto& r : a.ranks) {
        CHECK(r.comm_ns == 4 * 2 * kMs);
        CHECK(r.overlap_ns == 4 * 1'500'000);
        CHECK(r.exposed_comm_ns == 4 * 500'000);
    }
}

TEST_CASE("ranks: clocks of different hosts are aligned on the collectives") {
    JobSpec spec;
    spec.ranks = 3;
    spec.host = "";
    spec.slow_rank = 0;
    spec.delay_ms = 2;
    spec.clock_offset_ns = {0, 50 * kMs, -7 * kMs};
    auto a = analyze(buildJob(spec));
    CHECK(a.clocks_aligned);
    CHECK(a.ranks[1].clock_offset_ns == 50 * kMs);
    CHECK(a.ranks[2].clock_offset_ns == -7 * kMs);
    // Without alignment rank 1 would look 50 ms late; aligned, rank 0 is the one waited on.
    CHECK(a.straggler == 0);
    CHECK(a.straggler_delay_ms_per_step == Approx(2.0));
    CHECK(a.ranks[1].wait_ns == 4 * 2 * kMs);
}

TEST_CASE("ranks: a CPU job over gloo is analysed from its process group's ranges") {
    JobSpec spec;
    spec.cpu = true;
    spec.steps = 5;
    spec.slow_rank = 1;
    spec.delay_ms = 4;
    const auto a = analyze(buildJob(spec));
    CHECK(a.matched_collectives == 5);
    CHECK(a.straggler == 1);
    CHECK(a.straggler_delay_ms_per_step == Approx(4.0));
    for (const RankStats& r : a.ranks) {
        CHECK(r.collectives == 5);
        CHECK(r.overlap_ns == 0); // nothing computes while the all-reduce runs
        CHECK(r.exposed_comm_ns == r.comm_ns);
    }
    CHECK(a.ranks[0].compute_busy_ns == 5 * 10 * kMs); // aten::mm only: c10d's own op is not compute
    CHECK(a.ranks[1].compute_busy_ns == 5 * 14 * kMs);
    CHECK(a.ranks[0].wait_ns == 5 * 4 * kMs);
    CHECK(a.ranks[0].comm_ns == 5 * 6 * kMs); // its all-reduce waits 4 ms, then takes 2
}

TEST_CASE("ranks: merged onto one timeline, on rank 0's clock, each rank's threads and GPUs apart") {
    JobSpec spec;
    spec.ranks = 3;
    spec.host = "";
    spec.clock_offset_ns = {0, 50 * kMs, -7 * kMs};
    const auto traces = buildJob(spec);
    std::vector<RankInput> in;
    for (size_t r = 0; r < traces.size(); ++r) in.push_back(rankInputOf(traces[r], static_cast<int>(r)));
    const auto a = analyzeRanks(in, Taxonomy::builtin());
    const Trace m = mergeRanks(in, a);
    size_t cpu = 0, gpu = 0;
    for (const Trace& t : traces) {
        cpu += t.cpu.size();
        gpu += t.gpu.size();
    }
    REQUIRE(m.cpu.size() == cpu);
    REQUIRE(m.gpu.size() == gpu);
    REQUIRE(m.threads.size() == 3);
    for (int r = 0; r < 3; ++r) CHECK(m.str(m.threads[r].name).starts_with("rank " + std::to_string(r) + " · "));
    // The same collective ends at the same moment on every rank once the clocks are aligned.
    std::map<int32_t, int64_t> first_end; // per GPU: the end of its first all-reduce
    for (const GpuEvent& g : m.gpu)
        if (m.str(g.name).starts_with("ncclDevKernel")) first_end.try_emplace(g.device, g.end_ns);
    REQUIRE(first_end.size() == 3);
    CHECK(first_end[1] == first_end[0]);
    CHECK(first_end[2] == first_end[0]);
    // GPUs renumbered by rank and labelled with it.
    std::set<int32_t> devices;
    for (const GpuEvent& g : m.gpu) devices.insert(g.device);
    CHECK(devices == std::set<int32_t>{0, 1, 2});
    CHECK(m.metadata.at("device_label.2") == "rank 2 · GPU 0");
    CHECK(m.metadata.at("ranks") == "3");
}

TEST_CASE("ranks: bad sets of ranks are refused") {
    auto traces = buildJob(JobSpec{});
    CHECK_THROWS_AS(analyzeRanks({rankInputOf(traces[0], 0)}, Taxonomy::builtin()), InputError);
    traces[1].metadata["rank"] = "0";
    CHECK_THROWS_AS(analyze(traces), InputError);
    traces[1].metadata["rank"] = "one";
    CHECK_THROWS_AS(analyze(traces), InputError);
}
