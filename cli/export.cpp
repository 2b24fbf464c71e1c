#include "export.h"

#include "progress.h"
#include "sightline/report/report.h"
#include "sightline/chrome_export.h"
#include "sightline/error.h"
#include "sightline/taxonomy.h"
#include "sightline/trace_db.h"

#include <cstdio>

#include <fmt/format.h>

namespace sightline {

namespace {

bool hasCpuOps(const Trace& trace) {
    for (const CpuEvent& e : trace.cpu)
        if (e.kind == CpuKind::Op || e.kind == CpuKind::UserAnnotation) return true;
    return false;
}

std::string percent(int64_t part, int64_t whole) {
    return whole > 0 ? fmt::format("{:.1f}%", 100.0 * double(part) / double(whole)) : "-";
}

// A marker at each step's start, and the findings at the start of the first steady step (they
// describe the steady state).
std::vector<ExportMarker> markersOf(const Report& report) {
    std::vector<ExportMarker> out;
    const Metrics& m = report.metrics;
    for (const StepMetrics& s : m.steps) {
        out.push_back({s.step.start_ns, s.step.name, "step", {{"step time", formatDuration(s.time_ns)}, {"GPU busy", percent(s.gpu_busy_ns, s.time_ns)}, {"kernels", std::to_string(s.kernels)}, {"found by", toString(s.step.source)}}});
    }
    if (m.steps.empty()) return out;
    const int64_t at = m.steps[m.steady.empty() ? 0 : m.steady.front()].step.start_ns;
    for (const Finding& f : report.findings) {
        out.push_back({at, f.title, "finding", {{"rule", f.rule}, {"severity", toString(f.severity)}, {"message", f.message}, {"saving", fmt::format("{:.2f} ms a step ({:.1f}%)", f.saving_ms, f.saving_pct)}, {"fix", f.fix}}});
    }
    return out;
}

} // namespace

int exportTrace(const Trace& trace, const std::string& trace_path, const std::string& output, const RuleSet& rules) {
    if (trace.eventCount() == 0 && trace.counters.empty())
        throw InputError(fmt::format("{}: the trace holds no events to export", trace_path));
    std::vector<ExportMarker> markers;
    size_t steps = 0, findings = 0;
    if (hasCpuOps(trace)) {
        const Report report = buildReport(trace, opTreeOf(trace, trace_path), Taxonomy::builtin(), rules, ReportOptions{});
        markers = markersOf(report);
        steps = report.metrics.steps.size();
        findings = report.findings.size();
    } else {
        std::fprintf(stderr, "sightline: the trace has no CPU ops: steps and findings are not marked\n");
    }
    ProgressBar bar("exporting");
    const ExportStats st = exportChromeTrace(trace, output, markers, [&](double f) { bar.update(f); });
    bar.finish();
    fmt::print(stderr, "sightline: wrote {}: {} events, {} arrows, {} counter samples, {} steps and {} findings marked ({:.1f} MB)\n",
               output == "-" ? "standard output" : output, st.events, st.flows, st.counters, steps, findings,
               double(st.bytes) / 1e6);
    if (st.clamped_durations)
        fmt::print(stderr, "sightline: {} negative durations written as zero\n", st.clamped_durations);
    return 0;
}

} // namespace sightline
