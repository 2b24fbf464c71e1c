// The report's hardware-counter parts (docs/hardware.md): the title line, the per-step, per-class
// and per-op tables, the sampling status, and their JSON.
#include "sightline/report/format_tables.h"

#include "sightline/hardware.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace sightline {

namespace {

std::string pct(double v) { return std::isnan(v) ? "-" : fmt::format("{:.1f}%", v); }
std::string tbps(double bytes_per_s) { return std::isnan(bytes_per_s) ? "-" : fmt::format("{:.2f} TB/s", bytes_per_s / 1e12); }
double ceilingPct(double bytes_per_s, const Report& r) { return 100.0 * bytes_per_s / dramCeiling(r.metrics.device_name); }

bool hasSamples(const Report& r) {
    for (const StepMetrics& s : r.metrics.steps)
        if (s.hw.known()) return true;
    return !r.metrics.hw.classes.empty();
}

const std::vector<TextTable::Column> kFigureColumns = {{"SMs active"}, {"Warps active"}, {"Tensor pipes"}, {"DRAM"}, {"of ceiling"}};

std::vector<std::string> figureCells(const HwFigures& f, const Report& r) {
    return {pct(f[HwMetric::SmActive]), pct(f[HwMetric::WarpsActive]), pct(f[HwMetric::TensorActive]),
            tbps(f[HwMetric::DramBytesPerS]), pct(ceilingPct(f[HwMetric::DramBytesPerS], r))};
}

// The rows of a breakdown sorted by the time its samples covered (the kernels' time), largest first.
std::vector<std::pair<std::string, HwFigures>> byTime(const std::map<std::string, HwFigures>& m, size_t limit) {
    std::vector<std::pair<std::string, HwFigures>> rows(m.begin(), m.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.covered_ns > b.second.covered_ns; });
    if (limit && rows.size() > limit) rows.resize(limit);
    return rows;
}

ReportSection breakdownSection(const std::string& title, const char* what, const std::map<std::string, HwFigures>& m,
                               const Report& r, size_t limit, size_t name_width) {
    ReportSection s{title, {}};
    s.table.columns = {{what, false, name_width}, {"Kernel time"}};
    s.table.columns.insert(s.table.columns.end(), kFigureColumns.begin(), kFigureColumns.end());
    for (const auto& [name, f] : byTime(m, limit)) {
        std::vector<std::string> row = {name, formatDuration(f.covered_ns)};
        for (std::string& c : figureCells(f, r)) row.push_back(std::move(c));
        s.table.rows.push_back(std::move(row));
    }
    return s;
}

} // namespace

std::string hwTitleLine(const Report& r) {
    const double sm = r.metrics.value("hw.sm_active_pct");
    if (std::isnan(sm)) return {};
    return fmt::format("GPU busy {} · SMs active {} · tensor pipes {}", pct(r.metrics.value("gpu.busy_pct")), pct(sm),
                       pct(r.metrics.value("hw.tensor_pct")));
}

std::vector<std::string> hwStatusLines(const Report& r) {
    std::vector<std::string> lines;
    auto it = r.metadata.find("hw_sampling");
    if (it != r.metadata.end()) lines.push_back("Hardware counters: " + it->second);
    it = r.metadata.find("hw_clock");
    if (it != r.metadata.end() && hasSamples(r)) lines.push_back("Hardware counter clock: " + it->second);
    return lines;
}

void addHardwareSections(const Report& r, const ReportOptions& o, size_t name_width, std::vector<ReportSection>& out) {
    if (!hasSamples(r)) return;
    ReportSection steps{"Hardware counters per step (device-wide, over the step)", {}};
    steps.table.columns = {{"Step", false, 0}, {"Time"}, {"GPU busy"}};
    steps.table.columns.insert(steps.table.columns.end(), kFigureColumns.begin(), kFigureColumns.end());
    for (const StepMetrics& m : r.metrics.steps) {
        std::vector<std::string> row = {m.step.name, formatDuration(m.time_ns),
                                        pct(m.time_ns ? 100.0 * double(m.gpu_busy_ns) / double(m.time_ns) : NAN)};
        for (std::string& c : figureCells(m.hw, r)) row.push_back(std::move(c));
        steps.table.rows.push_back(std::move(row));
    }
    out.push_back(std::move(steps));
    const std::string scope = r.metrics.steady.empty() ? "whole trace" : "steady steps";
    out.push_back(breakdownSection("Hardware counters by kernel class (" + scope + ", over the kernels' time)", "Class",
                                   r.metrics.hw.classes, r, o.class_rows, name_width));
    out.push_back(breakdownSection("Hardware counters by op (" + scope + ", over the kernels each op launched)", "Op",
                                   r.metrics.hw.ops, r, o.op_rows, name_width));
}

nlohmann::json hardwareJson(const Report& r) {
    using nlohmann::json;
    auto num = [](double v) { return std::isnan(v) || std::isinf(v) ? json() : json(v); };
    auto figures = [&](const HwFigures& f, json row) {
        row["sm_active_pct"] = num(f[HwMetric::SmActive]);
        row["warps_active_pct"] = num(f[HwMetric::WarpsActive]);
        row["tensor_pct"] = num(f[HwMetric::TensorActive]);
        row["dram_pct"] = num(f[HwMetric::DramPct]);
        row["dram_tbps"] = num(f[HwMetric::DramBytesPerS] / 1e12);
        row["dram_ceiling_pct"] = num(ceilingPct(f[HwMetric::DramBytesPerS], r));
        return row;
    };
    json hw;
    auto meta = [&](const char* key) { auto it = r.metadata.find(key); return it == r.metadata.end() ? json() : json(it->second); };
    hw["sampling"] = meta("hw_sampling");
    hw["clock"] = meta("hw_clock");
    hw["title_line"] = hwTitleLine(r);
    hw["steps"] = json::array();
    for (const StepMetrics& m : r.metrics.steps)
        hw["steps"].push_back(figures(m.hw, {{"name", m.step.name}, {"time_ms", double(m.time_ns) / 1e6}, {"gpu_busy_pct", num(m.time_ns ? 100.0 * double(m.gpu_busy_ns) / double(m.time_ns) : NAN)}, {"covered_ms", double(m.hw.covered_ns) / 1e6}}));
    for (const auto& [key, m] : {std::pair{"kernel_classes", &r.metrics.hw.classes}, std::pair{"ops", &r.metrics.hw.ops}}) {
        hw[key] = json::array();
        for (const auto& [name, f] : byTime(*m, 0))
            hw[key].push_back(figures(f, {{std::string(key) == "ops" ? "op" : "class", name}, {"time_ms", double(f.covered_ns) / 1e6}}));
    }
    return hw;
}

bool reportHasHardware(const Report& r) { return hasSamples(r) || r.metadata.count("hw_sampling"); }

} // namespace sightline
