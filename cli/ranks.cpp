#include "ranks.h"

#include "sightline/error.h"
#include "sightline/import.h"
#include "sightline/ranks.h"
#include "sightline/taxonomy.h"
#include "sightline/trace_db.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace sightline {
namespace fs = std::filesystem;

namespace {

bool isTraceFile(const fs::path& p) {
    std::string name = p.filename().string();
    return name.ends_with(".json") || name.ends_with(".json.gz") || name.ends_with(".slcap") || name.ends_with(".db");
}

std::vector<std::string> expand(const std::vector<std::string>& inputs) {
    if (inputs.size() != 1 || !fs::is_directory(inputs[0])) return inputs;
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(inputs[0]))
        if (e.is_regular_file() && isTraceFile(e.path())) files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    if (files.empty()) throw InputError(inputs[0] + ": no traces (.json, .json.gz, .slcap, .db) in this directory");
    return files;
}

double ms(int64_t ns) { return ns / 1e6; }

// Compute more than this far above the mean on one rank is called unbalanced work.
constexpr double kUnbalanced = 0.10;

std::string text(const MultiRankAnalysis& a) {
    std::string out = fmt::format("Ranks: {}   collectives matched on every rank: {}   clocks: {}\n\n", a.ranks.size(),
                                  a.matched_collectives, a.clocks_aligned ? "aligned on the collectives (hosts differ or are not recorded)" : "one host, shared");
    out += fmt::format("{:>4}  {:<16} {:>5} {:>11} {:>13} {:>10} {:>12} {:>13} {:>10} {:>12}\n", "rank", "host", "steps",
                       "collectives", "compute (ms)", "comm (ms)", "overlap (ms)", "exposed (ms)", "wait (ms)", "offset (ms)");
    for (const auto& r : a.ranks)
        out += fmt::format("{:>4}  {:<16} {:>5} {:>11} {:>13.3f} {:>10.3f} {:>12.3f} {:>13.3f} {:>10.3f} {:>12.3f}\n", r.rank,
                           r.host.empty() ? "-" : r.host, r.steps, r.collectives, ms(r.compute_busy_ns), ms(r.comm_ns),
                           ms(r.overlap_ns), ms(r.exposed_comm_ns), ms(r.wait_ns), ms(r.clock_offset_ns));
    out += "\n";
    if (a.straggler >= 0)
        out += fmt::format("Straggler: rank {} reaches the collectives last, {:.3f} ms a step after all the others; they wait for it.\n"
                           "  fix: look at what rank {} does before its collectives that the others do not: more tokens in its\n"
                           "  batches (balance by tokens, not by sequences), a slower data loader, host work only it runs\n"
                           "  (logging, checkpointing on rank {}), or a slower GPU or link (compare its kernel times).\n"
                           "  saving: up to {:.3f} ms a step for every other rank.\n",
                           a.straggler, a.straggler_delay_ms_per_step, a.straggler, a.straggler, a.straggler_delay_ms_per_step);
    else
        out += "Straggler: none (no rank holds the others back by 1% of a step or more).\n";
    if (a.heaviest_rank >= 0) {
        out += fmt::format("Compute balance: rank {} has the most compute, {:.1f}% above the mean.\n", a.heaviest_rank,
                           100.0 * a.imbalance);
        if (a.imbalance >= kUnbalanced)
            out += "  unbalanced work: the ranks do unequal work, and every collective waits for the heaviest.\n"
                   "  fix: give every rank the same number of tokens a step (a token-budget or length-grouped sampler,\n"
                   "  packing), and the same model work (no rank-only evaluation or logging inside the step).\n";
    }
    return out;
}

std::string json(const MultiRankAnalysis& a) {
    nlohmann::json doc = {{"matched_collectives", a.matched_collectives}, {"clocks_aligned", a.clocks_aligned},
                          {"straggler", a.straggler}, {"straggler_delay_ms_per_step", a.straggler_delay_ms_per_step},
                          {"heaviest_rank", a.heaviest_rank}, {"imbalance", a.imbalance},
                          {"unbalanced", a.heaviest_rank >= 0 && a.imbalance >= kUnbalanced}};
    nlohmann::json& ranks = doc["ranks"] = nlohmann::json::array();
    for (const auto& r : a.ranks)
        ranks.push_back({{"rank", r.rank}, {"host", r.host}, {"steps", r.steps}, {"collectives", r.collectives},
                         {"compute_ms", ms(r.compute_busy_ns)}, {"comm_ms", ms(r.comm_ns)}, {"overlap_ms", ms(r.overlap_ns)},
                         {"exposed_comm_ms", ms(r.exposed_comm_ns)}, {"wait_ms", ms(r.wait_ns)},
                         {"clock_offset_ms", ms(r.clock_offset_ns)}});
    return doc.dump(2) + "\n";
}

} // namespace

std::string ranksReport(const std::vector<std::string>& inputs, const std::string& format, const std::string& merged) {
    std::vector<std::string> files = expand(inputs);
    std::vector<Trace> traces;
    traces.reserve(files.size());
    for (const auto& f : files) traces.push_back(importTrace(f));
    std::vector<RankInput> ranks;
    for (size_t i = 0; i < traces.size(); ++i) ranks.push_back(rankInputOf(traces[i], static_cast<int>(i)));
    MultiRankAnalysis a = analyzeRanks(ranks, Taxonomy::builtin());
    if (!merged.empty()) {
        const Trace m = mergeRanks(ranks, a);
        writeTraceDb(m, merged);
        std::fprintf(stderr, "sightline: wrote %s (%zu ranks on one timeline: %zu CPU events, %zu GPU activities)\n",
                     merged.c_str(), ranks.size(), m.cpu.size(), m.gpu.size());
    }
    return format == "json" ? json(a) : text(a);
}

} // namespace sightline
