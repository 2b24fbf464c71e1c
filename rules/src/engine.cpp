// Evaluating rules into findings (docs/rules.md).
#include "rule.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace sightline {

const char* toString(Severity s) {
    switch (s) {
    case Severity::Info: return "info";
    case Severity::Warning: return "warning";
    case Severity::Error: return "error";
    }
    return "?";
}

bool parseSeverity(std::string_view text, Severity& out) {
    if (text == "info") out = Severity::Info;
    else if (text == "warning") out = Severity::Warning;
    else if (text == "error") out = Severity::Error;
    else return false;
    return true;
}

struct BuiltinRuleFile {
    const char* name;
    const char* text;
};
extern const BuiltinRuleFile kBuiltinRuleFiles[];
extern const size_t kBuiltinRuleFileCount;

RuleSet::RuleSet() = default;
RuleSet::~RuleSet() = default;
RuleSet::RuleSet(RuleSet&&) noexcept = default;
RuleSet& RuleSet::operator=(RuleSet&&) noexcept = default;

RuleSet RuleSet::builtin() {
    RuleSet set;
    for (size_t i = 0; i < kBuiltinRuleFileCount; ++i)
        set.addText(kBuiltinRuleFiles[i].text, std::string("rules/catalog/") + kBuiltinRuleFiles[i].name);
    return set;
}

void RuleSet::addText(const std::string& text, const std::string& source) {
    try {
        auto rule = std::make_shared<const Rule>(parseRuleFile(text, source));
        auto same = std::find_if(m_rules.begin(), m_rules.end(), [&](const auto& r) { return r->id == rule->id; });
        if (same != m_rules.end()) *same = rule;
        else m_rules.push_back(rule);
    } catch (const RuleFileError& e) {
        m_errors.push_back(RuleError{e.what()});
    }
}

void RuleSet::addPath(const std::filesystem::path& path) {
    std::error_code ec;
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(path, ec)) {
        for (const auto& entry : std::filesystem::directory_iterator(path, ec))
            if (entry.path().extension() == ".toml") files.push_back(entry.path());
        std::sort(files.begin(), files.end());
    } else if (std::filesystem::exists(path, ec)) {
        files.push_back(path);
    } else {
        m_errors.push_back(RuleError{fmt::format("{}: no such file or directory", path.string())});
        return;
    }
    for (const auto& f : files) {
        std::ifstream in(f);
        if (!in) {
            m_errors.push_back(RuleError{fmt::format("{}: cannot read", f.string())});
            continue;
        }
        std::stringstream ss;
        ss << in.rdbuf();
        addText(ss.str(), f.string());
    }
}

size_t RuleSet::size() const { return m_rules.size(); }

std::vector<std::string> RuleSet::ids() const {
    std::vector<std::string> out;
    for (const auto& r : m_rules) out.push_back(r->id);
    return out;
}

std::string RuleSet::explain(const std::string& id) const {
    for (const auto& r : m_rules) {
        if (r->id != id) continue;
        std::string s = fmt::format("{} — {}\nseverity: {}{}\nfile: {}\n", r->id, r->title, toString(r->severity),
                                    std::isnan(r->escalate_pct) ? "" : fmt::format(" (error when the saving reaches {}% of the step)", r->escalate_pct),
                                    r->source);
        if (!r->description.empty()) s += "\n" + r->description + "\n";
        s += "\nfires when: " + r->when.text() + "\n";
        if (!r->thresholds.empty()) {
            s += "thresholds:";
            for (const auto& [k, v] : r->thresholds) s += fmt::format(" {}={}", k, v);
            s += "\n";
        }
        s += "\nsaving (ms per step): " + r->saving_ms.text() + "\n" + r->saving_explained + "\n";
        s += "\nfix: " + r->fix + "\n";
        return s;
    }
    return {};
}

namespace {

bool globMatch(const std::string& pattern, const std::string& name) {
    if (!pattern.empty() && pattern.back() == '*')
        return name.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
    return name == pattern;
}

std::string formatValue(double v, const std::string& format) {
    if (std::isnan(v)) return "unknown";
    if (format == ".0f" || format.empty()) return fmt::format("{:.0f}", v);
    if (format == ".1f") return fmt::format("{:.1f}", v);
    if (format == ".2f") return fmt::format("{:.2f}", v);
    if (format == "pct") return fmt::format("{:.1f}%", v * 100);
    return fmt::format("{:.2f} ms", v); // "ms"
}

// The hardware figures of kernel families or classes (family_tensor_pct('gemm'), ...): averages
// over their kernels weighted by time; NaN without samples.
double hwTable(const Metrics& m, const std::string& fn, const std::string& arg) {
    const bool family = fn.starts_with("family_");
    HwAverage avg;
    for (const auto& [name, f] : family ? m.hw.families : m.hw.classes)
        if (family ? name == arg : globMatch(arg, name)) avg.add(f);
    const HwFigures f = avg.result();
    if (fn.ends_with("_sm_active_pct")) return f[HwMetric::SmActive];
    if (fn.ends_with("_tensor_pct")) return f[HwMetric::TensorActive];
    return 100.0 * f[HwMetric::DramBytesPerS] / dramCeiling(m.device_name); // _dram_ceiling_pct
}

} // namespace

