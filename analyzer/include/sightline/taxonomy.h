#pragma once
// The kernel taxonomy: GPU activity names -> family and readable class, from a rule table kept as
// data (analyzer/data/kernel_taxonomy.tsv, compiled in; users may put rules of their own first).
#include <filesystem>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

namespace sightline {

struct KernelClass {
    std::string family; // gemm, attention, elementwise, memcpy, ...
    std::string name;   // readable class, e.g. "Elementwise add", "nvjet GEMM", "Memcpy DtoD"
    // A collective's kernel (NCCL): communication rather than compute.
    bool isCommunication() const { return family == "nccl"; }
};

class Taxonomy {
public:
    // The built-in rules.
    static const Taxonomy& builtin();
    // Parses rules in the TSV format; throws InputError naming `source` and the line on errors.
    static Taxonomy parse(std::string_view text, const std::string& source);
    // User rules from a file first, then the built-in ones.
    static Taxonomy withUserRules(const std::filesystem::path& path);

    KernelClass classify(std::string_view name) const;
    size_t ruleCount() const { return m_rules.size(); }

private:
    struct Rule {
        std::string family;
        std::string class_template;
        std::regex pattern;
    };
    std::vector<Rule> m_rules;
};

// "void at::native::(anonymous namespace)::foo_kernel<...>(...)" -> "foo_kernel".
std::string shortKernelName(std::string_view name);

} // namespace sightline
