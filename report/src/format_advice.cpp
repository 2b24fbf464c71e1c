// The advisor's parts of the report: steps, steady-state metrics and findings.
#include "sightline/report/format_tables.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace sightline {

namespace {

std::string ms(double v) { return std::isnan(v) ? "unknown" : fmt::format("{:.2f} ms", v); }
std::string pct(double fraction) { return std::isnan(fraction) ? "unknown" : fmt::format("{:.1f}%", fraction * 100); }
double val(const Report& r, const char* key) { return r.metrics.value(key); }

// Host outliers over the steady steps, and the ops that hold the most of them.
std::string outlierLine(const Report& r) {
    std::vector<std::pair<int64_t, std::string>> ops;
    for (const auto& [name, ct] : r.metrics.host_outliers) ops.emplace_back(ct.ns, name);
    std::sort(ops.rbegin(), ops.rend());
    const double steps = std::max<double>(1.0, double(r.metrics.steady.size()));
    std::string line = fmt::format("host outliers {:.1f} a step: op calls far longer than their op's usual time, {} a step beyond it "
                                   "(per-shape setup and the like, docs/metrics.md)",
                                   val(r, "host.outlier_calls"), ms(val(r, "host.outlier_ms")));
    for (size_t i = 0; i < std::min<size_t>(3, ops.size()); ++i)
        line += fmt::format("{} {} {}", i ? "," : ";", ops[i].second, ms(double(ops[i].first) / 1e6 / steps));
    return line;
}

} // namespace

TextTable stepsTable(const Report& r) {
    TextTable t;
    t.columns = {{"Step", false, 28}, {"Time"}, {"GPU busy"}, {"Kernels"}, {"<10 us"}, {"Launches"}, {"Idle"}, {"Syncs"}};
    // Host outliers (docs/metrics.md), where a step has any: what makes a step slower than the others.
    const bool outliers = std::any_of(r.metrics.steps.begin(), r.metrics.steps.end(), [](const StepMetrics& m) { return m.host_outliers.count > 0; });
    if (outliers) t.columns.push_back({"Host outliers"});
    t.columns.push_back({"Steady", false, 0});
    std::vector<uint8_t> steady(r.metrics.steps.size(), 0);
    for (size_t i : r.metrics.steady) steady[i] = 1;
    for (size_t i = 0; i < r.metrics.steps.size(); ++i) {
        const StepMetrics& m = r.metrics.steps[i];
        std::vector<std::string> row = {m.step.name, formatDuration(m.time_ns),
                                        m.time_ns ? fmt::format("{:.1f}%", 100.0 * double(m.gpu_busy_ns) / double(m.time_ns)) : "-",
                                        withThousands(m.kernels), withThousands(m.small_kernels.count), withThousands(m.launches),
                                        formatDuration(m.idle.total()), r.metrics.syncs_recorded ? withThousands(m.sync_calls) : "-"};
        if (outliers) row.push_back(m.host_outliers.count ? formatDuration(m.host_outliers.ns) : "-");
        row.push_back(steady[i] ? "yes" : "warm-up");
        t.rows.push_back(std::move(row));
    }
    return t;
}

std::vector<std::string> caveatLines(const Report& r) {
    std::vector<std::string> out;
    const Metrics& m = r.metrics;
    if (!m.host_recorded)
        out.push_back(std::string("GPU activity only: the trace has no CPU ops or annotations (recorded with CUDA activity "
                                  "alone), so ops, host dispatch, DataLoader waits and the op tables are unknown") +
                      (m.launches_recorded ? "" : ", and so are launches and the causes of idle gaps (no CUDA API calls either)") +
                      "; steps are found on the GPU's timeline; record with activities=[CPU, CUDA] for the rest");
    if (!m.warmup_only.empty())
        out.push_back("No step after warm-up: " + m.warmup_only + "; the figures average every step and the findings are "
                                                                  "unreliable; profile a few steps more, after the first (torch.profiler.schedule(wait=1, warmup=1, "
                                                                  "active=3), or sightline run --steps 3:6)");
    else if (m.steps.size() == 1)
        out.push_back("One step only: taken as the steady state (it shows no compilation" +
                      std::string(m.syncs_recorded && m.host_recorded ? " and no device memory allocation" : "") +
                      "); profile three steps or more to see warm-up apart");
    return out;
}

