#pragma once
// The report: what `sightline report` prints, built once and written as text, Markdown or JSON.
#include "sightline/comms.h"
#include "sightline/metrics.h"
#include "sightline/op_tree.h"
#include "sightline/rules.h"
#include "sightline/tables.h"
#include "sightline/trace.h"

#include <optional>
#include <string>
#include <vector>

namespace sightline {

inline constexpr int kReportJsonVersion = 1; // docs/report-json.md

struct ReportOptions {
    size_t op_rows = 25; // 0 = all
    size_t class_rows = 20;
    size_t kernel_rows = 15;
    OpSort op_sort = OpSort::SelfCpu;
    GpuSort gpu_sort = GpuSort::Total;
    // Which events the tables cover: all (empty), "steady" (the steady-state steps), or a step
    // number (1-based, in the order the steps were found).
    std::string step;
    // Rule ids whose fixes the report replays together (Report::combined); none when empty.
    std::vector<std::string> combine;
};

struct Report {
    std::string source;
    std::string format;
    std::vector<DeviceInfo> devices;
    std::map<std::string, std::string> metadata;
    uint64_t cpu_ops = 0, user_annotations = 0, api_calls = 0;
    uint64_t kernels = 0, memcpys = 0, memsets = 0, gpu_annotations = 0;
    int64_t span_ns = 0; // first to last event
    Tables tables;
    std::string tables_scope = "whole trace"; // what the tables cover
    std::vector<CommRow> comms;               // torch.distributed collectives, same scope as the tables
    DataQuality quality;
    LinkStats links; // from the op tree
    Metrics metrics;
    std::vector<Finding> findings;
    std::optional<CombinedSaving> combined; // with ReportOptions::combine
};

Report buildReport(const Trace& trace, const Taxonomy& taxonomy, const RuleSet& rules, const ReportOptions& options);
// The same with the op tree already built (buildOpTree(trace)).
Report buildReport(const Trace& trace, const OpTree& tree, const Taxonomy& taxonomy, const RuleSet& rules,
                   const ReportOptions& options);

std::string formatText(const Report& report, const ReportOptions& options);
// The short text report `sightline run` and `attach` print: built-in rules, 10 ops, 10 kernel
// classes, 5 kernels.
std::string summaryText(const Trace& trace);
std::string formatMarkdown(const Report& report, const ReportOptions& options);
std::string formatJson(const Report& report, const ReportOptions& options);
std::string formatSarif(const Report& report);

// "127.566ms", "6.791us", "1.234s": PyTorch's table style.
std::string formatDuration(int64_t ns);

} // namespace sightline
