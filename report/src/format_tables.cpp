#include "sightline/report/format_tables.h"

#include <cmath>

#include <fmt/format.h>

namespace sightline {

const char* sortName(OpSort key) { return sortKey(key).title; }

const char* sortName(GpuSort key) { return sortKey(key).title; }

namespace {

std::string capitalised(std::string s) {
    if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = char(s[0] - 'a' + 'A');
    return s;
}

size_t shown(size_t limit, size_t available) { return limit == 0 ? available : std::min(limit, available); }

std::string title(const char* what, size_t shown_rows, size_t all, const char* sort, const std::string& scope) {
    const std::string over = scope == "whole trace" ? "" : ", " + scope;
    if (shown_rows == all)
        return fmt::format("{} ({} rows, by {}{})", what, all, sort, over);
    return fmt::format("{} (top {} of {}, by {}{})", what, shown_rows, all, sort, over);
}

std::string avg(int64_t total, uint64_t calls) {
    return formatDuration(calls ? int64_t(double(total) / double(calls) + 0.5) : 0);
}

// "4.0 KiB", "256.0 MiB"; bytes below 1 KiB as they are.
std::string bytesText(int64_t bytes) {
    if (bytes < 1024) return fmt::format("{} B", bytes);
    const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
    double v = double(bytes);
    size_t u = 0;
    for (v /= 1024.0; v >= 1024.0 && u + 1 < std::size(units); v /= 1024.0) ++u;
    return fmt::format("{:.1f} {}", v, units[u]);
}

// Three significant figures at most, never in exponent form: "182", "12.4", "0.00086".
std::string bandwidthText(double gbps) {
    if (std::isnan(gbps)) return "-";
    if (gbps >= 100) return fmt::format("{:.0f}", gbps);
    if (gbps >= 1) return fmt::format("{:.3g}", gbps);
    if (gbps < 1e-4) return "<0.0001";
    return fmt::format("{:.2g}", gbps);
}

const char* timingText(CommTiming t) {
    switch (t) {
    case CommTiming::GpuKernels: return "GPU kernels";
    case CommTiming::BackendRange: return "CPU (backend range)";
    case CommTiming::CpuOp: return "CPU (op)";
    }
    return "?";
}

// The communication table: only for traces that recorded collectives.
void addCommSection(const Report& r, std::vector<ReportSection>& out) {
    if (r.comms.empty()) return;
    const std::string over = r.tables_scope == "whole trace" ? "" : ", " + r.tables_scope;
    ReportSection s{fmt::format("Communication ({} rows, by total{})", r.comms.size(), over), {}};
    s.table.columns = {{"Collective", false, 0}, {"Group", false, 24}, {"Dtype", false, 0}, {"Ranks"}, {"Size"}, {"Calls"}, {"Total"}, {"Avg"}, {"Timed on", false, 0}, {"Alg GB/s"}, {"Bus GB/s"}};
    for (const CommRow& c : r.comms) {
        const std::string group = c.group_desc.empty() ? c.group : fmt::format("{} ({})", c.group, c.group_desc);
        s.table.rows.push_back({c.collective, group, c.dtype, c.group_size > 0 ? std::to_string(c.group_size) : "?",
                                bytesText(c.bytes), withThousands(c.calls), formatDuration(c.total_ns), avg(c.total_ns, c.calls),
                                timingText(c.timing), bandwidthText(c.algbw_gbps()), bandwidthText(c.busbw_gbps())});
    }
    out.push_back(std::move(s));
}

} // namespace

std::vector<ReportSection> reportSections(const Report& r, const ReportOptions& o, size_t name_width) {
    std::vector<ReportSection> out;
    const Tables& t = r.tables;
    {
        const size_t n = shown(o.op_rows, t.ops.size());
        ReportSection s{title("Ops", n, t.ops.size(), sortName(o.op_sort), r.tables_scope), {}};
        s.table.columns = {{"Name", false, name_width}, {"Kind", false, 0}, {"Calls"}, {"Self CPU"}, {"Self CPU %"}, {"CPU total"}, {"CPU avg"}, {"Self GPU"}, {"GPU total"}};
        for (size_t i = 0; i < n; ++i) {
            const OpRow& op = t.ops[i];
            const double share = t.self_cpu_total_ns ? double(op.self_cpu_ns) / double(t.self_cpu_total_ns) : 0.0;
            s.table.rows.push_back({op.name, toString(op.kind), withThousands(op.calls), formatDuration(op.self_cpu_ns),
                                    percent(share), formatDuration(op.cpu_total_ns), avg(op.cpu_total_ns, op.calls),
                                    formatDuration(op.self_device_ns), formatDuration(op.device_total_ns)});
        }
        out.push_back(std::move(s));
    }
    {
        const size_t n = shown(o.class_rows, t.kernel_classes.size());
        ReportSection s{title("GPU time by kernel class", n, t.kernel_classes.size(), sortName(o.gpu_sort), r.tables_scope), {}};
        s.table.columns = {{"Class", false, name_width}, {"Family", false, 0}, {"Calls"}, {"Total"}, {"Avg"}, {"Min"}, {"Max"}, {"Share"}};
        for (size_t i = 0; i < n; ++i) {
            const GpuRow& g = t.kernel_classes[i];
            s.table.rows.push_back({g.name, g.family, withThousands(g.calls), formatDuration(g.total_ns),
                                    avg(g.total_ns, g.calls), formatDuration(g.min_ns), formatDuration(g.max_ns),
                                    percent(g.share)});
        }
        out.push_back(std::move(s));
    }
    {
        const size_t n = shown(o.kernel_rows, t.kernels.size());
        ReportSection s{title("Kernels", n, t.kernels.size(), sortName(o.gpu_sort), r.tables_scope), {}};
        s.table.columns = {{"Name", false, name_width}, {"Class", false, 32}, {"Calls"}, {"Total"}, {"Avg"}, {"Max"}, {"Share"}};
        for (size_t i = 0; i < n; ++i) {
            const GpuRow& g = t.kernels[i];
            s.table.rows.push_back({g.name, g.klass, withThousands(g.calls), formatDuration(g.total_ns),
                                    avg(g.total_ns, g.calls), formatDuration(g.max_ns), percent(g.share)});
        }
        out.push_back(std::move(s));
    }
    addCommSection(r, out);
    addHardwareSections(r, o, name_width, out);
    return out;
}

std::vector<std::string> summaryLines(const Report& r) {
    std::vector<std::string> lines;
    for (const DeviceInfo& d : r.devices)
        lines.push_back(fmt::format("Device {}: {} (sm_{}{}, {} SMs, {:.1f} GiB)", d.id, d.name, d.compute_major,
                                    d.compute_minor, d.sm_count, double(d.total_memory) / double(1ull << 30)));
    lines.push_back(fmt::format("Span {} · CPU ops {} · user annotations {} · CUDA API calls {}",
                                formatDuration(r.span_ns), withThousands(r.cpu_ops), withThousands(r.user_annotations),
                                withThousands(r.api_calls)));
    lines.push_back(fmt::format("GPU: {} kernels, {} memcpy, {} memset; GPU activity {} · self CPU total {}",
                                withThousands(r.kernels), withThousands(r.memcpys), withThousands(r.memsets),
                                formatDuration(r.tables.gpu_total_ns), formatDuration(r.tables.self_cpu_total_ns)));
    for (const std::string& l : caveatLines(r)) lines.push_back(l);
    return lines;
}

std::vector<std::string> qualityLines(const Report& r) {
    std::vector<std::string> lines;
    const uint64_t gpu = r.kernels + r.memcpys + r.memsets;
    lines.push_back(fmt::format("GPU activities linked to an op: {} of {} ({} without an external id, {} with an id "
                                "no op has)",
                                withThousands(r.links.gpu_linked), withThousands(gpu),
                                withThousands(r.links.gpu_without_id), withThousands(r.links.gpu_unmatched)));
    lines.push_back(fmt::format("CUDA API calls linked to an op: {} of {}", withThousands(r.links.api_linked),
                                withThousands(r.api_calls)));
    lines.push_back(fmt::format("Events read {}, not modelled {} (metadata, instants), of unknown category {}, "
                                "negative durations {}, dropped by the collector {}",
                                withThousands(r.quality.events_read), withThousands(r.quality.events_ignored),
                                withThousands(r.quality.unknown_categories), withThousands(r.quality.negative_durations),
                                withThousands(r.quality.dropped_records)));
    for (std::string& l : hwStatusLines(r)) lines.push_back(std::move(l));
    if (r.quality.unlinked_collectives)
        lines.push_back(fmt::format("Collectives whose op is not in the trace (left out of the communication table): {}",
                                    withThousands(r.quality.unlinked_collectives)));
    if (r.quality.counted_launches)
        lines.push_back(fmt::format("Launch calls counted by the collector (no CUPTI API records): {}, of which {} could not be "
                                    "matched with their GPU activities (left unlinked)",
                                    withThousands(r.quality.counted_launches), withThousands(r.quality.unmatched_launches)));
    if (r.quality.lost_chunks || r.quality.unclosed_ranges)
        lines.push_back(fmt::format("Capture: {} chunk(s) lost ({} bytes) to a cut or damaged file, {} NVTX range(s) never closed",
                                    withThousands(r.quality.lost_chunks), withThousands(r.quality.lost_bytes),
                                    withThousands(r.quality.unclosed_ranges)));
    for (const QualityCounter& c : kQualityCounters)
        if (!c.in_sentences && r.quality.*c.field)
            lines.push_back(fmt::format("{}: {}", capitalised(c.description), withThousands(r.quality.*c.field)));
    lines.push_back(fmt::format("Op tree: {} same-name children folded, {} bookkeeping events left out, {} partial "
                                "overlaps",
                                withThousands(r.links.folded), withThousands(r.links.excluded),
                                withThousands(r.links.partial_overlaps)));
    return lines;
}

} // namespace sightline
