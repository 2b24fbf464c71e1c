#include "data.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace sightline::trainer {

std::vector<Example> loadJsonl(const std::filesystem::path& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error(path.string() + ": cannot open");
    std::vector<Example> out;
    std::string line;
    size_t line_no = 0;
    auto fail = [&](const std::string& why) {
        throw std::runtime_error(path.string() + ":" + std::to_string(line_no) + ": " + why);
    };
    while (std::getline(in, line)) {
        ++line_no;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(line);
        } catch (const nlohmann::json::parse_error&) {
            fail("not a JSON object");
        }
        if (!j.is_object() || !j.contains("input_ids") || !j["input_ids"].is_array()) fail("expected {\"input_ids\": [...]}");
        Example e;
        for (const auto& v : j["input_ids"]) {
            if (!v.is_number_integer() || v.get<int64_t>() < 0) fail("input_ids must be non-negative integers");
            e.input_ids.push_back(v.get<int32_t>());
        }
        if (e.input_ids.empty()) fail("empty input_ids");
        if (j.contains("labels")) {
            if (!j["labels"].is_array() || j["labels"].size() != e.input_ids.size()) fail("labels must match input_ids in length");
            for (const auto& v : j["labels"]) e.labels.push_back(v.get<int32_t>());
        } else if (j.contains("loss_mask")) {
            if (!j["loss_mask"].is_array() || j["loss_mask"].size() != e.input_ids.size()) fail("loss_mask must match input_ids in length");
            for (size_t i = 0; i < e.input_ids.size(); ++i) e.labels.push_back(j["loss_mask"][i].get<int>() ? e.input_ids[i] : -100);
        } else {
            e.labels = e.input_ids;
        }
        out.push_back(std::move(e));
    }
    return out;
}

void writeJsonl(const std::filesystem::path& path, const std::vector<Example>& examples) {
    std::ofstream out(path);
    if (!out) throw std::runtime_error(path.string() + ": cannot write");
    for (const Example& e : examples) out << nlohmann::json{{"input_ids", e.input_ids}, {"labels", e.labels}}.dump() << '\n';
    if (!out.flush()) throw std::runtime_error(path.string() + ": write failed");
}

std::vector<Example> syntheticExamples(const SyntheticSpec& s) {
    std::mt19937_64 rng(s.seed);
    std::lognormal_distribution<double> length(std::log(s.median_len), s.sigma);
    std::uniform_int_distribution<int32_t> token(1, int32_t(s.vocab_size - 1));
    std::vector<Example> out(s.examples);
    for (Example& e : out) {
        const int64_t n = std::clamp<int64_t>(int64_t(std::llround(length(rng))), s.min_len, s.max_len);
        e.input_ids.resize(size_t(n));
        for (auto& t : e.input_ids) t = token(rng);
        e.labels = e.input_ids;
        const size_t prompt = size_t(double(n) * 0.2);
        std::fill(e.labels.begin(), e.labels.begin() + long(prompt), -100);
    }
    return out;
}

std::vector<int64_t> PaddedBatch::rowLengths() const {
    std::vector<int64_t> out(size_t(rows), 0);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < columns; ++j) out[size_t(r)] += attention_mask[size_t(r * columns + j)];
    return out;
}

int64_t PaddedBatch::realTokens() const {
    int64_t n = 0;
    for (int64_t len : rowLengths()) n += len;
    return n;
}

std::vector<int32_t> PaddedBatch::segmentOffsets() const {
    std::vector<int32_t> cu{0};
    const std::vector<int64_t> lengths = rowLengths();
    for (int64_t r = 0; r < rows; ++r) {
        const int32_t row_start = int32_t(r * columns);
        if (lengths[size_t(r)] > 0) cu.push_back(row_start + int32_t(lengths[size_t(r)]));
        if (lengths[size_t(r)] < columns) cu.push_back(row_start + int32_t(columns));
    }
    return cu;
}

std::vector<int64_t> PackedBatch::exampleLengths() const {
    std::vector<int64_t> out;
    for (size_t i = 0; i < example_index.size(); ++i) out.push_back(cu_seqlens[i + 1] - cu_seqlens[i]);
    return out;
}

