#include "sightline/ranks.h"

#include "sightline/error.h"
#include "sightline/steps.h"
#include "intervals.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

namespace sightline {
namespace {

int64_t median(std::vector<int64_t> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct CollectiveSpan {
    std::string type;
    int64_t start_ns = 0;
    int64_t end_ns = 0;
};

struct RankWork {
    std::vector<CollectiveSpan> collectives; // in start order
    std::vector<Interval> compute, comm;
};

// A job with no communication kernels (gloo on the CPU, or GPU activity not recorded): the
// collectives are the process group's own ranges, "gloo:all_reduce" and the like, which run from
// the call to the collective's completion on the backend's thread; compute is the union of the
// other ops (c10d's own calls and user ranges left out).
void splitCpu(const Trace& t, RankWork& w) {
    auto collective = [&](const CpuEvent& e) {
        const std::string_view name = t.str(e.name);
        return name.starts_with("gloo:") || name.starts_with("nccl:");
    };
    if (std::none_of(t.cpu.begin(), t.cpu.end(), collective)) return; // GPU compute stays as it is
    w.compute.clear();
    for (const CpuEvent& e : t.cpu) {
        const std::string_view name = t.str(e.name);
        if (collective(e)) {
            w.comm.emplace_back(e.start_ns, e.end_ns);
            w.collectives.push_back({std::string(name.substr(5)), e.start_ns, e.end_ns});
        } else if (e.kind == CpuKind::Op && !name.starts_with("c10d::")) {
            w.compute.emplace_back(e.start_ns, e.end_ns);
        }
    }
}

RankWork split(const Trace& t, const Taxonomy& taxonomy) {
    RankWork w;
    std::map<StringId, KernelClass> classes;
    for (const auto& g : t.gpu) {
        if (g.kind == GpuKind::Annotation) continue;
        auto it = classes.find(g.name);
        if (it == classes.end()) it = classes.emplace(g.name, taxonomy.classify(t.str(g.name))).first;
        if (it->second.isCommunication()) {
            w.comm.emplace_back(g.start_ns, g.end_ns);
            std::string type = it->second.name.starts_with("NCCL ") ? it->second.name.substr(5) : it->second.name;
            w.collectives.push_back({std::move(type), g.start_ns, g.end_ns});
        } else {
            w.compute.emplace_back(g.start_ns, g.end_ns);
        }
    }
    if (w.collectives.empty()) splitCpu(t, w);
    std::stable_sort(w.collectives.begin(), w.collectives.end(),
                     [](const CollectiveSpan& a, const CollectiveSpan& b) { return a.start_ns < b.start_ns; });
    w.compute = mergedIntervals(std::move(w.compute));
    w.comm = mergedIntervals(std::move(w.comm));
    return w;
}

// Per collective type, the k-th instance on each rank: instances present on every rank.
// Returns, for each matched instance, the index of the collective on each rank.
std::vector<std::vector<size_t>> matchCollectives(const std::vector<RankWork>& work) {
    std::vector<std::map<std::string, std::vector<size_t>>> by_type(work.size());
    for (size_t r = 0; r < work.size(); ++r)
        for (size_t i = 0; i < work[r].collectives.size(); ++i)
            by_type[r][work[r].collectives[i].type].push_back(i);
    std::vector<std::vector<size_t>> matched;
    for (const auto& [type, first] : by_type[0]) {
        size_t n = first.size();
        for (size_t r = 1; r < work.size(); ++r) {
            auto it = by_type[r].find(type);
            n = std::min(n, it == by_type[r].end() ? size_t{0} : it->second.size());
        }
        for (size_t k = 0; k < n; ++k) {
            std::vector<size_t> row(work.size());
            for (size_t r = 0; r < work.size(); ++r) row[r] = by_type[r].at(type)[k];
            matched.push_back(std::move(row));
        }
    }
    return matched;
}

} // namespace

RankInput rankInputOf(const Trace& trace, int fallback_rank) {
    RankInput in;
    in.trace = &trace;
    in.rank = fallback_rank;
    if (auto it = trace.metadata.find("rank"); it != trace.metadata.end()) {
        try {
            in.rank = std::stoi(it->second);
        } catch (const std::exception&) {
            throw InputError(trace.source + ": rank \"" + it->second + "\" is not a number");
        }
    }
    if (auto it = trace.metadata.find("host"); it != trace.metadata.end()) in.host = it->second;
    return in;
}

MultiRankAnalysis analyzeRanks(std::vector<RankInput> inputs, const Taxonomy& taxonomy) {
    if (inputs.size() < 2) throw InputError("a multi-rank analysis needs the traces of two or more ranks");
    std::sort(inputs.begin(), inputs.end(), [](const RankInput& a, const RankInput& b) { return a.rank < b.rank; });
    for (size_t r = 1; r < inputs.size(); ++r)
        if (inputs[r].rank == inputs[r - 1].rank)
            throw InputError("rank " + std::to_string(inputs[r].rank) + " is given twice (" + inputs[r - 1].trace->source +
                             ", " + inputs[r].trace->source + ")");

    const size_t n = inputs.size();
    std::vector<RankWork> work;
    for (const auto& in : inputs) work.push_back(split(*in.trace, taxonomy));
    auto matched = matchCollectives(work);

    MultiRankAnalysis out;
    out.matched_collectives = matched.size();
    out.ranks.resize(n);

    // Clocks: ranks on one host share a clock. Across hosts a collective ends at nearly the same
    // moment on every rank, so the median difference of matched ends estimates each offset.
    bool one_host = std::all_of(inputs.begin(), inputs.end(),
                                [&](const RankInput& in) { return !in.host.empty() && in.host == inputs[0].host; });
    std::vector<int64_t> offset(n, 0);
    if (!one_host && !matched.empty()) {
        out.clocks_aligned = true;
        for (size_t r = 1; r < n; ++r) {
            std::vector<int64_t> d;
            for (const auto& row : matched) d.push_back(work[r].collectives[row[r]].end_ns - work[0].collectives[row[0]].end_ns);
            offset[r] = median(std::move(d));
        }
    }

    std::vector<double> mean_step_ms(n, 0.0);
    for (size_t r = 0; r < n; ++r) {
        RankStats& s = out.ranks[r];
        s.rank = inputs[r].rank;
        s.host = inputs[r].host;
        s.clock_offset_ns = offset[r];
        const std::vector<Step> steps = detectSteps(*inputs[r].trace);
        s.steps = std::max<size_t>(1, steps.size());
        for (const Step& st : steps) mean_step_ms[r] += (st.end_ns - st.start_ns) / 1e6 / static_cast<double>(steps.size());
        // A step range can end before its GPU work does (a job that synchronises after it): the
        // time from one step's start to the next's counts that too.
        if (steps.size() >= 2)
            mean_step_ms[r] = std::max(mean_step_ms[r], (steps.back().start_ns - steps.front().start_ns) / 1e6 / static_cast<double>(steps.size() - 1));
        s.step_ms = mean_step_ms[r];
        s.collectives = work[r].collectives.size();
        s.compute_busy_ns = totalLength(work[r].compute);
        s.comm_ns = totalLength(work[r].comm);
        s.overlap_ns = overlapLength(work[r].comm, work[r].compute);
        s.exposed_comm_ns = s.comm_ns - s.overlap_ns;
    }

    // Arrival at each matched collective (aligned): the last to arrive is waited on by the rest.
    for (const auto& row : matched) {
        std::vector<int64_t> arrive(n);
        for (size_t r = 0; r < n; ++r) arrive[r] = work[r].collectives[row[r]].start_ns - offset[r];
        std::vector<int64_t> sorted = arrive;
        std::sort(sorted.begin(), sorted.end());
        int64_t last = sorted[n - 1], second = sorted[n - 2];
        for (size_t r = 0; r < n; ++r) {
            out.ranks[r].wait_ns += last - arrive[r];
            if (arrive[r] == last) out.ranks[r].late_ns += last - second; // what every other rank waited for it alone
        }
    }

    // A straggler stands out: it holds most of the lateness and costs the others at least 1% of
    // their step time.
    if (!matched.empty()) {
        size_t worst = 0;
        int64_t total_late = 0;
        for (size_t r = 0; r < n; ++r) {
            total_late += out.ranks[r].late_ns;
            if (out.ranks[r].late_ns > out.ranks[worst].late_ns) worst = r;
        }
        const RankStats& w = out.ranks[worst];
        double per_step_ms = w.late_ns / 1e6 / static_cast<double>(w.steps);
        if (w.late_ns > 0 && w.late_ns * 2 > total_late && per_step_ms >= 0.01 * mean_step_ms[worst]) {
            out.straggler = w.rank;
            out.straggler_delay_ms_per_step = per_step_ms;
        }
    }

    int64_t total = 0;
    size_t heaviest = 0;
    for (size_t r = 0; r < n; ++r) {
        total += out.ranks[r].compute_busy_ns;
        if (out.ranks[r].compute_busy_ns > out.ranks[heaviest].compute_busy_ns) heaviest = r;
    }
    if (total > 0) {
        out.heaviest_rank = out.ranks[heaviest].rank;
        out.imbalance = out.ranks[heaviest].compute_busy_ns * static_cast<double>(n) / static_cast<double>(total) - 1.0;
    }
    return out;
}

Trace mergeRanks(const std::vector<RankInput>& inputs, const MultiRankAnalysis& analysis) {
    std::vector<const RankInput*> order;
    for (const auto& in : inputs) order.push_back(&in);
    std::sort(order.begin(), order.end(), [](const RankInput* a, const RankInput* b) { return a->rank < b->rank; });
    Trace m;
    m.format = "ranks";
    m.source = fmt::format("{} ranks", order.size());
    m.metadata["ranks"] = std::to_string(order.size());
    std::map<std::pair<int, int32_t>, int32_t> device_of; // (rank, device) -> merged device
    for (size_t k = 0; k < order.size(); ++k) {
        const RankInput& in = *order[k];
        const Trace& t = *in.trace;
        int64_t offset = 0;
        for (const RankStats& s : analysis.ranks)
            if (s.rank == in.rank) offset = s.clock_offset_ns;
        // Ids of different ranks must not meet: each rank's ids move to a range of their own.
        const int64_t id_base = int64_t(k + 1) << 44;
        auto id = [&](int64_t v) { return v == 0 ? 0 : v + id_base; };
        std::vector<StringId> str(t.strings.size());
        for (size_t i = 0; i < str.size(); ++i) str[i] = m.strings.intern(t.strings.view(StringId{uint32_t(i)}));
        std::vector<uint32_t> thread(t.threads.size());
        for (size_t i = 0; i < t.threads.size(); ++i) {
            const Thread& th = t.threads[i];
            thread[i] = m.threadIndex((int64_t(k) << 32) | th.pid, th.tid);
            const std::string name = th.name.value ? std::string(t.str(th.name)) : "thread " + std::to_string(th.tid);
            m.threads[thread[i]].name = m.strings.intern(fmt::format("rank {} · {}", in.rank, name));
        }
        auto device = [&](int32_t d) {
            auto [it, added] = device_of.try_emplace({in.rank, d}, int32_t(device_of.size()));
            if (added) {
                m.metadata["device_label." + std::to_string(it->second)] = fmt::format("rank {} · GPU {}", in.rank, d);
                for (const DeviceInfo& info : t.devices)
                    if (info.id == d) {
                        m.devices.push_back(info);
                        m.devices.back().id = it->second;
                    }
            }
            return it->second;
        };
        // Onto rank 0's clock, ids into this rank's range, names into the merged table.
        auto place = [&](auto& e) {
            e.name = str[e.name.value];
            e.start_ns -= offset;
            e.end_ns -= offset;
            e.external_id = id(e.external_id);
            e.correlation = id(e.correlation);
        };
        for (CpuEvent e : t.cpu) {
            place(e);
            e.input_dims = str[e.input_dims.value];
            e.input_types = str[e.input_types.value];
            e.thread = thread[e.thread];
            m.cpu.push_back(e);
        }
        for (GpuEvent g : t.gpu) {
            place(g);
            g.device = device(g.device);
            m.gpu.push_back(g);
        }
        for (Collective c : t.collectives) {
            c.op_id = id(c.op_id);
            for (StringId* s : {&c.name, &c.dtype, &c.group_name, &c.group_desc}) *s = str[s->value];
            m.collectives.push_back(c);
        }
        for (OverheadSpan o : t.overhead) {
            o.name = str[o.name.value];
            o.start_ns -= offset;
            o.end_ns -= offset;
            m.overhead.push_back(o);
        }
        m.quality += t.quality;
    }
    return m;
}

std::map<std::string, double> rankMetrics(const MultiRankAnalysis& a) {
    std::map<std::string, double> v;
    const double n = double(std::max<size_t>(1, a.ranks.size()));
    double step_ms = 0, compute_ms = 0, heaviest_ms = 0;
    for (const RankStats& r : a.ranks) {
        step_ms += r.step_ms / n;
        const double per_step = r.compute_busy_ns / 1e6 / double(std::max<size_t>(1, r.steps));
        compute_ms += per_step / n;
        if (r.rank == a.heaviest_rank) heaviest_ms = per_step;
    }
    v["ranks.count"] = double(a.ranks.size());
    v["step.time_ms"] = step_ms;
    v["ranks.straggler"] = a.straggler;
    v["ranks.straggler_delay_ms"] = a.straggler >= 0 ? a.straggler_delay_ms_per_step : 0.0;
    v["ranks.straggler_delay_pct"] = step_ms > 0 ? 100.0 * v["ranks.straggler_delay_ms"] / step_ms : 0.0;
    v["ranks.heaviest"] = a.heaviest_rank;
    v["ranks.imbalance_pct"] = 100.0 * a.imbalance;
    v["ranks.excess_compute_ms"] = a.heaviest_rank >= 0 ? heaviest_ms - compute_ms : 0.0;
    return v;
}

} // namespace sightline