std::vector<std::string> metricLines(const Report& r) {
    std::vector<std::string> out;
    const Metrics& m = r.metrics;
    if (m.steps.empty())
        return {"no steps: the trace has no CPU events"};
    out.push_back(fmt::format("{} step(s) found by {}; the steady state averages {} of them", m.steps.size(),
                              toString(m.steps[0].step.source), m.steady.size()));
    out.push_back(fmt::format("step time {} · GPU busy {} of the step (what nvidia-smi reports as utilization) · GPU "
                              "activity {}",
                              ms(val(r, "step.time_ms")), pct(val(r, "gpu.busy_pct") / 100),
                              ms(val(r, "gpu.time_ms"))));
    if (val(r, "host.ahead_ms") > 0)
        out.push_back(fmt::format("the host ran {} ahead of the GPU at each step's start (work launched before the step was still "
                                  "running): steps are timed on the GPU's clock, each from where the GPU finished the work before it",
                                  ms(val(r, "host.ahead_ms"))));
    out.push_back(fmt::format("what busy hides: {:.0f} kernels a step, {} of them under 10 us taking {} of GPU time; "
                              "{:.0f} launches a step ({:.0f}/s)",
                              val(r, "kernels.count"), pct(val(r, "kernels.small_share")),
                              pct(val(r, "kernels.small_time_share")), val(r, "launches.count"), val(r, "launches.per_s")));
    const double ratio = val(r, "cpu.dispatch_ratio");
    if (m.host_recorded)
        out.push_back(fmt::format("host dispatch (op self CPU + CUDA API) {} against GPU busy {} (ratio {})",
                                  ms(val(r, "cpu.dispatch_ms")), ms(val(r, "gpu.busy_ms")),
                                  std::isnan(ratio) || std::isinf(ratio) ? std::string("-") : fmt::format("{:.2f}", ratio)));
    else
        out.push_back(fmt::format("host dispatch unknown (no CPU ops); CUDA API calls {} against GPU busy {}", ms(val(r, "api.ms")),
                                  ms(val(r, "gpu.busy_ms"))));
    const double unknown = val(r, "idle.unknown_ms");
    out.push_back(fmt::format("compute stream idle {}: waiting for launches {}, after syncs {}, for data {}, on other "
                              "streams {}, after the last kernel {}{} ({:.0f} gaps)",
                              ms(val(r, "gpu.idle_ms")),
                              ms(val(r, "idle.launch_ms")), ms(val(r, "idle.sync_ms")), ms(val(r, "idle.dataloader_ms")),
                              ms(val(r, "idle.dependency_ms")), ms(val(r, "idle.tail_ms")),
                              unknown > 0 ? fmt::format(", cause unknown (launch calls not recorded) {}", ms(unknown)) : "",
                              val(r, "idle.gaps")));
    out.push_back(fmt::format("memcpy {:.0f} ({}; device-to-device {:.0f}, device-to-host {:.0f}) · memset {:.0f} ({}) · "
                              "{} of GPU time",
                              val(r, "memcpy.count"), ms(val(r, "memcpy.ms")), val(r, "memcpy.dtod_count"),
                              val(r, "memcpy.dtoh_count"), val(r, "memset.count"), ms(val(r, "memset.ms")), pct(val(r, "memops.share"))));
    if (!r.metrics.syncs_recorded)
        out.push_back("host synchronisations: not recorded (no CUDA runtime calls in this trace: idle time after them is "
                      "counted as waiting for launches; record `runtime` activities to see them)");
    else
        out.push_back(fmt::format("host synchronisations {:.1f} a step ({:.1f} followed by more GPU work in the step)",
                                  val(r, "sync.calls"), val(r, "sync.mid_step")));
    if (val(r, "host.outlier_calls") > 0) out.push_back(outlierLine(r));
    const double flops = val(r, "flops.per_step");
    if (std::isnan(flops)) {
        out.push_back("FLOPs and MFU: unknown (record input shapes: torch.profiler(record_shapes=True))");
    } else {
        out.push_back(fmt::format("FLOPs {:.3g} a step (GEMM and attention shapes) · {:.1f} TFLOP/s · MFU {} against {} "
                                  "bf16 dense peak {}",
                                  flops, val(r, "flops.tflops_per_s"),
                                  std::isnan(val(r, "mfu.pct")) ? std::string("unknown") : fmt::format("{:.1f}%", val(r, "mfu.pct")),
                                  m.device_name.empty() ? "the device's" : m.device_name,
                                  std::isnan(m.peak_tflops) ? std::string("unknown") : fmt::format("{:.0f} TFLOP/s", m.peak_tflops)));
    }
    if (std::isnan(val(r, "tokens.real"))) {
        out.push_back("tokens and padding: unknown; annotate each batch with a range or mark named "
                      "`sightline.batch real_tokens=N padded_tokens=M` (docs/metrics.md) to get tokens/s and padding efficiency");
    } else {
        out.push_back(fmt::format("tokens {:.0f} real / {:.0f} padded a step · {:.0f} real tokens/s · padding efficiency {}",
                                  val(r, "tokens.real"), val(r, "tokens.padded"), val(r, "tokens.per_s"),
                                  pct(val(r, "padding.efficiency"))));
    }
    // GPU time by family over the steady steps.
    std::map<std::string, int64_t> fam;
    int64_t total = 0;
    for (const GpuRow& c : m.steady_tables.kernel_classes) {
        fam[c.family] += c.total_ns;
        total += c.total_ns;
    }
    std::vector<std::pair<int64_t, std::string>> sorted;
    for (const auto& [f, ns] : fam) sorted.emplace_back(ns, f);
    std::sort(sorted.rbegin(), sorted.rend());
    std::string line = sorted.empty() ? "GPU time by family: no GPU activity" : "GPU time by family:";
    for (const auto& [ns, f] : sorted)
        line += fmt::format(" {} {:.1f}%", f, total ? 100.0 * double(ns) / double(total) : 0.0) + (&f == &sorted.back().second ? "" : ",");
    out.push_back(line);
    return out;
}

