// `sightline report` as aligned text (the default) and as Markdown (for CI job summaries).
#include "sightline/report/format_tables.h"
#include "sightline/report/report.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace sightline {

namespace {
std::string fileName(const std::string& source) { return std::filesystem::path(source).filename().string(); }

// Wraps a paragraph at `width` columns, every line after the first indented by `indent`.
std::string wrap(const std::string& text, size_t width, const std::string& indent) {
    std::string out, line;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find(' ', pos);
        if (end == std::string::npos) end = text.size();
        const std::string word = text.substr(pos, end - pos);
        pos = end + 1;
        if (!line.empty() && line.size() + 1 + word.size() > width) {
            out += line + "\n" + indent;
            line.clear();
        }
        line += (line.empty() ? "" : " ") + word;
    }
    return out + line;
}

constexpr const char* kOverlapNote = "Savings are estimated one rule at a time; rules that share a cause overlap, so they do not add up.";
constexpr const char* kMinorTitle = "Minor findings ({}, each worth under 1% of the step)";

size_t majorCount(const std::vector<Finding>& findings) {
    return size_t(std::count_if(findings.begin(), findings.end(), [](const Finding& f) { return !f.minor; }));
}
// The fixes replayed together (--combine), one sentence.
std::string combinedLine(const CombinedSaving& c) {
    std::string names;
    for (size_t i = 0; i < c.rules.size(); ++i) names += (i ? (i + 1 == c.rules.size() ? " and " : ", ") : "") + c.rules[i];
    std::string out = c.rules.empty() ? std::string("Together: none of the rules asked for fires here with a replayed fix")
                                      : fmt::format("Together: the fixes of {} replayed at once save about {:.2f} ms a step ({:.1f}%)",
                                                    names, c.saving_ms, c.saving_pct);
    if (!c.left_out.empty()) out += fmt::format("; left out (not firing, or priced by a formula): {}", fmt::join(c.left_out, ", "));
    return out + '.';
}

} // namespace

std::string findingsText(const std::vector<Finding>& findings) {
    const size_t major = majorCount(findings);
    std::string out = fmt::format("Findings ({})\n", major);
    if (major == 0)
        out += findings.empty() ? "  none: no rule fired\n" : "  none worth 1% of the step or more\n";
    for (const auto& block : findingBlocks(findings, false)) {
        out += "- " + block[0] + '\n';
        for (size_t i = 1; i < block.size(); ++i)
            out += "    " + wrap(block[i], 96, "      ") + '\n';
    }
    if (major > 1)
        out += std::string("  ") + kOverlapNote + '\n';
    const std::vector<std::string> minor = minorFindingLines(findings, false);
    if (!minor.empty()) {
        out += '\n' + fmt::format(kMinorTitle, minor.size()) + '\n';
        for (const std::string& l : minor) out += "- " + wrap(l, 96, "    ") + '\n';
    }
    return out;
}

std::string formatText(const Report& r, const ReportOptions& o) {
    std::string out = fmt::format("Sightline report: {} ({})\n", fileName(r.source), r.format);
    if (const std::string hw = hwTitleLine(r); !hw.empty()) out += hw + '\n';
    for (const std::string& l : summaryLines(r))
        out += l + '\n';
    out += '\n' + findingsText(r.findings);
    if (r.combined) out += wrap(combinedLine(*r.combined), 100, "  ") + '\n';
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
    if (const std::string hw = hwTitleLine(r); !hw.empty()) out += "**" + hw + "**\n\n";
    for (const std::string& l : summaryLines(r))
        out += "- " + l + '\n';
    const size_t major = majorCount(r.findings);
    out += fmt::format("\n### Findings ({})\n\n", major);
    if (major == 0)
        out += r.findings.empty() ? "No rule fired.\n" : "None worth 1% of the step or more.\n";
    for (const auto& block : findingBlocks(r, true)) {
        out += "- " + block[0] + "  \n";
        for (size_t i = 1; i < block.size(); ++i)
            out += "  " + block[i] + (i + 1 < block.size() ? "  \n" : "\n");
    }
    if (major > 1)
        out += std::string("\n") + kOverlapNote + '\n';
    if (r.combined) out += '\n' + combinedLine(*r.combined) + '\n';
    const std::vector<std::string> minor = minorFindingLines(r.findings, true);
    if (!minor.empty()) {
        out += "\n#### " + fmt::format(kMinorTitle, minor.size()) + "\n\n";
        for (const std::string& l : minor) out += "- " + l + '\n';
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

std::string summaryText(const Trace& trace) {
    ReportOptions ro;
    ro.op_rows = 10;
    ro.class_rows = 10;
    ro.kernel_rows = 5;
    return formatText(buildReport(trace, Taxonomy::builtin(), RuleSet::builtin(), ro), ro);
}

} // namespace sightline
