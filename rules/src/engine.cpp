// Evaluating rules into findings (docs/rules.md).
#include "rule.h"
#include "table_functions.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <future>
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

const char* toString(EvidenceKind k) {
    switch (k) {
    case EvidenceKind::Metric: return "metric";
    case EvidenceKind::KernelClass: return "kernel class";
    case EvidenceKind::Op: return "op";
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

namespace {

std::string describe(const ChangeSpec& c) {
    std::string s = toString(c.change.kind);
    auto list = [&](const char* key, const std::vector<std::string>& v) {
        if (v.empty()) return;
        s += fmt::format(" {}=[", key);
        for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
        s += "]";
    };
    const Selector& sel = c.change.select;
    list("families", sel.families);
    list("classes", sel.classes);
    list("ops", sel.ops);
    list("within", sel.within);
    list("outside", sel.outside);
    list("near_ops", sel.near_ops);
    if (!c.amount.empty()) s += " amount=" + c.amount.text();
    if (!c.low.empty()) s += " (" + c.low.text() + " to " + c.high.text() + ")";
    if (!c.host_left.empty()) s += " host_left=" + c.host_left.text();
    return s;
}

} // namespace

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
        if (!r->changes.empty()) {
            s += "\nsaving: the what-if replay of the step with the fix applied:\n";
            for (const ChangeSpec& c : r->changes) s += "  " + describe(c) + "\n";
        }
        if (!r->saving_ms.empty())
            s += std::string(r->changes.empty() ? "\nsaving (ms per step): " : "without a trace to replay: ") + r->saving_ms.text() + "\n";
        if (!r->formula_when.empty()) s += "and where " + r->formula_when.text() + ": " + r->saving_ms.text() + ", not replayed\n";
        s += r->saving_explained + "\n";
        s += "\nfix: " + r->fix + "\n";
        for (const ConditionalFix& c : r->conditional_fixes)
            if (c.mode == ConditionalFix::Mode::Add) s += "  where " + c.when.text() + ": " + c.text + "\n";
        for (const ConditionalFix& c : r->conditional_fixes)
            if (c.mode == ConditionalFix::Mode::Replace) s += "fix when " + c.when.text() + ": " + c.text + "\n";
        return s;
    }
    return {};
}