namespace {

std::string savingText(const Finding& f) {
    std::string s = fmt::format("saves about {:.2f} ms a step ({:.1f}%)", f.saving_ms, f.saving_pct);
    if (!std::isnan(f.saving_low_ms) && !std::isnan(f.saving_high_ms))
        s += fmt::format(", {:.2f} to {:.2f} ms", f.saving_low_ms, f.saving_high_ms);
    return s;
}

} // namespace

std::string findingHeadline(const Finding& f, bool md) {
    return (md ? fmt::format("**{}** `{}` — {}: {}", toString(f.severity), f.rule, f.title, savingText(f))
               : fmt::format("[{}] {} ({}): {}", toString(f.severity), f.title, f.rule, savingText(f))) +
        (f.unreliable.empty() ? "" : " — unreliable, " + f.unreliable);
}

std::vector<std::vector<std::string>> findingBlocks(const std::vector<Finding>& findings, bool md) {
    std::vector<std::vector<std::string>> out;
    for (const Finding& f : findings) {
        if (f.minor) continue;
        std::vector<std::string> b;
        b.push_back(findingHeadline(f, md));
        b.push_back(f.message);
        std::string ev = "evidence:";
        for (const EvidenceRow& e : f.evidence) {
            if (e.kind == EvidenceKind::Metric)
                ev += fmt::format(" {}={:.4g};", e.name, e.value);
            else
                ev += fmt::format(" {} '{}' {:.0f} calls {:.2f} ms a step;", toString(e.kind), e.name, e.calls, e.ms);
        }
        if (!f.evidence.empty()) {
            ev.pop_back();
            b.push_back(ev);
        }
        b.push_back("fix: " + f.fix);
        b.push_back(std::string(f.replayed ? "saving (replayed): " : "saving: ") + f.saving_explained);
        if (!f.critical_path.empty()) b.push_back("critical path: " + f.critical_path);
        if (!f.uncertainty.empty()) b.push_back("uncertain: " + f.uncertainty);
        out.push_back(std::move(b));
    }
    return out;
}

std::vector<std::string> minorFindingLines(const std::vector<Finding>& findings, bool md) {
    std::vector<std::string> out;
    for (const Finding& f : findings)
        if (f.minor) out.push_back(findingHeadline(f, md) + (f.critical_path.empty() ? "" : " (" + f.critical_path + ")") + "; fix: " + f.fix);
    return out;
}

} // namespace sightline
