// Reading sightline.batch annotations (docs/metrics.md, "Token annotations").
#include "sightline/batches.h"

#include <algorithm>
#include <charconv>
#include <numeric>

namespace sightline {

namespace {

void add(double& field, double v) { field = (std::isnan(field) ? 0.0 : field) + v; }

bool parseLengths(std::string_view val, std::vector<int64_t>& out) {
    std::vector<int64_t> lengths;
    size_t at = 0;
    while (at < val.size()) {
        const size_t comma = std::min(val.find(',', at), val.size());
        int64_t n = 0;
        const auto [p, ec] = std::from_chars(val.data() + at, val.data() + comma, n);
        if (ec != std::errc() || p != val.data() + comma || n < 0) return false;
        lengths.push_back(n);
        at = comma + 1;
    }
    out.insert(out.end(), lengths.begin(), lengths.end());
    return true;
}

void setField(BatchRecord& b, std::string_view key, double v) {
    static const struct {
        std::string_view key;
        StackFlag flag;
    } stacks[] = {
        {"transformers", kStackTransformers}, {"hf_trainer", kStackHfTrainer}, {"trl", kStackTrl}, {"reference_trainer", kStackReferenceTrainer}};
    const bool on = v != 0;
    if (key == "real_tokens") add(b.real, v);
    else if (key == "padded_tokens") add(b.padded, v);
    else if (key == "sequences") add(b.sequences, v);
    else if (key == "ignored_tokens") add(b.ignored, v);
    else if (key == "packed") b.packed |= on;
    else if (key == "cu_seqlens") b.cu_seqlens |= on, b.boundaries |= on;
    else if (key == "boundaries") b.boundaries |= on;
    else if (key == "seq_idx") b.seq_idx |= on;
    else if (key == "id") b.id = int64_t(v);
    else if (key == "auto") b.automatic |= on;
    else if (key == "late") b.more |= on;
    else if (key == "cont") b.continuation |= on;
    for (const auto& s : stacks)
        if (key == s.key && on) b.stack |= s.flag;
}

} // namespace

void BatchRecord::merge(const BatchRecord& part) {
    for (auto [mine, theirs] : {std::pair{&real, part.real}, {&padded, part.padded}, {&sequences, part.sequences}, {&ignored, part.ignored}})
        if (!std::isnan(theirs)) add(*mine, theirs);
    packed |= part.packed;
    boundaries |= part.boundaries;
    cu_seqlens |= part.cu_seqlens;
    seq_idx |= part.seq_idx;
    lengths.insert(lengths.end(), part.lengths.begin(), part.lengths.end());
    stack |= part.stack;
    if (part.continuation) more = false; // the rest has come
}

BatchRecord parseBatchAnnotation(std::string_view text) {
    BatchRecord b;
    size_t pos = text.find(' ');
    while (pos != std::string_view::npos && pos < text.size()) {
        while (pos < text.size() && text[pos] == ' ') ++pos;
        const size_t end = std::min(text.find(' ', pos), text.size());
        const std::string_view kv = text.substr(pos, end - pos);
        pos = end;
        const size_t eq = kv.find('=');
        if (eq == std::string_view::npos) continue;
        const std::string_view key = kv.substr(0, eq), val = kv.substr(eq + 1);
        if (key == "lengths") {
            parseLengths(val, b.lengths);
            continue;
        }
        double v = 0;
        const auto [p, ec] = std::from_chars(val.data(), val.data() + val.size(), v);
        if (ec == std::errc() && p == val.data() + val.size()) setField(b, key, v);
    }
    return b;
}

std::vector<int64_t> lengthsOrApproximation(const BatchRecord& b, bool* approximate) {
    if (approximate) *approximate = false;
    if (!b.lengths.empty()) return b.lengths;
    if (std::isnan(b.real) || b.real <= 0) return {};
    if (approximate) *approximate = true;
    const int64_t real = int64_t(b.real);
    const int64_t n = std::max<int64_t>(1, std::isnan(b.sequences) ? 1 : int64_t(b.sequences));
    std::vector<int64_t> out;
    if (b.packed || std::isnan(b.padded) || n == 1) {
        for (int64_t i = 0; i < n; ++i) out.push_back(real / n + (i < real % n ? 1 : 0));
        return out;
    }
    // Padded: the longest row sets the rectangle's width; the other rows share the rest.
    const int64_t longest = std::min<int64_t>(real, int64_t(b.padded) / n);
    out.push_back(longest);
    const int64_t rest = real - longest;
    for (int64_t i = 0; i + 1 < n; ++i) out.push_back(std::min(longest, rest / (n - 1) + (i < rest % (n - 1) ? 1 : 0)));
    return out;
}

} // namespace sightline
