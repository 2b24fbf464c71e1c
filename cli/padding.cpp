#include "padding.h"

#include "sightline/report/table_writer.h"
#include "sightline/error.h"
#include "sightline/import.h"
#include "sightline/padding_sim.h"
#include "sightline/tables.h"
#include "sightline/taxonomy.h"
#include "sightline/trace_db.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace sightline {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::ifstream openText(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw InputError(fmt::format("{}: cannot open", path));
    return in;
}

// Integers separated by white space or commas.
std::vector<int64_t> readLengths(const std::string& path) {
    std::ifstream in = openText(path);
    std::vector<int64_t> out;
    std::string word;
    size_t line = 1;
    for (char c; in.get(c);) {
        const bool sep = std::isspace(static_cast<unsigned char>(c)) || c == ',';
        if (!sep) word += c;
        if ((sep || in.peek() == EOF) && !word.empty()) {
            int64_t n = 0;
            const auto [p, ec] = std::from_chars(word.data(), word.data() + word.size(), n);
            if (ec != std::errc() || p != word.data() + word.size() || n <= 0)
                throw InputError(fmt::format("{}:{}: '{}' is not a sequence length (a positive whole number)", path, line, word));
            out.push_back(n);
            word.clear();
        }
        line += c == '\n';
    }
    return out;
}

// One example a line: its "input_ids" list, or a number in "length", "num_tokens", "n_tokens",
// "seq_len" or "len".
std::vector<int64_t> readJsonl(const std::string& path) {
    std::ifstream in = openText(path);
    std::vector<int64_t> out;
    std::string text;
    for (size_t line = 1; std::getline(in, text); ++line) {
        if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
        const json j = json::parse(text, nullptr, false);
        if (j.is_discarded() || !j.is_object()) throw InputError(fmt::format("{}:{}: not a JSON object", path, line));
        if (auto it = j.find("input_ids"); it != j.end() && it->is_array()) {
            out.push_back(int64_t(it->size()));
            continue;
        }
        bool found = false;
        for (const char* key : {"length", "num_tokens", "n_tokens", "seq_len", "len"})
            if (auto it = j.find(key); it != j.end() && it->is_number_integer() && it->get<int64_t>() > 0) {
                out.push_back(it->get<int64_t>());
                found = true;
                break;
            }
        if (!found)
            throw InputError(fmt::format("{}:{}: no \"input_ids\" list and no length field (length, num_tokens, n_tokens, "
                                         "seq_len, len): tokenise the dataset first",
                                         path, line));
    }
    return out;
}

Metrics metricsOfTrace(const std::string& path) {
    const Trace t = importTrace(path);
    requireReportable(t);
    return computeMetrics(t, opTreeOf(t, path), Taxonomy::builtin());
}

bool isTraceInput(const std::string& path) {
    if (path.ends_with(".jsonl")) return false;
    std::ifstream in = openText(path);
    char c = 0;
    while (in.get(c) && std::isspace(static_cast<unsigned char>(c))) {}
    return !std::isdigit(static_cast<unsigned char>(c));
}

struct Input {
    std::vector<SimBatch> recorded;
    std::vector<int64_t> lengths;
    std::optional<CostModel> cost;
    std::optional<Metrics> metrics;
    bool approximate = false;
    std::string what;
};

Input load(const PaddingOptions& o) {
    Input in;
    if (isTraceInput(o.input)) {
        in.metrics = metricsOfTrace(o.input);
        in.recorded = recordedBatches(*in.metrics, &in.approximate);
        if (in.recorded.empty())
            throw InputError(fmt::format("{}: no recorded batches (sightline.batch annotations): run the job under sightline run, "
                                         "whose Python adapter records them, or annotate each batch (docs/metrics.md)",
                                         o.input));
        for (const SimBatch& b : in.recorded) in.lengths.insert(in.lengths.end(), b.lengths.begin(), b.lengths.end());
        in.cost = fitCostModel(*in.metrics);
        in.what = in.approximate ? "the trace's recorded batches (some without lengths: approximated from their counts)"
                                 : "the trace's recorded batches";
    } else {
        in.lengths = o.input.ends_with(".jsonl") ? readJsonl(o.input) : readLengths(o.input);
        if (in.lengths.empty()) throw InputError(fmt::format("{}: no sequences", o.input));
        in.what = o.input.ends_with(".jsonl") ? "the JSONL dataset" : "the lengths file";
    }
    if (!o.costs.empty()) in.cost = fitCostModel(metricsOfTrace(o.costs));
    return in;
}

std::string costLine(const std::optional<CostModel>& c, const std::string& costs) {
    if (!c) return costs.empty() ? "Costs: none (give --costs TRACE to price the batchings with a trace's measured step costs)\n"
                                 : "Costs: the trace has no steady steps with recorded batches to fit them on\n";
    const std::string fixed = c->chunk_loop
        ? fmt::format("{:.3f} ms a step of the chunk loop over each batch's longest row ({} positions a step){}", c->per_chunk_ms, kLoopChunk,
                      c->per_batch_fitted ? "" : " (its steps varied too little to tell its cost)")
        : fmt::format("{:.3f} ms a batch{}", c->per_batch_ms,
                      c->per_batch_fitted ? "" : " (tokens per batch varied too little to tell a batch's own cost)");
    return fmt::format("Costs: {:.3f} us a padded token, {}, optimizer {:.3f} ms a step, {:.2f} batches a step (fitted on {} steady steps)\n",
                       c->per_token_ms * 1e3, fixed, c->per_step_ms, c->batches_per_step, c->steps);
}

