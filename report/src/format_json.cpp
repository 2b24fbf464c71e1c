// `sightline report --format json`: the versioned contract documented in docs/report-json.md.
#include "sightline/report/format_tables.h"
#include "sightline/report/report.h"

#include <cmath>

#include <nlohmann/json.hpp>

namespace sightline {

namespace {

double us(int64_t ns) { return double(ns) / 1000.0; }
double avgUs(int64_t ns, uint64_t calls) { return calls ? us(ns) / double(calls) : 0.0; }
size_t rowsShown(size_t limit, size_t n) { return limit == 0 ? n : std::min(limit, n); }
// Unknown figures are null in JSON.
nlohmann::json number(double v) { return std::isnan(v) || std::isinf(v) ? nlohmann::json() : nlohmann::json(v); }

// A text field that is null when empty.
nlohmann::json textOrNull(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }

nlohmann::json findingsJson(const std::vector<Finding>& all) {
    using nlohmann::json;
    json findings = json::array();
    for (const Finding& f : all) {
        json evidence = json::array();
        for (const EvidenceRow& e : f.evidence) {
            if (e.kind == EvidenceKind::Metric)
                evidence.push_back({{"kind", toString(e.kind)}, {"name", e.name}, {"value", number(e.value)}});
            else
                evidence.push_back({{"kind", toString(e.kind)}, {"name", e.name}, {"calls_per_step", e.calls}, {"ms_per_step", e.ms}});
        }
        findings.push_back({{"rule", f.rule}, {"severity", toString(f.severity)}, {"title", f.title}, {"message", f.message}, {"saving_ms", f.saving_ms}, {"saving_pct", f.saving_pct}, {"evidence", std::move(evidence)}, {"fix", f.fix}, {"saving_explained", f.saving_explained}, {"unreliable", textOrNull(f.unreliable)}, {"saving_low_ms", number(f.saving_low_ms)}, {"saving_high_ms", number(f.saving_high_ms)}, {"uncertainty", textOrNull(f.uncertainty)}, {"replayed", f.replayed}, {"minor", f.minor}, {"critical_path", textOrNull(f.critical_path)}});
    }
    return findings;
}

} // namespace

std::string formatJson(const Report& r, const ReportOptions& o) {
    using nlohmann::json;
    json doc;
    doc["sightline_report"] = kReportJsonVersion;
    json trace;
    trace["source"] = r.source;
    trace["format"] = r.format;
    trace["span_us"] = us(r.span_ns);
    trace["counts"] = {{"cpu_ops", r.cpu_ops}, {"user_annotations", r.user_annotations}, {"api_calls", r.api_calls}, {"kernels", r.kernels}, {"memcpy", r.memcpys}, {"memset", r.memsets}, {"gpu_annotations", r.gpu_annotations}};
    trace["devices"] = json::array();
    for (const DeviceInfo& d : r.devices)
        trace["devices"].push_back({{"id", d.id}, {"name", d.name}, {"compute_capability", std::to_string(d.compute_major) + "." + std::to_string(d.compute_minor)}, {"sm_count", d.sm_count}, {"total_memory_bytes", d.total_memory}});
    trace["metadata"] = r.metadata;
    doc["trace"] = trace;
    doc["tables_scope"] = r.tables_scope;
    doc["totals"] = {{"self_cpu_us", us(r.tables.self_cpu_total_ns)}, {"gpu_us", us(r.tables.gpu_total_ns)}, {"gpu_activities", r.tables.gpu_activities}};

    json ops = json::array();
    for (size_t i = 0; i < rowsShown(o.op_rows, r.tables.ops.size()); ++i) {
        const OpRow& op = r.tables.ops[i];
        ops.push_back({{"name", op.name}, {"kind", toString(op.kind)}, {"calls", op.calls}, {"self_cpu_us", us(op.self_cpu_ns)}, {"cpu_total_us", us(op.cpu_total_ns)}, {"cpu_avg_us", avgUs(op.cpu_total_ns, op.calls)}, {"self_device_us", us(op.self_device_ns)}, {"device_total_us", us(op.device_total_ns)}});
    }
    doc["ops"] = std::move(ops);
    json classes = json::array();
    for (size_t i = 0; i < rowsShown(o.class_rows, r.tables.kernel_classes.size()); ++i) {
        const GpuRow& g = r.tables.kernel_classes[i];
        classes.push_back({{"class", g.name}, {"family", g.family}, {"calls", g.calls}, {"total_us", us(g.total_ns)}, {"avg_us", avgUs(g.total_ns, g.calls)}, {"min_us", us(g.min_ns)}, {"max_us", us(g.max_ns)}, {"share", g.share}});
    }
    doc["kernel_classes"] = std::move(classes);
    json kernels = json::array();
    for (size_t i = 0; i < rowsShown(o.kernel_rows, r.tables.kernels.size()); ++i) {
        const GpuRow& g = r.tables.kernels[i];
        kernels.push_back({{"name", g.name}, {"class", g.klass}, {"family", g.family}, {"kind", toString(g.kind)}, {"calls", g.calls}, {"total_us", us(g.total_ns)}, {"avg_us", avgUs(g.total_ns, g.calls)}, {"min_us", us(g.min_ns)}, {"max_us", us(g.max_ns)}, {"share", g.share}});
    }
    doc["kernels"] = std::move(kernels);
    json comms = json::array();
    for (const CommRow& c : r.comms)
        comms.push_back({{"collective", c.collective}, {"group", c.group}, {"group_desc", c.group_desc}, {"dtype", c.dtype}, {"element_size", c.element_size}, {"group_size", c.group_size}, {"in_elements", c.in_elements}, {"out_elements", c.out_elements}, {"bytes", c.bytes}, {"calls", c.calls}, {"timing", toString(c.timing)}, {"total_us", us(c.total_ns)}, {"avg_us", avgUs(c.total_ns, c.calls)}, {"algbw_gbps", number(c.algbw_gbps())}, {"busbw_gbps", number(c.busbw_gbps())}});
    doc["communication"] = std::move(comms);
    doc["findings"] = findingsJson(r.findings);
    if (r.combined)
        doc["combined"] = {{"rules", r.combined->rules}, {"left_out", r.combined->left_out}, {"saving_ms", number(r.combined->saving_ms)}, {"saving_pct", number(r.combined->saving_pct)}};
    doc["caveats"] = caveatLines(r);
    json steps = json::array();
    std::vector<uint8_t> steady(r.metrics.steps.size(), 0);
    for (size_t i : r.metrics.steady) steady[i] = 1;
    for (size_t i = 0; i < r.metrics.steps.size(); ++i) {
        const StepMetrics& m = r.metrics.steps[i];
        steps.push_back({{"name", m.step.name}, {"source", toString(m.step.source)}, {"steady", steady[i] == 1}, {"time_ms", double(m.time_ns) / 1e6}, {"gpu_busy_ms", double(m.gpu_busy_ns) / 1e6}, {"kernels", m.kernels}, {"small_kernels", m.small_kernels.count}, {"launches", m.launches}, {"idle_ms", double(m.idle.total()) / 1e6}, {"host_ahead_ms", double(m.host_ahead_ns) / 1e6}, {"sync_calls", r.metrics.syncs_recorded ? json(m.sync_calls) : json(nullptr)}});
    }
    doc["steps"] = std::move(steps);
    json metrics = json::object();
    for (const auto& [k, v] : r.metrics.values)
        metrics[k] = number(v);
    doc["metrics"] = std::move(metrics);
    if (reportHasHardware(r)) doc["hardware"] = hardwareJson(r);
    json quality = {
        {"gpu_linked_to_op", r.links.gpu_linked},
        {"gpu_without_external_id", r.links.gpu_without_id},
        {"gpu_unmatched_external_id", r.links.gpu_unmatched},
        {"api_calls_linked_to_op", r.links.api_linked},
        {"ops_folded", r.links.folded},
        {"bookkeeping_left_out", r.links.excluded},
        {"partial_overlaps", r.links.partial_overlaps}};
    for (const QualityCounter& c : kQualityCounters)
        if (c.listed_at_zero || r.quality.*c.field) quality[c.json_key] = r.quality.*c.field;
    doc["data_quality"] = std::move(quality);
    return doc.dump(2) + "\n";
}

} // namespace sightline