namespace {

std::string formatValue(double v, const std::string& format) {
    if (std::isnan(v)) return "unknown";
    if (format == ".0f" || format.empty()) return fmt::format("{:.0f}", v);
    if (format == ".1f") return fmt::format("{:.1f}", v);
    if (format == ".2f") return fmt::format("{:.2f}", v);
    if (format == "pct") return fmt::format("{:.1f}%", v * 100);
    return fmt::format("{:.2f} ms", v); // "ms"
}

constexpr double kMinorPct = 1.0;        // findings worth less of the step are minor
constexpr double kCertainSpread = 0.25;  // a saving known to +-25% needs no word of doubt
constexpr double kReplayFidelity = 0.05; // the replay reproduces the measured step to within 5%

struct Priced {
    double saving = NAN, low = NAN, high = NAN;
    double gpu_cut = 0, host_cut = 0; // what the replayed fix cut, whether on the critical path or not
    bool replayed = false;
    std::vector<std::string> doubts;
};

// What one evaluation knows of the step's host side, found once for all its rules.
struct HostSide {
    bool host_bound = false; // step.host_bound: the GPU waits for launches (metric_passes.h)
    // Host-bound with the recorder's cost per event known: every replayed saving gets a second
    // end, replayed with that cost taken off the host's time.
    bool deflate = false;
    double step_ms = NAN, deflated_ms = NAN; // the measured step, and the replayed one without the recorder's cost
};

HostSide hostSide(const rules::EvalContext& ctx, const ReplayModel* replay) {
    HostSide h;
    h.step_ms = ctx.metric("step.time_ms");
    h.host_bound = ctx.metric("step.host_bound") == 1.0;
    if (h.host_bound && replay && replay->usable() && replay->recorderCostUs() > 0 && replay->deflatedBaselineMs() > 0) {
        h.deflate = true;
        h.deflated_ms = replay->deflatedBaselineMs();
    }
    return h;
}

// The rule's changes with their amounts evaluated; `at` picks the amount, the range's low or high end.
std::vector<Change> changesAt(const Rule& r, const rules::EvalContext& ctx, int at) {
    std::vector<Change> out;
    for (const ChangeSpec& spec : r.changes) {
        Change c = spec.change;
        // The low end of the saving: the changes at their mildest (the amount's range end that
        // keeps the most), and the high end at their strongest.
        const rules::Expression& e = at < 0 && !spec.low.empty() ? spec.low : at > 0 && !spec.high.empty() ? spec.high
                                                                                                           : spec.amount;
        const rules::Expression& h = at < 0 && !spec.host_high.empty() ? spec.host_high
            : at > 0 && !spec.host_low.empty()                         ? spec.host_low
                                                                       : spec.host_left;
        // Shares are never negative; an unknown one stays NaN (the rule is then priced by its formula).
        auto share = [&](const rules::Expression& x) { const double v = x.eval(ctx); return std::isnan(v) ? v : std::max(0.0, v); };
        c.amount = e.empty() ? 1.0 : share(e);
        c.host_left = h.empty() ? 1.0 : share(h);
        out.push_back(std::move(c));
    }
    return out;
}

// The range's ends replayed beside the estimate (each replay reads the model only): the rule's
// own range where it states one, and the saving without the recorder's cost on a host-bound step.
void replayRange(const Rule& r, const rules::EvalContext& ctx, const ReplayModel& replay, const HostSide& host,
                 const std::vector<Change>& changes, Priced& p) {
    const double base = replay.baselineMs();
    const bool ranged = std::any_of(r.changes.begin(), r.changes.end(), [](const ChangeSpec& c) { return !c.low.empty() || !c.host_low.empty(); });
    std::future<ReplayResult> low, high, deflated;
    if (ranged) {
        low = std::async(std::launch::async, [&replay, c = changesAt(r, ctx, -1)] { return replay.replay(c); });
        high = std::async(std::launch::async, [&replay, c = changesAt(r, ctx, 1)] { return replay.replay(c); });
    }
    if (host.deflate) deflated = std::async(std::launch::async, [&replay, &changes] { return replay.replay(changes, true); });
    const ReplayResult res = replay.replay(changes);
    p.saving = base - res.step_ms;
    p.gpu_cut = res.gpu_cut_ms;
    p.host_cut = res.host_cut_ms;
    if (ranged) {
        const double a = base - low.get().step_ms, b = base - high.get().step_ms;
        p.low = std::max(0.0, std::min(a, b));
        p.high = std::max(0.0, std::max(a, b));
        if (p.saving < p.low - 0.005 || p.saving > p.high + 0.005) {
            // Not monotonic in the fix's amount: in a short trace whose host ran far ahead, a
            // GPU that gets faster first drains the host's lead, then waits for the host.
            p.low = std::min(p.low, std::max(0.0, p.saving));
            p.high = std::max(p.high, p.saving);
            p.doubts.push_back("the replay is not steady over this trace's few steps (the host's lead over the GPU drains "
                               "within them): record more steps for a firmer figure");
        }
        if (p.high - p.low >= 0.005 && p.high - p.low > 2 * kCertainSpread * std::max(0.0, p.saving))
            p.doubts.insert(p.doubts.begin(), fmt::format("the fix's effect in this code is known only roughly: {:.2f} to {:.2f} ms a step", p.low, p.high));
    }
    if (!host.deflate) return;
    // The same share of the step without the recorder's cost, in ms of the step as measured.
    const double share = (host.deflated_ms - deflated.get().step_ms) / host.deflated_ms;
    const double end = std::max(0.0, share * host.step_ms), estimate = std::max(0.0, p.saving);
    p.low = std::min(std::isnan(p.low) ? estimate : p.low, end);
    p.high = std::max(std::isnan(p.high) ? estimate : p.high, end);
    p.doubts.push_back(fmt::format(
        "the step waits for the host, and its recorded host time includes the recorder's cost ({}: about {:.1f} us an op or API "
        "call): replayed without it the step takes {:.2f} ms instead of {:.2f} and the fix saves {:.1f}% of it, the range's "
        "other end; unprofiled the step may be GPU-bound",
        replay.recorder(), replay.recorderCostUs(), host.deflated_ms, base, 100.0 * std::max(0.0, share)));
}

// The doubts of a replayed saving that come from the trace and the model, not from the fix.
void replayDoubts(const ReplayModel& replay, const HostSide& host, Priced& p) {
    const double base = replay.baselineMs(), measured = replay.measuredMs();
    if (std::abs(base - measured) > kReplayFidelity * measured)
        p.doubts.push_back(fmt::format("the replay reproduces the measured step only to within {:.0f}%",
                                       100.0 * std::abs(base - measured) / measured));
    if (host.host_bound && !host.deflate && replay.opsRecorded())
        p.doubts.push_back("the step waits for the host, whose recorded time includes the recorder's own cost per op (its "
                           "size unknown for this trace's recorder): in the job without it a fix's host-time saving may be "
                           "smaller and its GPU-time saving larger than replayed");
    if (!replay.launchesRecorded())
        p.doubts.push_back("launch calls not recorded: the replay keeps the GPU's idle gaps as they were");
    else if (!replay.opsRecorded())
        p.doubts.push_back("CPU ops not recorded: work removed takes only its launch calls' host time with it, not its ops'");
}

// Whether the rule's formula prices its fix here even with a replay at hand (formula_when holds).
bool byFormula(const Rule& r, const rules::EvalContext& ctx) { return !r.formula_when.empty() && r.formula_when.eval(ctx) > 0; }

// Whether every change's share is known (an unknown one leaves the rule to its formula).
bool knownAmounts(const std::vector<Change>& changes) {
    return std::none_of(changes.begin(), changes.end(), [](const Change& c) { return std::isnan(c.amount) || std::isnan(c.host_left); });
}

// The saving of a rule's fix: the replay of its changes where it states them and a model is at
// hand (and its formula_when does not hold), else its formula; with the range its effect may take
// and why it is uncertain.
Priced price(const Rule& r, const rules::EvalContext& ctx, const ReplayModel* replay, const HostSide& host) {
    Priced p;
    const bool by_formula = byFormula(r, ctx);
    const std::vector<Change> changes = by_formula ? std::vector<Change>{} : changesAt(r, ctx, 0);
    const bool known = knownAmounts(changes);
    if (by_formula) {
        p.saving = r.saving_ms.eval(ctx);
        p.doubts.push_back("priced by the rule's formula for the fix named here, not replayed (see how the saving is estimated)");
    } else if (!r.changes.empty() && replay && replay->usable() && known) {
        p.replayed = true;
        replayRange(r, ctx, *replay, host, changes, p);
        replayDoubts(*replay, host, p);
    } else if (!r.saving_ms.empty()) {
        p.saving = r.saving_ms.eval(ctx);
        if (!r.changes.empty())
            p.doubts.push_back(known ? "estimated by the rule's formula, not replayed (no GPU trace to replay)"
                                     : "estimated by the rule's formula, not replayed (the fix's share of the work is unknown here)");
    } else {
        p.saving = 0;
        p.doubts.push_back("not priced: no trace to replay");
    }
    if (std::isnan(p.saving) || p.saving < 0) p.saving = 0;
    if (!r.uncertainty.empty()) p.doubts.push_back(r.uncertainty);
    if (p.high - p.low < 0.005) p.low = p.high = NAN; // the range does not matter here
    return p;
}

// Where a fix cuts much more work than the step gains, the rest ran off the critical path.
std::string criticalPathNote(const Priced& p) {
    const double cut = p.gpu_cut + p.host_cut;
    if (!p.replayed || cut < 0.01 || p.saving > 0.5 * cut) return {};
    std::string what;
    if (p.gpu_cut >= 0.005) what = fmt::format("{:.2f} ms of GPU time", p.gpu_cut);
    if (p.host_cut >= 0.005) what += fmt::format("{}{:.2f} ms of host time", what.empty() ? "" : " and ", p.host_cut);
    const char* why = p.gpu_cut >= p.host_cut ? "the GPU's work there overlapped with waiting for the host"
                                              : "the host's work there overlapped with waiting for the GPU";
    return fmt::format("the fix cuts {} a step, but only {:.2f} ms of it lies on the step's critical path: {}", what, p.saving, why);
}

std::string joined(const std::vector<std::string>& parts, const char* sep) {
    std::string out;
    for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
    return out;
}

// The evidence a rule names: its metrics, then the top kernel classes and ops, per step.
std::vector<EvidenceRow> evidenceOf(const Rule& r, const rules::EvalContext& ctx, const Tables& t, double n) {
    std::vector<EvidenceRow> out;
    for (const std::string& m : r.evidence_metrics)
        out.push_back(EvidenceRow{EvidenceKind::Metric, m, 0, 0, ctx.metric(m)});
    auto top = [&](std::vector<EvidenceRow> rows) {
        std::sort(rows.begin(), rows.end(), [](const EvidenceRow& a, const EvidenceRow& b) { return a.ms > b.ms; });
        if (rows.size() > 6) rows.resize(6);
        out.insert(out.end(), rows.begin(), rows.end());
    };
    std::vector<EvidenceRow> classes;
    for (const GpuRow& row : t.kernel_classes) {
        const bool in_family = std::find(r.evidence_families.begin(), r.evidence_families.end(), row.family) != r.evidence_families.end();
        const bool named = std::any_of(r.evidence_classes.begin(), r.evidence_classes.end(),
                                       [&](const std::string& g) { return globMatch(g, row.name); });
        if (in_family || named)
            classes.push_back(EvidenceRow{EvidenceKind::KernelClass, row.name, double(row.calls) / n, double(row.total_ns) / 1e6 / n});
    }
    top(std::move(classes));
    std::vector<EvidenceRow> ops;
    for (const OpRow& row : t.ops)
        if (std::any_of(r.evidence_ops.begin(), r.evidence_ops.end(), [&](const std::string& g) { return globMatch(g, row.name); }))
            ops.push_back(EvidenceRow{EvidenceKind::Op, row.name, double(row.calls) / n,
                                      double(row.device_total_ns > 0 ? row.device_total_ns : row.self_cpu_ns) / 1e6 / n});
    top(std::move(ops));
    return out;
}

// The rule's fix for this trace: the first [[fixes]] variant that holds in place of its own, then
// the sentence of each [[fix_if]] that holds.
std::string fixFor(const Rule& r, const rules::EvalContext& ctx) {
    auto holds = [&](const ConditionalFix& c) {
        const double v = c.when.eval(ctx);
        return !std::isnan(v) && v != 0;
    };
    std::string fix = r.fix;
    for (const ConditionalFix& c : r.conditional_fixes)
        if (c.mode == ConditionalFix::Mode::Replace && holds(c)) {
            fix = c.text;
            break;
        }
    for (const ConditionalFix& c : r.conditional_fixes)
        if (c.mode == ConditionalFix::Mode::Add && holds(c)) fix += " " + c.text;
    return fix;
}

rules::EvalContext contextOf(const Metrics& metrics) {
    rules::EvalContext ctx;
    ctx.metric = [&metrics](const std::string& name) { return metrics.value(name); };
    ctx.table = [&metrics](const rules::TableFunction& f, const std::string& arg) { return f.value(metrics, arg); };
    return ctx;
}

// The rule's changes at its estimate where it fires and price() would replay its fix; none otherwise.
std::vector<Change> replayedChanges(const Rule& r, const rules::EvalContext& ctx) {
    const double fires = r.when.eval(ctx);
    if (std::isnan(fires) || fires == 0 || r.changes.empty() || byFormula(r, ctx)) return {};
    std::vector<Change> changes = changesAt(r, ctx, 0);
    return knownAmounts(changes) ? changes : std::vector<Change>{};
}

} // namespace

