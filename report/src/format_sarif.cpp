// `sightline report --format sarif`: findings as SARIF 2.1.0 for code-scanning UIs.
#include "sightline/report/report.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace sightline {

namespace {
const char* sarifLevel(Severity s) {
    switch (s) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
    case Severity::Info: return "note";
    }
    return "none";
}
} // namespace

std::string formatSarif(const Report& r) {
    using nlohmann::json;
    json rules = json::array();
    json results = json::array();
    std::vector<std::string> seen;
    for (const Finding& f : r.findings) {
        if (std::find(seen.begin(), seen.end(), f.rule) == seen.end()) {
            seen.push_back(f.rule);
            rules.push_back({{"id", f.rule},
                             {"name", f.title},
                             {"shortDescription", {{"text", f.title}}},
                             {"fullDescription", {{"text", f.saving_explained}}},
                             {"help", {{"text", f.fix}}},
                             {"defaultConfiguration", {{"level", sarifLevel(f.severity)}}}});
        }
        std::string text = fmt::format("{} Estimated saving: {:.2f} ms a step ({:.1f}%). Fix: {}", f.message, f.saving_ms,
                                       f.saving_pct, f.fix);
        results.push_back({{"ruleId", f.rule},
                           {"level", sarifLevel(f.severity)},
                           {"message", {{"text", text}}},
                           {"locations", json::array({{{"physicalLocation", {{"artifactLocation", {{"uri", r.source}}}}}}})},
                           {"properties", {{"saving_ms", f.saving_ms}, {"saving_pct", f.saving_pct}, {"minor", f.minor}, {"uncertainty", f.uncertainty}, {"unreliable", f.unreliable}}}});
    }
    json doc = {{"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
                {"version", "2.1.0"},
                {"runs", json::array({{{"tool", {{"driver", {{"name", "Sightline"}, {"version", SIGHTLINE_REPORT_VERSION}, {"rules", rules}}}}}, {"results", results}}})}};
    return doc.dump(2) + "\n";
}

} // namespace sightline
