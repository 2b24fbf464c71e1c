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
#include <span>

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

// sightline report's options, as given on the command line.
struct ReportCommand {
    std::string trace_path;
    std::string format = "text";
    long limit = -1;
    std::string sort = "self_cpu";
    std::string kernel_sort = "total";
    std::string taxonomy_path;
    std::string save_db;
    std::string output;
    std::vector<std::string> rule_dirs;
    std::string fail_on;
    std::string step;
    std::vector<std::string> combine;
};

// sightline diff's options.
struct DiffCommand {
    std::string before_path, after_path;
    std::string max_regression = "5%";
    std::string format = "text";
    long limit = -1;
    std::vector<std::string> rule_dirs;
    std::string output;
};

template <class Entry>
std::vector<std::string> optionNames(std::span<const Entry> keys) {
    std::vector<std::string> out;
    for (const Entry& k : keys) out.push_back(k.option);
    return out;
}

template <class Entry>
auto keyOfOption(std::span<const Entry> keys, const std::string& option) {
    for (const Entry& k : keys)
        if (option == k.option) return k.key;
    throw InputError(fmt::format("no table order '{}'", option)); // CLI11 checks the choice first
}

std::string joined(const std::vector<std::string>& words) {
    std::string out;
    for (const std::string& w : words) out += (out.empty() ? "" : ", ") + w;
    return out;
}

ReportOptions reportOptionsOf(const ReportCommand& c) {
    ReportOptions options;
    options.step = c.step;
    options.combine = c.combine;
    options.op_sort = keyOfOption(opSortKeys(), c.sort);
    options.gpu_sort = keyOfOption(gpuSortKeys(), c.kernel_sort);
    if (c.format == "json") // JSON is for machines: every row unless a limit is asked for
        options.op_rows = options.class_rows = options.kernel_rows = 0;
    if (c.limit >= 0)
        options.op_rows = options.class_rows = options.kernel_rows = size_t(c.limit);
    return options;
}

// Exit status 4 when a finding is at or above --fail-on's severity.
int failOnStatus(const Report& report, const std::string& fail_on) {
    if (fail_on.empty()) return 0;
    Severity threshold = Severity::Error;
    parseSeverity(fail_on, threshold);
    size_t failing = 0;
    for (const Finding& f : report.findings)
        failing += f.severity >= threshold;
    if (!failing) return 0;
    std::fprintf(stderr, "sightline: %zu finding(s) at or above %s\n", failing, fail_on.c_str());
    return 4;
}

int runReport(const ReportCommand& c) {
    const ReportOptions options = reportOptionsOf(c);
    const Taxonomy taxonomy = c.taxonomy_path.empty() ? Taxonomy::builtin() : Taxonomy::withUserRules(c.taxonomy_path);
    Trace trace = load(c.trace_path);
    requireReportable(trace);
    if (!c.save_db.empty()) {
        ProgressBar bar("saving database");
        writeTraceDb(trace, c.save_db, [&](double f) { bar.update(f); });
    }
    const RuleSet rules = loadRules(c.rule_dirs);
    const std::vector<std::string> ids = rules.ids();
    for (const std::string& id : c.combine)
        if (std::find(ids.begin(), ids.end(), id) == ids.end())
            throw InputError(fmt::format("--combine: no rule '{}' (sightline rules list names them)", id));
    const Report report = buildReport(trace, opTreeOf(trace, c.trace_path), taxonomy, rules, options);
    const std::string text = c.format == "json" ? formatJson(report, options)
        : c.format == "md"                      ? formatMarkdown(report, options)
        : c.format == "sarif"                   ? formatSarif(report)
                                                : formatText(report, options);
    writeOutput(text, c.output);
    return failOnStatus(report, c.fail_on);
}

