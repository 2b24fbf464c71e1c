#pragma once
// The report's sections as TextTables, shared by the text and Markdown writers.
#include "sightline/report/report.h"
#include "sightline/report/table_writer.h"

#include <nlohmann/json_fwd.hpp>

namespace sightline {

struct ReportSection {
    std::string title;
    TextTable table;
};

std::vector<ReportSection> reportSections(const Report& report, const ReportOptions& options, size_t name_width);
std::vector<std::string> summaryLines(const Report& report);
std::vector<std::string> qualityLines(const Report& report);
const char* sortName(OpSort key);
const char* sortName(GpuSort key);

} // namespace sightline

namespace sightline {

// The steps found and their per-step figures.
TextTable stepsTable(const Report& report);
// What the analysis of this trace lacks or cannot trust, a line each (shown under the title).
std::vector<std::string> caveatLines(const Report& report);
// The steady-state metrics as lines of text (no markup).
std::vector<std::string> metricLines(const Report& report);
// Hardware counters (format_hardware.cpp; docs/hardware.md): the line under the title ("GPU busy
// 98.0% · SMs active 61.3% · tensor pipes 9.2%", empty without samples), the sampling status
// lines, the per-step, per-class and per-op sections (none without samples), and their JSON.
std::string hwTitleLine(const Report& report);
std::vector<std::string> hwStatusLines(const Report& report);
void addHardwareSections(const Report& report, const ReportOptions& options, size_t name_width, std::vector<ReportSection>& out);
bool reportHasHardware(const Report& report);
nlohmann::json hardwareJson(const Report& report);

// A finding's first line: severity, title, rule, saving (and its range), reliability.
std::string findingHeadline(const Finding& finding, bool markdown);
// One block of lines per finding that is not minor: headline, message, evidence, fix, saving,
// uncertainty.
std::vector<std::vector<std::string>> findingBlocks(const std::vector<Finding>& findings, bool markdown);
// The minor findings (each worth under 1% of the step), a line each: headline and fix.
std::vector<std::string> minorFindingLines(const std::vector<Finding>& findings, bool markdown);
inline std::vector<std::vector<std::string>> findingBlocks(const Report& report, bool markdown) {
    return findingBlocks(report.findings, markdown);
}
// The findings as plain text: "Findings (N)", then each block, wrapped and indented.
std::string findingsText(const std::vector<Finding>& findings);

} // namespace sightline