std::vector<int32_t> segmentIndex(const std::vector<int32_t>& cu_seqlens) {
    std::vector<int32_t> out(cu_seqlens.empty() ? 0 : size_t(cu_seqlens.back()));
    for (size_t s = 0; s + 1 < cu_seqlens.size(); ++s)
        std::fill(out.begin() + cu_seqlens[s], out.begin() + cu_seqlens[s + 1], int32_t(s));
    return out;
}

namespace {

// Appends `n` tokens of `e` to a packed row as one segment: positions from 0, its first label
// masked (it would be the previous example's prediction target).
void appendSegment(PackedBatch& b, const Example& e, size_t n) {
    const size_t at = b.input_ids.size();
    b.input_ids.insert(b.input_ids.end(), e.input_ids.begin(), e.input_ids.begin() + long(n));
    b.labels.insert(b.labels.end(), e.labels.begin(), e.labels.begin() + long(n));
    b.labels[at] = -100;
    for (size_t i = 0; i < n; ++i) b.position_ids.push_back(int32_t(i));
    b.cu_seqlens.push_back(int32_t(at + n));
}

} // namespace

std::vector<PackedBatch> packBatches(const std::vector<Example>& examples, int64_t budget, int32_t pad_id, bool fixed_length,
                                     BatchingStats* stats) {
    if (budget <= 0) throw std::invalid_argument("the token budget must be positive");
    std::vector<PackedBatch> out;
    PackedBatch row;
    row.cu_seqlens = {0};
    auto emit = [&] {
        if (row.example_index.empty()) return;
        row.real_tokens = int64_t(row.input_ids.size());
        const int64_t tail = fixed_length ? budget - row.real_tokens : 0;
        if (tail > 0) { // one padding segment: pad tokens, no loss, positions from 0
            row.input_ids.insert(row.input_ids.end(), size_t(tail), pad_id);
            row.labels.insert(row.labels.end(), size_t(tail), -100);
            for (int64_t i = 0; i < tail; ++i) row.position_ids.push_back(int32_t(i));
            row.cu_seqlens.push_back(int32_t(budget));
        }
        row.columns = int64_t(row.input_ids.size());
        out.push_back(std::move(row));
        row = PackedBatch{};
        row.cu_seqlens = {0};
    };
    for (size_t i = 0; i < examples.size(); ++i) {
        size_t n = examples[i].input_ids.size();
        if (int64_t(n) > budget) {
            n = size_t(budget);
            if (stats) ++stats->truncated;
        }
        if (int64_t(row.input_ids.size() + n) > budget) emit();
        appendSegment(row, examples[i], n);
        row.example_index.push_back(i);
    }
    emit();
    return out;
}

std::vector<PaddedBatch> padBatches(const std::vector<Example>& examples, int64_t budget, int32_t pad_id, BatchingStats* stats) {
    if (budget <= 0) throw std::invalid_argument("the token budget must be positive");
    std::vector<PaddedBatch> out;
    std::vector<size_t> current;
    int64_t longest = 0;
    auto emit = [&] {
        if (current.empty()) return;
        PaddedBatch b;
        b.rows = int64_t(current.size());
        b.columns = longest;
        b.input_ids.assign(size_t(b.rows * b.columns), pad_id);
        b.labels.assign(size_t(b.rows * b.columns), -100);
        b.attention_mask.assign(size_t(b.rows * b.columns), 0);
        for (size_t r = 0; r < current.size(); ++r) {
            const Example& e = examples[current[r]];
            const size_t n = std::min<size_t>(e.input_ids.size(), size_t(b.columns));
            std::copy_n(e.input_ids.begin(), n, b.input_ids.begin() + long(r * size_t(b.columns)));
            std::copy_n(e.labels.begin(), n, b.labels.begin() + long(r * size_t(b.columns)));
            std::fill_n(b.attention_mask.begin() + long(r * size_t(b.columns)), n, uint8_t(1));
        }
        b.example_index = current;
        out.push_back(std::move(b));
        current.clear();
        longest = 0;
    };
    for (size_t i = 0; i < examples.size(); ++i) {
        int64_t len = int64_t(examples[i].input_ids.size());
        if (len > budget) {
            len = budget;
            if (stats) ++stats->truncated;
        }
        const int64_t next_longest = std::max(longest, len);
        if (!current.empty() && next_longest * int64_t(current.size() + 1) > budget) emit();
        current.push_back(i);
        longest = std::max(longest, len);
    }
    emit();
    return out;
}

} // namespace sightline::trainer
