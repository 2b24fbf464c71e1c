// sightline: the command-line front end.
#include "attach.h"
#include "padding.h"
#include "export.h"
#include "ranks.h"
#include "progress.h"
#include "run.h"
#include "sightline/report/diff.h"
#include "sightline/report/report.h"
#include "sightline/error.h"
#include "sightline/rules.h"
#include "sightline/import.h"
#include "sightline/tables.h"
#include "sightline/taxonomy.h"
#include "sightline/trace_db.h"

#include <cstdio>
#include <fstream>
#include <map>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace {

using namespace sightline;

Trace load(const std::string& path) {
    ProgressBar bar("importing");
    Trace t = importTrace(path, [&](double f) { bar.update(f); });
    bar.finish();
    return t;
}

void writeOutput(const std::string& text, const std::string& path) {
    if (path.empty() || path == "-") {
        std::fwrite(text.data(), 1, text.size(), stdout);
        return;
    }
    std::ofstream out(path, std::ios::binary);
    if (!out || !out.write(text.data(), std::streamsize(text.size())))
        throw InputError(fmt::format("{}: cannot write the report", path));
}

RuleSet loadRules(const std::vector<std::string>& dirs) {
    RuleSet rules = RuleSet::builtin();
    for (const std::string& d : dirs)
        rules.addPath(d);
    for (const RuleError& e : rules.errors())
        std::fprintf(stderr, "sightline: rule skipped: %s\n", e.message.c_str());
    return rules;
}

int runReport(const std::string& trace_path, const std::string& format, long limit, const std::string& sort,
              const std::string& kernel_sort, const std::string& taxonomy_path, const std::string& save_db,
              const std::string& output, const std::vector<std::string>& rule_dirs, const std::string& fail_on,
              const std::string& step) {
    static const std::map<std::string, OpSort> op_sorts = {
        {"self_cpu", OpSort::SelfCpu}, {"cpu_total", OpSort::CpuTotal}, {"self_device", OpSort::SelfDevice},
        {"device_total", OpSort::DeviceTotal}, {"calls", OpSort::Calls}, {"name", OpSort::Name}};
    static const std::map<std::string, GpuSort> gpu_sorts = {
        {"total", GpuSort::Total}, {"calls", GpuSort::Calls}, {"avg", GpuSort::Avg}, {"max", GpuSort::Max},
        {"name", GpuSort::Name}};
    ReportOptions options;
    options.step = step;
    options.op_sort = op_sorts.at(sort);
    options.gpu_sort = gpu_sorts.at(kernel_sort);
    if (format == "json") // JSON is for machines: every row unless a limit is asked for
        options.op_rows = options.class_rows = options.kernel_rows = 0;
    if (limit >= 0)
        options.op_rows = options.class_rows = options.kernel_rows = size_t(limit);

    const Taxonomy taxonomy = taxonomy_path.empty() ? Taxonomy::builtin() : Taxonomy::withUserRules(taxonomy_path);
    Trace trace = load(trace_path);
    requireReportable(trace);
    if (!save_db.empty()) {
        ProgressBar bar("saving database");
        writeTraceDb(trace, save_db, [&](double f) { bar.update(f); });
    }
    const RuleSet rules = loadRules(rule_dirs);
    const Report report = buildReport(trace, opTreeOf(trace, trace_path), taxonomy, rules, options);
    const std::string text = format == "json"    ? formatJson(report, options)
                             : format == "md"    ? formatMarkdown(report, options)
                             : format == "sarif" ? formatSarif(report)
                                                 : formatText(report, options);
    writeOutput(text, output);
    if (!fail_on.empty()) {
        Severity threshold = Severity::Error;
        parseSeverity(fail_on, threshold);
        size_t failing = 0;
        for (const Finding& f : report.findings)
            failing += f.severity >= threshold;
        if (failing) {
            std::fprintf(stderr, "sightline: %zu finding(s) at or above %s\n", failing, fail_on.c_str());
            return 4;
        }
    }
    return 0;
}

