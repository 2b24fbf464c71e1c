// FLOPs of GEMM and attention ops from their recorded input shapes (docs/metrics.md, "FLOPs").
#include "sightline/metrics.h"

#include <regex>

namespace sightline {

namespace {

// "[[4096, 1024], [1024, 3072], []]" -> {{4096, 1024}, {1024, 3072}, {}}; scalars and strings are
// skipped. Returns false on anything else.
bool parseDims(std::string_view s, std::vector<std::vector<double>>& out) {
    out.clear();
    size_t i = 0;
    auto skip = [&] { while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == ',')) ++i; };
    skip();
    if (i >= s.size() || s[i] != '[') return false;
    ++i;
    for (;;) {
        skip();
        if (i >= s.size()) return false;
        if (s[i] == ']') return true;
        if (s[i] != '[') { // a non-tensor input: skip to the next comma at this level
            while (i < s.size() && s[i] != ',' && s[i] != ']') ++i;
            out.emplace_back();
            continue;
        }
        ++i;
        std::vector<double> dims;
        for (;;) {
            skip();
            if (i >= s.size()) return false;
            if (s[i] == ']') {
                ++i;
                break;
            }
            size_t j = i;
            while (j < s.size() && ((s[j] >= '0' && s[j] <= '9') || s[j] == '-')) ++j;
            if (j == i) return false;
            dims.push_back(std::stod(std::string(s.substr(i, j - i))));
            i = j;
        }
        out.push_back(std::move(dims));
    }
}

double product(const std::vector<double>& v) {
    double p = 1;
    for (double x : v) p *= x;
    return p;
}

// 2*M*K*N for [.., M, K] x [.., K, N], batch dims multiplied in.
double matmulFlops(const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() < 2 || b.size() < 2 || a.back() != b[b.size() - 2]) return NAN;
    std::vector<double> batch(a.begin(), a.end() - 2);
    return 2.0 * product(batch) * a[a.size() - 2] * a.back() * b.back();
}

// q [B, H, L, E], k [B, Hk, S, E], v [B, Hk, S, Ev]: Q K^T and P V.
double attentionFlops(const std::vector<std::vector<double>>& d, size_t q_at) {
    if (d.size() < q_at + 3) return NAN;
    const auto &q = d[q_at], &k = d[q_at + 1], &v = d[q_at + 2];
    if (q.size() != 4 || k.size() != 4 || v.size() != 4) return NAN;
    return 2.0 * q[0] * q[1] * q[2] * k[2] * (q[3] + v[3]);
}

} // namespace

double opFlops(std::string_view name, std::string_view input_dims) {
    if (input_dims.empty() || !name.starts_with("aten::"))
        return NAN;
    const std::string_view op = name.substr(6);
    const bool gemm = op == "mm" || op == "bmm" || op == "addmm" || op == "baddbmm";
    const bool attn_fwd = op == "_scaled_dot_product_flash_attention" || op == "_scaled_dot_product_efficient_attention" ||
        op == "_scaled_dot_product_cudnn_attention" || op == "_flash_attention_forward" ||
        op == "_efficient_attention_forward";
    const bool attn_bwd = op == "_scaled_dot_product_flash_attention_backward" ||
        op == "_scaled_dot_product_efficient_attention_backward" ||
        op == "_scaled_dot_product_cudnn_attention_backward" || op == "_flash_attention_backward" ||
        op == "_efficient_attention_backward";
    if (!gemm && !attn_fwd && !attn_bwd)
        return NAN;
    std::vector<std::vector<double>> d;
    if (!parseDims(input_dims, d))
        return NAN;
    if (op == "mm" || op == "bmm")
        return d.size() >= 2 ? matmulFlops(d[0], d[1]) : NAN;
    if (op == "addmm" || op == "baddbmm")
        return d.size() >= 3 ? matmulFlops(d[1], d[2]) : NAN;
    if (attn_fwd)
        return attentionFlops(d, 0);
    // Backward: grad_out first, then q, k, v; two matmuls per forward one.
    return 2.0 * attentionFlops(d, 1);
}

extern const char* const kGpuPeaksTsv;

double peakTflops(std::string_view device_name) {
    struct Peak {
        std::regex pattern;
        double tflops;
    };
    static const std::vector<Peak> peaks = [] {
        std::vector<Peak> out;
        std::string_view text = kGpuPeaksTsv;
        size_t pos = 0;
        while (pos < text.size()) {
            size_t eol = text.find('\n', pos);
            if (eol == std::string_view::npos) eol = text.size();
            std::string_view line = text.substr(pos, eol - pos);
            pos = eol + 1;
            if (line.empty() || line[0] == '#') continue;
            const size_t t1 = line.find('\t'), t2 = line.find('\t', t1 + 1);
            if (t1 == std::string_view::npos) continue;
            out.push_back(Peak{std::regex(std::string(line.substr(0, t1))),
                               std::stod(std::string(line.substr(t1 + 1, t2 - t1 - 1)))});
        }
        return out;
    }();
    const std::string name(device_name);
    for (const Peak& p : peaks)
        if (std::regex_search(name, p.pattern))
            return p.tflops;
    return NAN;
}

} // namespace sightline
