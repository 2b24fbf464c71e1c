// `sightline report` as aligned text (the default) and as Markdown (for CI job summaries).
#include "format_tables.h"
#include "report.h"

#include <filesystem>

#include <fmt/format.h>

namespace sightline {

namespace {
std::string fileName(const std::string& source) { return std::filesystem::path(source).filename().string(); }
} // namespace

std::string formatText(const Report& r, const ReportOptions& o) {
    std::string out = fmt::format("Sightline report: {} ({})\n", fileName(r.source), r.format);
    for (const std::string& l : summaryLines(r))
        out += l + '\n';
    out += fmt::format("\nFindings ({})\n", r.findings.size());
    if (r.findings.empty())
        out += "  none: no rule fired\n";
    for (const auto& block : findingBlocks(r, false)) {
        out += "- " + block[0] + '\n';
        for (size_t i = 1; i < block.size(); ++i)
            out += "    " + block[i] + '\n';
    }
    out += "\nSteps\n" + stepsTable(r).renderText();
    out += "\nSteady state, per step\n";
    for (const std::string& l : metricLines(r))
        out += "  " + l + '\n';
    for (const ReportSection& s : reportSections(r, o, 60)) {
        out += '\n' + s.title + '\n';
        out += s.table.renderText();
    }
    out += "\nData quality\n";
    for (const std::string& l : qualityLines(r))
        out += "  " + l + '\n';
    return out;
}

std::string formatMarkdown(const Report& r, const ReportOptions& o) {
    std::string out = fmt::format("## Sightline report: `{}`\n\n", fileName(r.source));
    for (const std::string& l : summaryLines(r))
        out += "- " + l + '\n';
    out += fmt::format("\n### Findings ({})\n\n", r.findings.size());
    if (r.findings.empty())
        out += "No rule fired.\n";
    for (const auto& block : findingBlocks(r, true)) {
        out += "- " + block[0] + "  \n";
        for (size_t i = 1; i < block.size(); ++i)
            out += "  " + block[i] + (i + 1 < block.size() ? "  \n" : "\n");
    }
    out += "\n### Steps\n\n" + stepsTable(r).renderMarkdown();
    out += "\n### Steady state, per step\n\n";
    for (const std::string& l : metricLines(r))
        out += "- " + l + '\n';
    for (const ReportSection& s : reportSections(r, o, 80)) {
        out += "\n### " + s.title + "\n\n";
        out += s.table.renderMarkdown();
    }
    out += "\n### Data quality\n\n";
    for (const std::string& l : qualityLines(r))
        out += "- " + l + '\n';
    return out;
}

} // namespace sightline