int runDiff(const std::string& before_path, const std::string& after_path, const std::string& max_regression,
            const std::string& format, long limit, const std::vector<std::string>& rule_dirs, const std::string& output) {
    std::string pct = max_regression;
    if (!pct.empty() && pct.back() == '%') pct.pop_back();
    double limit_pct = 0;
    try {
        size_t used = 0;
        limit_pct = std::stod(pct, &used);
        if (used != pct.size() || limit_pct < 0) throw std::invalid_argument("x");
    } catch (const std::exception&) {
        throw InputError(fmt::format("--max-regression: '{}' is not a percentage such as 5%", max_regression));
    }
    const RuleSet rules = loadRules(rule_dirs);
    ReportOptions options;
    auto reportOf = [&](const std::string& path) {
        Trace t = load(path);
        requireReportable(t);
        return buildReport(t, opTreeOf(t, path), Taxonomy::builtin(), rules, options);
    };
    const Report before = reportOf(before_path);
    const Report after = reportOf(after_path);
    const Diff d = computeDiff(before, after, limit_pct);
    const size_t rows = limit < 0 ? 15 : size_t(limit);
    writeOutput(format == "json" ? formatDiffJson(d) : formatDiffText(d, rows, format == "md"), output);
    if (d.regression()) {
        std::fprintf(stderr, "sightline: regression: step time %+.1f%% (limit +%.1f%%)\n", d.stepChangePct(), limit_pct);
        return 5;
    }
    return 0;
}

int runRules(const std::string& action, const std::string& id, const std::vector<std::string>& rule_dirs) {
    const RuleSet rules = loadRules(rule_dirs);
    if (action == "list") {
        for (const std::string& rid : rules.ids()) {
            const std::string text = rules.explain(rid);
            std::printf("%s\n", text.substr(0, text.find('\n')).c_str());
        }
        return rules.errors().empty() ? 0 : 1;
    }
    const std::string text = rules.explain(id);
    if (text.empty())
        throw InputError(fmt::format("no rule '{}' (see: sightline rules list)", id));
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
}

