#pragma once
// Helpers of the trainer's numerical checks (trainer_checks_main.cpp): relative errors, a table of
// results, random inputs.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace sightline::trainer::checks {

// ||a - b|| / ||b|| in fp64 (0 when both are zero); NaN anywhere gives NaN.
inline double relError(const torch::Tensor& a, const torch::Tensor& b) {
    const torch::Tensor x = a.to(torch::kFloat64).cpu(), y = b.to(torch::kFloat64).cpu();
    const double denom = y.norm().item<double>(), num = (x - y).norm().item<double>();
    if (denom == 0) return num;
    return num / denom;
}

// The larger of two errors, NaN when either is (std::max would hide a NaN).
inline double worse(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }

// Each check's outcome, printed as a line; the program's exit status says whether all passed.
class Results {
public:
    // Passes when err is finite and at most limit.
    void expectClose(const std::string& what, double err, double limit) {
        const bool ok = std::isfinite(err) && err <= limit;
        record(what, ok, "rel. error " + fmt(err) + " (limit " + fmt(limit) + ")");
    }
    // Passes when err is at least floor (a missing boundary must show).
    void expectLarge(const std::string& what, double err, double floor) {
        record(what, std::isfinite(err) && err >= floor, "rel. error " + fmt(err) + " (must be at least " + fmt(floor) + ")");
    }
    void expectTrue(const std::string& what, bool ok, const std::string& detail) { record(what, ok, detail); }
    int failures() const { return m_failures; }
    int total() const { return m_total; }

private:
    static std::string fmt(double v) {
        char b[32];
        std::snprintf(b, sizeof b, "%.3g", v);
        return b;
    }
    void record(const std::string& what, bool ok, const std::string& detail) {
        ++m_total;
        m_failures += ok ? 0 : 1;
        std::printf("%-4s %-64s %s\n", ok ? "ok" : "FAIL", what.c_str(), detail.c_str());
        std::fflush(stdout);
    }
    int m_failures = 0, m_total = 0;
};

// Cumulative offsets of segments of the given lengths.
inline std::vector<int32_t> offsetsOf(const std::vector<int32_t>& lengths) {
    std::vector<int32_t> cu{0};
    for (int32_t n : lengths) cu.push_back(cu.back() + n);
    return cu;
}

} // namespace sightline::trainer::checks
