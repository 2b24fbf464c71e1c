#include "sightline/report/diff.h"

#include "sightline/report/table_writer.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace sightline {

namespace {

double perStep(const Report& r) { return std::max<double>(1.0, double(r.metrics.steady.size())); }

template <typename Key, typename Fill>
std::vector<DiffRow> matchRows(Fill fill) {
    std::map<Key, DiffRow> rows;
    fill(rows);
    std::vector<DiffRow> out;
    for (auto& [k, r] : rows) {
        const bool unchanged = std::fabs(r.delta()) < 1e-9 && r.calls_before == r.calls_after;
        if (!unchanged)
            out.push_back(r);
    }
    std::sort(out.begin(), out.end(), [](const DiffRow& a, const DiffRow& b) { return std::fabs(a.delta()) > std::fabs(b.delta()); });
    return out;
}

std::string num(double v) { return std::isnan(v) ? "-" : fmt::format("{:.4g}", v); }
std::string signedPct(double v) { return std::isnan(v) ? "-" : fmt::format("{:+.1f}%", v); }

} // namespace

bool Diff::regression() const {
    const double c = stepChangePct();
    return !std::isnan(c) && c > max_regression_pct;
}

double Diff::stepChangePct() const {
    return step_before_ms > 0 && !std::isnan(step_after_ms) ? 100.0 * (step_after_ms - step_before_ms) / step_before_ms : NAN;
}

Diff computeDiff(const Report& a, const Report& b, double max_regression_pct) {
    Diff d;
    d.before_source = a.source;
    d.after_source = b.source;
    d.max_regression_pct = max_regression_pct;
    auto get = [](const Report& r, const std::string& k) { return r.metrics.value(k); };
    d.step_before_ms = get(a, "step.time_ms");
    d.step_after_ms = get(b, "step.time_ms");
    for (const auto& [k, _] : metricCatalog()) {
        DiffRow r{k, "", get(a, k), get(b, k)};
        const bool same = (std::isnan(r.before) && std::isnan(r.after)) || r.before == r.after;
        if (!same) d.metrics.push_back(r);
    }
    // One side of a table comparison: per-step values of the rows of `r` into `rows`.
    auto classSide = [](std::map<std::string, DiffRow>& rows, const Report& r, bool after) {
        const double n = perStep(r);
        for (const GpuRow& g : r.metrics.steady_tables.kernel_classes) {
            DiffRow& row = rows[g.name];
            row.name = g.name;
            row.detail = g.family;
            (after ? row.after : row.before) = double(g.total_ns) / 1e6 / n;
            (after ? row.calls_after : row.calls_before) = double(g.calls) / n;
        }
    };
    auto opSide = [](std::map<std::pair<std::string, int>, DiffRow>& rows, const Report& r, bool after) {
        const double n = perStep(r);
        for (const OpRow& o : r.metrics.steady_tables.ops) {
            DiffRow& row = rows[{o.name, int(o.kind)}];
            row.name = o.name;
            row.detail = toString(o.kind);
            (after ? row.after : row.before) = double(o.self_cpu_ns + o.self_device_ns) / 1e6 / n;
            (after ? row.calls_after : row.calls_before) = double(o.calls) / n;
        }
    };
    d.kernel_classes = matchRows<std::string>([&](auto& rows) {
        classSide(rows, a, false);
        classSide(rows, b, true);
    });
    d.ops = matchRows<std::pair<std::string, int>>([&](auto& rows) {
        opSide(rows, a, false);
        opSide(rows, b, true);
    });
    auto ids = [](const Report& r) {
        std::vector<std::string> v;
        for (const Finding& f : r.findings) v.push_back(f.rule);
        return v;
    };
    const auto fa = ids(a), fb = ids(b);
    for (const auto& f : fb)
        (std::find(fa.begin(), fa.end(), f) == fa.end() ? d.findings_new : d.findings_kept).push_back(f);
    for (const auto& f : fa)
        if (std::find(fb.begin(), fb.end(), f) == fb.end()) d.findings_resolved.push_back(f);
    return d;
}