std::string text(const Input& in, const std::vector<BatchingResult>& rows, int64_t budget, const PaddingOptions& o) {
    std::string out = fmt::format("Batching simulator: {} sequences from {}, budget {} tokens a batch\n", in.lengths.size(),
                                  in.what, budget);
    out += costLine(in.cost, o.costs) + "\n";
    const double base = rows.empty() ? NAN : rows.front().tokens_per_s;
    TextTable t;
    t.columns = {{"batching", false}, {"batches"}, {"sequences"}, {"real tokens"}, {"padded tokens"}, {"efficiency"}, {"predicted s"}, {"real tokens/s"}, {"speed-up"}};
    for (const BatchingResult& r : rows) {
        t.rows.push_back({toString(r.batching), withThousands(r.batches), withThousands(r.sequences),
                          withThousands(uint64_t(r.real)), withThousands(uint64_t(r.padded)), percent(r.efficiency()),
                          std::isnan(r.seconds) ? "-" : fmt::format("{:.2f}", r.seconds),
                          std::isnan(r.tokens_per_s) ? "-" : fmt::format("{:.0f}", r.tokens_per_s),
                          std::isnan(r.tokens_per_s) ? "-" : fmt::format("{:.2f}x", r.tokens_per_s / base)});
    }
    out += t.renderText();
    if (rows.size() > 1 && rows[1].truncated)
        out += fmt::format("\n{} sequences longer than the budget were cut to it in the simulated batchings.\n", rows[1].truncated);
    return out;
}

json batchesJson(const Metrics& m) {
    json out = json::array();
    std::vector<uint8_t> steady(m.steps.size(), 0);
    for (size_t i : m.steady) steady[i] = 1;
    for (size_t s = 0; s < m.steps.size(); ++s)
        for (const BatchRecord& b : m.steps[s].batches) {
            auto num = [](double v) { return std::isnan(v) ? json(nullptr) : json(v); };
            out.push_back({{"step", s + 1}, {"steady", steady[s] == 1}, {"real_tokens", num(b.real)}, {"padded_tokens", num(b.padded)}, {"sequences", num(b.sequences)}, {"ignored_tokens", num(b.ignored)}, {"packed", b.packed}, {"boundaries", b.boundaries}, {"cu_seqlens", b.cu_seqlens}, {"seq_idx", b.seq_idx}, {"by_adapter", b.automatic}, {"lengths", b.lengths}});
        }
    return out;
}

std::string jsonText(const Input& in, const std::vector<BatchingResult>& rows, int64_t budget) {
    auto num = [](double v) { return std::isnan(v) ? json(nullptr) : json(v); };
    json doc = {{"sightline_padding", 1}, {"budget", budget}, {"sequences", in.lengths.size()}, {"approximate_lengths", in.approximate}};
    doc["cost_model"] = in.cost ? json{{"per_token_us", in.cost->per_token_ms * 1e3}, {"per_batch_ms", in.cost->per_batch_ms}, {"chunk_loop", in.cost->chunk_loop}, {"per_chunk_step_ms", in.cost->per_chunk_ms}, {"per_step_ms", in.cost->per_step_ms}, {"batches_per_step", in.cost->batches_per_step}, {"steps", in.cost->steps}, {"per_batch_fitted", in.cost->per_batch_fitted}}
                                : json(nullptr);
    json list = json::array();
    for (const BatchingResult& r : rows)
        list.push_back({{"batching", toString(r.batching)}, {"batches", r.batches}, {"sequences", r.sequences}, {"real_tokens", r.real}, {"padded_tokens", r.padded}, {"efficiency", num(r.efficiency())}, {"truncated", r.truncated}, {"seconds", num(r.seconds)}, {"tokens_per_s", num(r.tokens_per_s)}});
    doc["batchings"] = std::move(list);
    if (in.metrics) doc["recorded_batches"] = batchesJson(*in.metrics);
    return doc.dump(2) + "\n";
}

} // namespace

std::string paddingReport(const PaddingOptions& o) {
    if (o.budget < 0) throw InputError("--budget: give a positive number of tokens");
    const Input in = load(o);
    const int64_t budget = o.budget > 0 ? o.budget : largestBatch(in.recorded);
    if (budget <= 0)
        throw InputError(fmt::format("{}: give --budget TOKENS (a dataset has no recorded batches to take it from)", o.input));
    const std::vector<BatchingResult> rows = compareBatchings(in.recorded, in.lengths, budget, in.cost, o.seed);
    return o.format == "json" ? jsonText(in, rows, budget) : text(in, rows, budget, o);
}

} // namespace sightline
