// What a step computes: FLOPs from recorded shapes, and tokens, padding and batches from
// sightline.batch annotations (docs/metrics.md).
#include "sightline/metric_passes.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <unordered_map>

namespace sightline {

namespace {

// "sightline.batch real_tokens=3000 padded_tokens=4096 sequences=3 packed=1 cu_seqlens=1"
void parseBatch(std::string_view text, StepMetrics& m) {
    size_t pos = text.find(' ');
    while (pos != std::string_view::npos && pos < text.size()) {
        while (pos < text.size() && text[pos] == ' ') ++pos;
        const size_t end = std::min(text.find(' ', pos), text.size());
        const std::string_view kv = text.substr(pos, end - pos);
        pos = end;
        const size_t eq = kv.find('=');
        if (eq == std::string_view::npos) continue;
        const std::string_view key = kv.substr(0, eq), val = kv.substr(eq + 1);
        double v = 0;
        if (std::from_chars(val.data(), val.data() + val.size(), v).ec != std::errc()) continue;
        auto add = [&](double& field) { field = (std::isnan(field) ? 0.0 : field) + v; };
        if (key == "real_tokens") add(m.real_tokens);
        else if (key == "padded_tokens") add(m.padded_tokens);
        else if (key == "sequences") add(m.sequences);
        else if (key == "packed") m.packed = m.packed || v != 0;
        else if (key == "cu_seqlens" || key == "boundaries") m.boundaries = m.boundaries || v != 0;
    }
}

} // namespace

void flopsPass(const MetricContext& ctx, std::vector<StepMetrics>& steps) {
    const Trace& trace = ctx.trace;
    for (size_t i = 0; i < trace.cpu.size(); ++i) {
        const CpuEvent& e = trace.cpu[i];
        if (ctx.cpu_step[i] < 0 || e.input_dims.empty() || !ctx.tree.counted[i]) continue;
        const double f = opFlops(trace.str(e.name), trace.str(e.input_dims));
        double& sum = steps[size_t(ctx.cpu_step[i])].flops;
        if (!std::isnan(f)) sum = (std::isnan(sum) ? 0.0 : sum) + f;
    }
}

void tokensPass(const MetricContext& ctx, std::vector<StepMetrics>& steps) {
    // A batch annotation counts once: the same text over a range inside (or around) one already
    // counted is the same batch recorded twice (a trainer that opens both a RecordFunction range,
    // which the bridge records, and an NVTX range, which CUPTI records, with one name).
    struct Span {
        int64_t start, end;
    };
    std::unordered_map<uint32_t, std::vector<Span>> seen_by_name;
    auto newBatch = [&](const CpuEvent& e) {
        std::vector<Span>& seen = seen_by_name[e.name.value];
        for (const Span& b : seen)
            if ((b.start <= e.start_ns && e.end_ns <= b.end) || (e.start_ns <= b.start && b.end <= e.end_ns)) return false;
        seen.push_back({e.start_ns, e.end_ns});
        return true;
    };
    const Trace& trace = ctx.trace;
    for (size_t i = 0; i < trace.cpu.size(); ++i) {
        const CpuEvent& e = trace.cpu[i];
        if (!(ctx.flags(e.name) & MetricContext::kBatch) || !newBatch(e)) continue;
        int32_t s = ctx.cpu_step[i];
        if (s < 0) {
            // Batch annotations often sit just before the step range: give them to the next step.
            auto it = std::upper_bound(ctx.steps.begin(), ctx.steps.end(), e.start_ns, [](int64_t v, const Step& st) { return v < st.start_ns; });
            if (it == ctx.steps.end()) continue;
            s = int32_t(it - ctx.steps.begin());
        }
        parseBatch(trace.str(e.name), steps[size_t(s)]);
    }
}

} // namespace sightline