std::vector<Finding> RuleSet::evaluate(const Metrics& metrics) const {
    const double n = std::max<double>(1.0, double(metrics.steady.size()));
    const Tables& t = metrics.steady_tables;
    rules::EvalContext ctx;
    ctx.metric = [&](const std::string& name) { return metrics.value(name); };
    ctx.table = [&](const std::string& fn, const std::string& arg) -> double {
        double sum = 0;
        if (fn.ends_with("_pct")) return hwTable(metrics, fn, arg);
        if (fn == "family_ms" || fn == "family_count" || fn == "class_ms" || fn == "class_count") {
            const bool family = fn.starts_with("family");
            const bool count = fn.ends_with("count");
            for (const GpuRow& r : t.kernel_classes)
                if (family ? r.family == arg : globMatch(arg, r.name))
                    sum += count ? double(r.calls) : double(r.total_ns) / 1e6;
            return sum / n;
        }
        for (const OpRow& r : t.ops) {
            if (!globMatch(arg, r.name)) continue;
            if (fn == "op_calls") sum += double(r.calls);
            else if (fn == "op_self_device_ms") sum += double(r.self_device_ns) / 1e6;
            else if (fn == "op_device_ms") sum += double(r.device_total_ns) / 1e6;
            else if (fn == "op_cpu_ms") sum += double(r.self_cpu_ns) / 1e6;
        }
        return sum / n;
    };
    const double step_ms = ctx.metric("step.time_ms");

    std::vector<Finding> out;
    for (const auto& rp : m_rules) {
        const Rule& r = *rp;
        const double fires = r.when.eval(ctx);
        if (std::isnan(fires) || fires == 0)
            continue;
        Finding f;
        f.rule = r.id;
        f.title = r.title;
        f.fix = r.fix;
        f.saving_explained = r.saving_explained;
        f.source = r.source;
        double saving = r.saving_ms.eval(ctx);
        if (std::isnan(saving) || saving < 0) saving = 0;
        if (!std::isnan(step_ms)) saving = std::min(saving, step_ms);
        f.saving_ms = saving;
        f.saving_pct = step_ms > 0 ? 100.0 * saving / step_ms : 0.0;
        f.severity = r.severity;
        if (!std::isnan(r.escalate_pct) && f.saving_pct >= r.escalate_pct)
            f.severity = Severity::Error;
        for (const MessagePart& p : r.message)
            f.message += p.value.empty() ? p.literal : formatValue(p.value.eval(ctx), p.format);
        for (const std::string& m : r.evidence_metrics)
            f.evidence.push_back(EvidenceRow{"metric", m, 0, ctx.metric(m)});
        std::vector<EvidenceRow> classes;
        for (const GpuRow& row : t.kernel_classes) {
            const bool in_family = std::find(r.evidence_families.begin(), r.evidence_families.end(), row.family) != r.evidence_families.end();
            const bool named = std::any_of(r.evidence_classes.begin(), r.evidence_classes.end(),
                                           [&](const std::string& g) { return globMatch(g, row.name); });
            if (in_family || named)
                classes.push_back(EvidenceRow{"kernel class", row.name, double(row.calls) / n, double(row.total_ns) / 1e6 / n});
        }
        std::sort(classes.begin(), classes.end(), [](const EvidenceRow& a, const EvidenceRow& b) { return a.ms > b.ms; });
        if (classes.size() > 6) classes.resize(6);
        std::vector<EvidenceRow> ops;
        for (const OpRow& row : t.ops)
            if (std::any_of(r.evidence_ops.begin(), r.evidence_ops.end(), [&](const std::string& g) { return globMatch(g, row.name); }))
                ops.push_back(EvidenceRow{"op", row.name, double(row.calls) / n,
                                          double(row.device_total_ns > 0 ? row.device_total_ns : row.self_cpu_ns) / 1e6 / n});
        std::sort(ops.begin(), ops.end(), [](const EvidenceRow& a, const EvidenceRow& b) { return a.ms > b.ms; });
        if (ops.size() > 6) ops.resize(6);
        f.evidence.insert(f.evidence.end(), classes.begin(), classes.end());
        f.evidence.insert(f.evidence.end(), ops.begin(), ops.end());
        out.push_back(std::move(f));
    }
    std::stable_sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
        if (a.severity != b.severity) return a.severity > b.severity;
        return a.saving_ms > b.saving_ms;
    });
    return out;
}

} // namespace sightline