CombinedSaving RuleSet::combined(const Metrics& metrics, const ReplayModel& replay, const std::vector<std::string>& ids) const {
    const rules::EvalContext ctx = contextOf(metrics);
    CombinedSaving out;
    std::vector<Change> changes;
    for (const std::string& id : ids) {
        auto it = std::find_if(m_rules.begin(), m_rules.end(), [&](const auto& rp) { return rp->id == id; });
        const std::vector<Change> c = it == m_rules.end() || !replay.usable() ? std::vector<Change>{} : replayedChanges(**it, ctx);
        if (c.empty()) {
            out.left_out.push_back(id);
            continue;
        }
        changes.insert(changes.end(), c.begin(), c.end());
        out.rules.push_back(id);
    }
    if (out.rules.empty()) return out;
    const double base = replay.baselineMs(), step_ms = metrics.value("step.time_ms");
    out.saving_ms = std::max(0.0, base - replay.replay(changes).step_ms);
    if (!std::isnan(step_ms)) out.saving_ms = std::min(out.saving_ms, step_ms);
    out.saving_pct = step_ms > 0 ? 100.0 * out.saving_ms / step_ms : NAN;
    return out;
}

std::vector<Finding> RuleSet::evaluate(const Metrics& metrics, const ReplayModel* replay) const {
    const double n = std::max<double>(1.0, double(metrics.steady.size()));
    const Tables& t = metrics.steady_tables;
    const rules::EvalContext ctx = contextOf(metrics);
    const double step_ms = ctx.metric("step.time_ms");
    const HostSide host = hostSide(ctx, replay);

    std::vector<Finding> out;
    for (const auto& rp : m_rules) {
        const Rule& r = *rp;
        const double fires = r.when.eval(ctx);
        if (std::isnan(fires) || fires == 0)
            continue;
        Finding f;
        f.rule = r.id;
        f.title = r.title;
        f.fix = fixFor(r, ctx);
        f.saving_explained = r.saving_explained;
        f.source = r.source;
        const Priced priced = price(r, ctx, replay, host);
        auto clip = [&](double v) { return std::isnan(step_ms) || std::isnan(v) ? v : std::min(v, step_ms); };
        f.saving_ms = clip(priced.saving);
        f.saving_low_ms = clip(priced.low);
        f.saving_high_ms = clip(priced.high);
        f.replayed = priced.replayed;
        f.uncertainty = joined(priced.doubts, "; ");
        f.critical_path = criticalPathNote(priced);
        f.saving_pct = step_ms > 0 ? 100.0 * f.saving_ms / step_ms : 0.0;
        f.severity = r.severity;
        if (!std::isnan(r.escalate_pct) && f.saving_pct >= r.escalate_pct)
            f.severity = Severity::Error;
        // A fix worth under 1% of the step is minor: at most info, and listed apart.
        if (!r.correctness && f.saving_pct < kMinorPct) {
            f.minor = true;
            f.severity = Severity::Info;
        }
        if (!metrics.warmup_only.empty())
            f.unreliable = "measured on warm-up: " + metrics.warmup_only;
        for (const MessagePart& p : r.message)
            f.message += p.value.empty() ? p.literal : formatValue(p.value.eval(ctx), p.format);
        f.evidence = evidenceOf(r, ctx, t, n);
        out.push_back(std::move(f));
    }
    std::stable_sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
        if (a.minor != b.minor) return b.minor;
        if (a.severity != b.severity) return a.severity > b.severity;
        return a.saving_ms > b.saving_ms;
    });
    return out;
}

} // namespace sightline