std::string formatDiffText(const Diff& d, size_t rows, bool md) {
    auto name = [](const std::string& s) { return std::filesystem::path(s).filename().string(); };
    std::string out = md ? fmt::format("## Sightline diff: `{}` → `{}`\n\n", name(d.before_source), name(d.after_source))
                         : fmt::format("Sightline diff: {} -> {}\n", name(d.before_source), name(d.after_source));
    out += fmt::format("{}step time {} ms -> {} ms ({})\n", md ? "- " : "", num(d.step_before_ms), num(d.step_after_ms),
                       signedPct(d.stepChangePct()));
    auto section = [&](const char* title, const std::vector<DiffRow>& src, bool with_calls) {
        TextTable t;
        t.columns = {{"Name", false, 60}, {"", false, 12}, {"Before"}, {"After"}, {"Change"}, {"Change %"}};
        if (with_calls) {
            t.columns.push_back({"Calls before"});
            t.columns.push_back({"Calls after"});
        }
        const size_t n = rows == 0 ? src.size() : std::min(rows, src.size());
        for (size_t i = 0; i < n; ++i) {
            const DiffRow& r = src[i];
            std::vector<std::string> row = {r.name, r.detail, num(r.before), num(r.after), fmt::format("{:+.4g}", r.delta()), signedPct(r.deltaPct())};
            if (with_calls) {
                row.push_back(fmt::format("{:.0f}", r.calls_before));
                row.push_back(fmt::format("{:.0f}", r.calls_after));
            }
            t.rows.push_back(std::move(row));
        }
        out += md ? fmt::format("\n### {} ({} changed)\n\n", title, src.size()) : fmt::format("\n{} ({} changed)\n", title, src.size());
        if (src.empty()) out += md ? "No change.\n" : "  no change\n";
        else out += md ? t.renderMarkdown() : t.renderText();
    };
    section("Metrics, per step", d.metrics, false);
    section("Kernel classes, GPU ms per step", d.kernel_classes, true);
    section("Ops, self CPU + self GPU ms per step", d.ops, true);
    auto list = [](const std::vector<std::string>& v) {
        std::string s;
        for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
        return s.empty() ? std::string("none") : s;
    };
    out += md ? "\n### Findings\n\n" : "\nFindings\n";
    out += fmt::format("{}resolved: {}\n{}new: {}\n{}still present: {}\n", md ? "- " : "  ", list(d.findings_resolved),
                       md ? "- " : "  ", list(d.findings_new), md ? "- " : "  ", list(d.findings_kept));
    out += fmt::format("\n{}{}\n", md ? "**Verdict:** " : "Verdict: ",
                       d.regression() ? fmt::format("REGRESSION: step time {} (limit +{:.1f}%)", signedPct(d.stepChangePct()), d.max_regression_pct)
                                      : fmt::format("no regression (step time {}, limit +{:.1f}%)", signedPct(d.stepChangePct()), d.max_regression_pct));
    return out;
}

std::string formatDiffJson(const Diff& d) {
    using nlohmann::json;
    auto number = [](double v) { return std::isnan(v) ? json() : json(v); };
    auto rowsJson = [&](const std::vector<DiffRow>& rows) {
        json a = json::array();
        for (const DiffRow& r : rows)
            a.push_back({{"name", r.name}, {"detail", r.detail}, {"before", number(r.before)}, {"after", number(r.after)}, {"delta", r.delta()}, {"delta_pct", number(r.deltaPct())}, {"calls_before", r.calls_before}, {"calls_after", r.calls_after}});
        return a;
    };
    json doc = {{"sightline_diff", 1},
                {"before", d.before_source},
                {"after", d.after_source},
                {"step_time_ms", {{"before", number(d.step_before_ms)}, {"after", number(d.step_after_ms)}, {"change_pct", number(d.stepChangePct())}}},
                {"max_regression_pct", d.max_regression_pct},
                {"regression", d.regression()},
                {"metrics", rowsJson(d.metrics)},
                {"kernel_classes", rowsJson(d.kernel_classes)},
                {"ops", rowsJson(d.ops)},
                {"findings", {{"new", d.findings_new}, {"resolved", d.findings_resolved}, {"still_present", d.findings_kept}}}};
    return doc.dump(2) + "\n";
}

} // namespace sightline
