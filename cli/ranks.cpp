#include "ranks.h"

#include "sightline/error.h"
#include "sightline/import.h"
#include "sightline/ranks.h"
#include "sightline/taxonomy.h"
#include "sightline/trace_db.h"
#include "sightline/report/format_tables.h"

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

std::string text(const MultiRankAnalysis& a, const std::vector<Finding>& findings) {
    std::string out = fmt::format("Ranks: {}   collectives matched on every rank: {}   clocks: {}\n\n", a.ranks.size(),
                                  a.matched_collectives, a.clocks_aligned ? "aligned on the collectives (hosts differ or are not recorded)" : "one host, shared");
    out += fmt::format("{:>4}  {:<16} {:>5} {:>11} {:>13} {:>10} {:>12} {:>13} {:>10} {:>12}\n", "rank", "host", "steps",
                       "collectives", "compute (ms)", "comm (ms)", "overlap (ms)", "exposed (ms)", "wait (ms)", "offset (ms)");
    for (const auto& r : a.ranks)
        out += fmt::format("{:>4}  {:<16} {:>5} {:>11} {:>13.3f} {:>10.3f} {:>12.3f} {:>13.3f} {:>10.3f} {:>12.3f}\n", r.rank,
                           r.host.empty() ? "-" : r.host, r.steps, r.collectives, ms(r.compute_busy_ns), ms(r.comm_ns),
                           ms(r.overlap_ns), ms(r.exposed_comm_ns), ms(r.wait_ns), ms(r.clock_offset_ns));
    out += "\n";
    if (a.straggler < 0) out += "Straggler: none (no rank holds the others back by 1% of a step or more).\n";
    if (a.heaviest_rank >= 0)
        out += fmt::format("Compute balance: rank {} has the most compute, {:.1f}% above the mean.\n", a.heaviest_rank,
                           100.0 * a.imbalance);
    out += '\n' + findingsText(findings);
    return out;
}

std::string json(const MultiRankAnalysis& a, const std::vector<Finding>& findings) {
    nlohmann::json doc = {{"matched_collectives", a.matched_collectives}, {"clocks_aligned", a.clocks_aligned}, {"straggler", a.straggler}, {"straggler_delay_ms_per_step", a.straggler_delay_ms_per_step}, {"heaviest_rank", a.heaviest_rank}, {"imbalance", a.imbalance}};
    nlohmann::json& found = doc["findings"] = nlohmann::json::array();
    for (const Finding& f : findings)
        found.push_back({{"rule", f.rule}, {"title", f.title}, {"severity", toString(f.severity)}, {"message", f.message}, {"fix", f.fix}, {"saving_ms", f.saving_ms}, {"saving_pct", f.saving_pct}});
    nlohmann::json& ranks = doc["ranks"] = nlohmann::json::array();
    for (const auto& r : a.ranks)
        ranks.push_back({{"rank", r.rank}, {"host", r.host}, {"steps", r.steps}, {"collectives", r.collectives}, {"compute_ms", ms(r.compute_busy_ns)}, {"comm_ms", ms(r.comm_ns)}, {"overlap_ms", ms(r.overlap_ns)}, {"exposed_comm_ms", ms(r.exposed_comm_ns)}, {"wait_ms", ms(r.wait_ns)}, {"clock_offset_ms", ms(r.clock_offset_ns)}});
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
    // Stragglers and unbalanced work are judged by the rule catalog on the job's figures.
    Metrics m;
    m.values = rankMetrics(a);
    const std::vector<Finding> findings = RuleSet::builtin().evaluate(m);
    return format == "json" ? json(a, findings) : text(a, findings);
}

} // namespace sightline