int runDiff(const DiffCommand& c) {
    std::string pct = c.max_regression;
    if (!pct.empty() && pct.back() == '%') pct.pop_back();
    double limit_pct = 0;
    try {
        size_t used = 0;
        limit_pct = std::stod(pct, &used);
        if (used != pct.size() || limit_pct < 0) throw std::invalid_argument("x");
    } catch (const std::exception&) {
        throw InputError(fmt::format("--max-regression: '{}' is not a percentage such as 5%", c.max_regression));
    }
    const RuleSet rules = loadRules(c.rule_dirs);
    ReportOptions options;
    auto reportOf = [&](const std::string& path) {
        Trace t = load(path);
        requireReportable(t);
        return buildReport(t, opTreeOf(t, path), Taxonomy::builtin(), rules, options);
    };
    const Report before = reportOf(c.before_path);
    const Report after = reportOf(c.after_path);
    const Diff d = computeDiff(before, after, limit_pct);
    const size_t rows = c.limit < 0 ? 15 : size_t(c.limit);
    writeOutput(c.format == "json" ? formatDiffJson(d) : formatDiffText(d, rows, c.format == "md"), c.output);
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

CLI::App* addReportCommand(CLI::App& app, ReportCommand& c) {
    CLI::App* report = app.add_subcommand("report", "Print the per-op and per-kernel tables of a trace");
    report->add_option("trace", c.trace_path, "PyTorch profiler JSON (.json/.json.gz) or Sightline trace database")
        ->required();
    report->add_option("--format,-f", c.format, "text (default), md, json or sarif")
        ->check(CLI::IsMember({"text", "md", "json", "sarif"}));
    report->add_option("--limit,-n", c.limit, "rows per table (0 = all; default 25/20/15 for text and md, all for json)")
        ->check(CLI::NonNegativeNumber);
    const std::vector<std::string> op_sorts = optionNames(opSortKeys()), gpu_sorts = optionNames(gpuSortKeys());
    report->add_option("--sort", c.sort, "op table order: " + joined(op_sorts))->check(CLI::IsMember(op_sorts));
    report->add_option("--kernel-sort", c.kernel_sort, "GPU table order: " + joined(gpu_sorts))->check(CLI::IsMember(gpu_sorts));
    report->add_option("--taxonomy", c.taxonomy_path, "extra kernel taxonomy rules (TSV), tried before the built-in ones")
        ->check(CLI::ExistingFile);
    report->add_option("--save-db", c.save_db, "also write the trace database to this file");
    report->add_option("--output,-o", c.output, "write the report to this file instead of stdout");
    report->add_option("--rules", c.rule_dirs, "rule files or directories of *.toml added to the built-in catalog "
                                               "(a rule with a built-in id replaces it)");
    report->add_option("--step", c.step, "tables for one step (1, 2, ... in the order found), 'steady' (the steady-state steps) or 'all' (every step, nothing outside them)");
    report->add_option("--combine", c.combine, "rule ids whose fixes to replay together (comma-separated): what they save at once, where their findings overlap")
        ->delimiter(',');
    report->add_option("--fail-on", c.fail_on, "exit with status 4 when a finding has this severity or worse")
        ->check(CLI::IsMember({"info", "warning", "error"}));
    return report;
}

CLI::App* addDiffCommand(CLI::App& app, DiffCommand& c) {
    CLI::App* diff = app.add_subcommand("diff", "Compare two traces: metrics, kernel classes, ops and findings per step");
    diff->add_option("before", c.before_path, "the trace before the change")->required();
    diff->add_option("after", c.after_path, "the trace after the change")->required();
    diff->add_option("--max-regression", c.max_regression, "exit with status 5 when the step time grows by more than this (default 5%)");
    diff->add_option("--format,-f", c.format, "text (default), md or json")->check(CLI::IsMember({"text", "md", "json"}));
    diff->add_option("--limit,-n", c.limit, "rows per table (default 15, 0 = all)")->check(CLI::NonNegativeNumber);
    diff->add_option("--rules", c.rule_dirs, "extra rule files or directories");
    diff->add_option("--output,-o", c.output, "write the diff to this file instead of stdout");
    return diff;
}

CLI::App* addRunCommand(CLI::App& app, RunOptions& o) {
    CLI::App* run = app.add_subcommand("run", "Run a job with the collector and report on it: sightline run [options] -- COMMAND ...");
    run->add_option("--output,-o", o.output_dir, "directory for the captures (default: sightline-DATE-TIME)");
    run->add_flag("--shapes", o.shapes, "record op input shapes and dtypes (FLOPs, MFU)");
    run->add_flag("--hw", o.hw, "sample the GPU's hardware counters (SMs active, tensor pipes, DRAM; docs/hardware.md)");
    run->add_option("--hw-interval", o.hw_interval_us, "hardware sampling interval in microseconds (default 1000)")
        ->check(CLI::Range(1, 1000000));
    run->add_option("--activities", o.activities, "GPU activities to record, comma-separated: kernel, memcpy, memset, runtime, driver, sync, nvtx, overhead; or all. "
                                                  "Default: kernel,memcpy,memset,nvtx with kernels linked to ops by counting launch calls and host "
                                                  "synchronisations recorded (the light mode), or all where launches cannot be counted");
    run->add_option("--steps", o.steps, "record only steps A to B (A:B, counted from 1, both included) by the step convention of docs/metrics.md");
    run->add_flag("!--no-import", o.import, "only record; do not import or summarise");
    run->add_flag("!--no-python-adapter", o.python_adapter,
                  "do not inject the Python adapter (batches' tokens and padding, DataLoader waits; docs/adapter.md)");
    run->add_flag("--dormant", o.dormant, "start the job dormant: nothing is recorded until sightline attach PID opens a window");
    run->add_option("command", o.command, "the job to run")->required();
    run->prefix_command(false);
    return run;
}

CLI::App* addPaddingCommand(CLI::App& app, PaddingOptions& o, std::string& output) {
    CLI::App* padding = app.add_subcommand("padding", "Compare batching strategies (padded, bucketed, packed) on a trace's batches, "
                                                      "a JSONL dataset or a file of lengths");
    padding->add_option("input", o.input, "a trace with recorded batches, a .jsonl dataset (input_ids or a length "
                                          "field a line), or a file of sequence lengths")
        ->required();
    padding->add_option("--budget", o.budget, "tokens a batch (default: the trace's largest batch)")
        ->check(CLI::PositiveNumber);
    padding->add_option("--costs", o.costs, "a trace whose measured step costs price the batchings of a dataset")
        ->check(CLI::ExistingFile);
    padding->add_option("--seed", o.seed, "seed of the random order (default 0)");
    padding->add_option("--format,-f", o.format, "text (default) or json")->check(CLI::IsMember({"text", "json"}));
    padding->add_option("--output,-o", output, "write the comparison to this file instead of stdout");
    return padding;
}

CLI::App* addAttachCommand(CLI::App& app, AttachOptions& o) {
    CLI::App* attach = app.add_subcommand("attach", "Record a window of a running job started with SIGHTLINE_DORMANT=1");
    attach->add_option("pid", o.pid, "the job's process id (see sightline ps)")->required();
    attach->add_option("--duration", o.duration, "window length: 10s, 500ms, 2min");
    attach->add_option("--steps", o.steps, "window of N steps (the step convention of docs/metrics.md)")->check(CLI::PositiveNumber);
    attach->add_flag("--shapes", o.shapes, "record op input shapes in the window");
    attach->add_flag("--hw", o.hw, "sample the GPU's hardware counters in the window (docs/hardware.md)");
    attach->add_option("--hw-interval", o.hw_interval_us, "hardware sampling interval in microseconds (default 1000)")
        ->check(CLI::Range(1, 1000000));
    auto* attach_output = attach->add_option("--output,-o", o.output, "also write the window's trace database here");
    attach->add_flag("!--no-import", o.import, "only record the window; do not import or summarise it")->excludes(attach_output);
    return attach;
}

// The smaller commands' options.
struct OtherCommands {
    std::string import_trace, db_path;
    std::string export_trace, export_output;
    std::string rules_action, rule_id;
    std::vector<std::string> rule_dirs;
    std::vector<std::string> rank_inputs;
    std::string ranks_format = "text", ranks_output, merged;
    std::string padding_output;
};

CLI::App* addImportCommand(CLI::App& app, OtherCommands& c) {
    CLI::App* import = app.add_subcommand("import", "Import a trace into a Sightline trace database (SQLite)");
    import->add_option("trace", c.import_trace, "PyTorch profiler JSON (.json/.json.gz)")->required();
    import->add_option("--output,-o", c.db_path, "database to write")->required();
    return import;
}

CLI::App* addExportCommand(CLI::App& app, OtherCommands& c) {
    CLI::App* e = app.add_subcommand("export", "Write a trace as Chrome trace-event JSON for Perfetto or chrome://tracing");
    e->add_option("trace", c.export_trace, "any trace Sightline reads (capture, PyTorch profiler JSON, trace database)")->required();
    e->add_option("--output,-o", c.export_output, "JSON file to write (a name ending in .gz: gzip; -: standard output)")->required();
    e->add_option("--rules", c.rule_dirs, "extra rule files or directories (their findings are marked too)");
    return e;
}

CLI::App* addRulesCommand(CLI::App& app, OtherCommands& c) {
    CLI::App* rules = app.add_subcommand("rules", "List the rules or explain one");
    rules->add_option("action", c.rules_action, "list or explain")->required()->check(CLI::IsMember({"list", "explain"}));
    rules->add_option("id", c.rule_id, "the rule to explain");
    rules->add_option("--rules", c.rule_dirs, "extra rule files or directories");
    return rules;
}

CLI::App* addRanksCommand(CLI::App& app, OtherCommands& c) {
    CLI::App* ranks = app.add_subcommand("ranks", "Analyse the ranks of one multi-GPU job together: communication, waits, stragglers");
    ranks->add_option("traces", c.rank_inputs, "one trace per rank, or a directory holding them")->required();
    ranks->add_option("--format,-f", c.ranks_format, "text (default) or json")->check(CLI::IsMember({"text", "json"}));
    ranks->add_option("--output,-o", c.ranks_output, "write the report to this file instead of stdout");
    ranks->add_option("--merged", c.merged, "also write every rank on one timeline into this trace database (for sightline-gui)");
    return ranks;
}

// Every subcommand's options, and which subcommand was given.
struct CommandLine {
    ReportCommand report;
    DiffCommand diff;
    RunOptions run;
    PaddingOptions padding;
    AttachOptions attach;
    OtherCommands other;
    CLI::App *report_cmd, *import_cmd, *export_cmd, *diff_cmd, *rules_cmd, *run_cmd, *padding_cmd, *ps_cmd, *attach_cmd, *ranks_cmd;

    explicit CommandLine(CLI::App& app, const char* self_path) {
        run.self_path = self_path;
        report_cmd = addReportCommand(app, report);
        import_cmd = addImportCommand(app, other);
        export_cmd = addExportCommand(app, other);
        diff_cmd = addDiffCommand(app, diff);
        rules_cmd = addRulesCommand(app, other);
        run_cmd = addRunCommand(app, run);
        padding_cmd = addPaddingCommand(app, padding, other.padding_output);
        ps_cmd = app.add_subcommand("ps", "List this user's jobs that a capture window can be attached to");
        attach_cmd = addAttachCommand(app, attach);
        ranks_cmd = addRanksCommand(app, other);
    }
};

// A first word that is neither an option nor a subcommand: the line that names it (CLI11 would
// say only that a subcommand is required). Empty when the first word is fine.
std::string unknownCommand(CLI::App& app, int argc, char** argv) {
    if (argc < 2 || argv[1][0] == '-') return {};
    std::string names;
    for (const CLI::App* s : app.get_subcommands([](CLI::App*) { return true; })) {
        if (s->get_name() == argv[1]) return {};
        names += (names.empty() ? "" : ", ") + s->get_name();
    }
    return fmt::format("unknown command '{}' (commands: {}; see sightline --help)", argv[1], names);
}

int dispatch(const CommandLine& c) {
    if (*c.report_cmd)
        return runReport(c.report);
    if (*c.import_cmd)
        return runImport(c.other.import_trace, c.other.db_path);
    if (*c.export_cmd)
        return exportTrace(load(c.other.export_trace), c.other.export_trace, c.other.export_output, loadRules(c.other.rule_dirs));
    if (*c.run_cmd)
        return runProfiled(c.run);
    if (*c.ps_cmd)
        return listAttachable();
    if (*c.attach_cmd)
        return attachWindow(c.attach);
    if (*c.ranks_cmd) {
        writeOutput(ranksReport(c.other.rank_inputs, c.other.ranks_format, c.other.merged), c.other.ranks_output);
        return 0;
    }
    if (*c.padding_cmd) {
        writeOutput(paddingReport(c.padding), c.other.padding_output);
        return 0;
    }
    if (*c.diff_cmd)
        return runDiff(c.diff);
    if (*c.rules_cmd) {
        if (c.other.rules_action == "explain" && c.other.rule_id.empty())
            throw InputError("rules explain needs a rule id (see: sightline rules list)");
        return runRules(c.other.rules_action, c.other.rule_id, c.other.rule_dirs);
    }
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"Sightline: GPU training performance profiler and advisor"};
    app.set_version_flag("--version", "sightline " SIGHTLINE_VERSION);
    app.require_subcommand(1);
    CommandLine command_line(app, argv[0]);
    if (const std::string unknown = unknownCommand(app, argc, argv); !unknown.empty()) {
        std::fprintf(stderr, "sightline: %s\n", unknown.c_str());
        return 1;
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    try {
        return dispatch(command_line);
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
}