int runImport(const std::string& trace_path, const std::string& db_path) {
    Trace trace = load(trace_path);
    ProgressBar bar("writing database");
    writeTraceDb(trace, db_path, [&](double f) { bar.update(f); });
    bar.finish();
    std::fprintf(stderr, "sightline: wrote %s (%zu CPU events, %zu GPU events)\n", db_path.c_str(),
                 trace.cpu.size(), trace.gpu.size());
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"Sightline: GPU training performance profiler and advisor"};
    app.set_version_flag("--version", "sightline " SIGHTLINE_VERSION);
    app.require_subcommand(1);

    std::string trace_path, format = "text", sort = "self_cpu", kernel_sort = "total", taxonomy, save_db, output;
    long limit = -1;
    CLI::App* report = app.add_subcommand("report", "Print the per-op and per-kernel tables of a trace");
    report->add_option("trace", trace_path, "PyTorch profiler JSON (.json/.json.gz) or Sightline trace database")
        ->required();
    report->add_option("--format,-f", format, "text (default), md, json or sarif")
        ->check(CLI::IsMember({"text", "md", "json", "sarif"}));
    report->add_option("--limit,-n", limit, "rows per table (0 = all; default 25/20/15 for text and md, all for json)")
        ->check(CLI::NonNegativeNumber);
    report->add_option("--sort", sort, "op table order: self_cpu, cpu_total, self_device, device_total, calls, name")
        ->check(CLI::IsMember({"self_cpu", "cpu_total", "self_device", "device_total", "calls", "name"}));
    report->add_option("--kernel-sort", kernel_sort, "GPU table order: total, calls, avg, max, name")
        ->check(CLI::IsMember({"total", "calls", "avg", "max", "name"}));
    report->add_option("--taxonomy", taxonomy, "extra kernel taxonomy rules (TSV), tried before the built-in ones")
        ->check(CLI::ExistingFile);
    report->add_option("--save-db", save_db, "also write the trace database to this file");
    report->add_option("--output,-o", output, "write the report to this file instead of stdout");
    std::vector<std::string> rule_dirs;
    std::string fail_on;
    report->add_option("--rules", rule_dirs, "rule files or directories of *.toml added to the built-in catalog "
                                             "(a rule with a built-in id replaces it)");
    std::string step;
    report->add_option("--step", step, "tables for one step (1, 2, ... in the order found), 'steady' (the steady-state steps) or 'all' (every step, nothing outside them)");
    report->add_option("--fail-on", fail_on, "exit with status 4 when a finding has this severity or worse")
        ->check(CLI::IsMember({"info", "warning", "error"}));

    std::string db_path;
    CLI::App* import = app.add_subcommand("import", "Import a trace into a Sightline trace database (SQLite)");
    import->add_option("trace", trace_path, "PyTorch profiler JSON (.json/.json.gz)")->required();
    import->add_option("--output,-o", db_path, "database to write")->required();

    std::string export_output;
    CLI::App* export_cmd = app.add_subcommand("export", "Write a trace as Chrome trace-event JSON for Perfetto or chrome://tracing");
    export_cmd->add_option("trace", trace_path, "any trace Sightline reads (capture, PyTorch profiler JSON, trace database)")->required();
    export_cmd->add_option("--output,-o", export_output, "JSON file to write (a name ending in .gz: gzip; -: standard output)")->required();
    export_cmd->add_option("--rules", rule_dirs, "extra rule files or directories (their findings are marked too)");

    std::string before_path, after_path, max_regression = "5%";
    CLI::App* diff = app.add_subcommand("diff", "Compare two traces: metrics, kernel classes, ops and findings per step");
    diff->add_option("before", before_path, "the trace before the change")->required();
    diff->add_option("after", after_path, "the trace after the change")->required();
    diff->add_option("--max-regression", max_regression, "exit with status 5 when the step time grows by more than this (default 5%)");
    diff->add_option("--format,-f", format, "text (default), md or json")->check(CLI::IsMember({"text", "md", "json"}));
    diff->add_option("--limit,-n", limit, "rows per table (default 15, 0 = all)")->check(CLI::NonNegativeNumber);
    diff->add_option("--rules", rule_dirs, "extra rule files or directories");
    diff->add_option("--output,-o", output, "write the diff to this file instead of stdout");

    std::string rules_action, rule_id;
    CLI::App* rules_cmd = app.add_subcommand("rules", "List the rules or explain one");
    rules_cmd->add_option("action", rules_action, "list or explain")->required()->check(CLI::IsMember({"list", "explain"}));
    rules_cmd->add_option("id", rule_id, "the rule to explain");
    rules_cmd->add_option("--rules", rule_dirs, "extra rule files or directories");

    RunOptions run_options;
    run_options.self_path = argv[0];
    CLI::App* run = app.add_subcommand("run", "Run a job with the collector and report on it: sightline run [options] -- COMMAND ...");
    run->add_option("--output,-o", run_options.output_dir, "directory for the captures (default: sightline-DATE-TIME)");
    run->add_flag("--shapes", run_options.shapes, "record op input shapes and dtypes (FLOPs, MFU)");
    run->add_flag("--hw", run_options.hw, "sample the GPU's hardware counters (SMs active, tensor pipes, DRAM; docs/hardware.md)");
    run->add_option("--hw-interval", run_options.hw_interval_us, "hardware sampling interval in microseconds (default 1000)")
        ->check(CLI::Range(1, 1000000));
    run->add_option("--activities", run_options.activities, "GPU activities to record, comma-separated: kernel, memcpy, memset, runtime, driver, sync, nvtx, overhead; or all. "
                   "Default: kernel,memcpy,memset,nvtx with kernels linked to ops by counting launch calls and host "
                   "synchronisations recorded (the light mode), or all where launches cannot be counted");
    run->add_option("--steps", run_options.steps, "record only steps A to B (A:B, counted from 1, both included) by the step convention of docs/metrics.md");
    run->add_flag("!--no-import", run_options.import, "only record; do not import or summarise");
    run->add_flag("!--no-python-adapter", run_options.python_adapter,
                  "do not inject the Python adapter (batches' tokens and padding, DataLoader waits; docs/adapter.md)");
    run->add_flag("--dormant", run_options.dormant, "start the job dormant: nothing is recorded until sightline attach PID opens a window");
    run->add_option("command", run_options.command, "the job to run")->required();
    run->prefix_command(false);

    PaddingOptions padding_options;
    CLI::App* padding = app.add_subcommand("padding", "Compare batching strategies (padded, bucketed, packed) on a trace's batches, "
                                                      "a JSONL dataset or a file of lengths");
    padding->add_option("input", padding_options.input, "a trace with recorded batches, a .jsonl dataset (input_ids or a length "
                                                        "field a line), or a file of sequence lengths")->required();
    padding->add_option("--budget", padding_options.budget, "tokens a batch (default: the trace's largest batch)")
        ->check(CLI::PositiveNumber);
    padding->add_option("--costs", padding_options.costs, "a trace whose measured step costs price the batchings of a dataset")
        ->check(CLI::ExistingFile);
    padding->add_option("--seed", padding_options.seed, "seed of the random order (default 0)");
    padding->add_option("--format,-f", padding_options.format, "text (default) or json")->check(CLI::IsMember({"text", "json"}));
    padding->add_option("--output,-o", output, "write the comparison to this file instead of stdout");

    CLI::App* ps = app.add_subcommand("ps", "List this user's jobs that a capture window can be attached to");
    AttachOptions attach_options;
    CLI::App* attach = app.add_subcommand("attach", "Record a window of a running job started with SIGHTLINE_DORMANT=1");
    attach->add_option("pid", attach_options.pid, "the job's process id (see sightline ps)")->required();
    attach->add_option("--duration", attach_options.duration, "window length: 10s, 500ms, 2min");
    attach->add_option("--steps", attach_options.steps, "window of N steps (the step convention of docs/metrics.md)")->check(CLI::PositiveNumber);
    attach->add_flag("--shapes", attach_options.shapes, "record op input shapes in the window");
    attach->add_flag("--hw", attach_options.hw, "sample the GPU's hardware counters in the window (docs/hardware.md)");
    attach->add_option("--hw-interval", attach_options.hw_interval_us, "hardware sampling interval in microseconds (default 1000)")
        ->check(CLI::Range(1, 1000000));
    auto* attach_output = attach->add_option("--output,-o", attach_options.output, "also write the window's trace database here");
    attach->add_flag("!--no-import", attach_options.import, "only record the window; do not import or summarise it")->excludes(attach_output);

    std::vector<std::string> rank_inputs;
    CLI::App* ranks = app.add_subcommand("ranks", "Analyse the ranks of one multi-GPU job together: communication, waits, stragglers");
    ranks->add_option("traces", rank_inputs, "one trace per rank, or a directory holding them")->required();
    ranks->add_option("--format,-f", format, "text (default) or json")->check(CLI::IsMember({"text", "json"}));
    ranks->add_option("--output,-o", output, "write the report to this file instead of stdout");
    std::string merged;
    ranks->add_option("--merged", merged, "also write every rank on one timeline into this trace database (for sightline-gui)");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    try {
        if (*report)
            return runReport(trace_path, format, limit, sort, kernel_sort, taxonomy, save_db, output, rule_dirs, fail_on, step);
        if (*import)
            return runImport(trace_path, db_path);
        if (*export_cmd)
            return exportTrace(load(trace_path), trace_path, export_output, loadRules(rule_dirs));
        if (*run)
            return runProfiled(run_options);
        if (*ps)
            return listAttachable();
        if (*attach)
            return attachWindow(attach_options);
        if (*ranks) {
            writeOutput(ranksReport(rank_inputs, format, merged), output);
            return 0;
        }
        if (*padding) {
            writeOutput(paddingReport(padding_options), output);
            return 0;
        }
        if (*diff)
            return runDiff(before_path, after_path, max_regression, format, limit, rule_dirs, output);
        if (*rules_cmd) {
            if (rules_action == "explain" && rule_id.empty())
                throw InputError("rules explain needs a rule id (see: sightline rules list)");
            return runRules(rules_action, rule_id, rule_dirs);
        }
    } catch (const InputError& e) {
        std::fprintf(stderr, "sightline: %s\n", e.what());
        return 1;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "sightline: out of memory\n");
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "sightline: internal error: %s\n", e.what());
        return 3;
    }
    return 0;
}
