#include "sightline/taxonomy.h"

#include "sightline/error.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace sightline {

extern const char* const kBuiltinTaxonomyTsv; // generated from data/kernel_taxonomy.tsv

Taxonomy Taxonomy::parse(std::string_view text, const std::string& source) {
    Taxonomy t;
    size_t line_no = 0;
    size_t pos = 0;
    while (pos <= text.size()) {
        size_t eol = text.find('\n', pos);
        if (eol == std::string_view::npos)
            eol = text.size();
        std::string_view line = text.substr(pos, eol - pos);
        pos = eol + 1;
        ++line_no;
        if (!line.empty() && line.back() == '\r')
            line.remove_suffix(1);
        if (line.empty() || line[0] == '#')
            continue;
        const size_t t1 = line.find('\t');
        const size_t t2 = t1 == std::string_view::npos ? t1 : line.find('\t', t1 + 1);
        if (t2 == std::string_view::npos)
            throw InputError(fmt::format("{}:{}: expected three tab-separated fields: family, class, regex", source, line_no));
        Rule r;
        r.family = std::string(line.substr(0, t1));
        r.class_template = std::string(line.substr(t1 + 1, t2 - t1 - 1));
        const std::string pattern(line.substr(t2 + 1));
        if (r.family.empty() || r.class_template.empty() || pattern.empty())
            throw InputError(fmt::format("{}:{}: family, class and regex must not be empty", source, line_no));
        try {
            r.pattern = std::regex(pattern, std::regex::ECMAScript | std::regex::optimize);
        } catch (const std::regex_error& e) {
            throw InputError(fmt::format("{}:{}: bad regular expression '{}': {}", source, line_no, pattern, e.what()));
        }
        t.m_rules.push_back(std::move(r));
        if (eol == text.size())
            break;
    }
    return t;
}

const Taxonomy& Taxonomy::builtin() {
    static const Taxonomy t = parse(kBuiltinTaxonomyTsv, "kernel_taxonomy.tsv");
    return t;
}

Taxonomy Taxonomy::withUserRules(const std::filesystem::path& path) {
    std::ifstream in(path);
    if (!in)
        throw InputError(fmt::format("{}: cannot open taxonomy file", path.string()));
    std::stringstream ss;
    ss << in.rdbuf();
    Taxonomy t = parse(ss.str(), path.string());
    const Taxonomy& b = builtin();
    t.m_rules.insert(t.m_rules.end(), b.m_rules.begin(), b.m_rules.end());
    return t;
}

std::string shortKernelName(std::string_view name) {
    if (name.starts_with("void "))
        name.remove_prefix(5);
    // Cut at the first template or parameter list that is not part of "(anonymous namespace)".
    size_t cut = name.size();
    for (size_t i = 0; i < name.size(); ++i) {
        if (name[i] == '<' || (name[i] == '(' && name.substr(i).rfind("(anonymous namespace)", 0) != 0)) {
            cut = i;
            break;
        }
    }
    name = name.substr(0, cut);
    const size_t colons = name.rfind("::");
    if (colons != std::string_view::npos)
        name = name.substr(colons + 2);
    return std::string(name.empty() ? std::string_view("(unnamed)") : name);
}

KernelClass Taxonomy::classify(std::string_view name) const {
    const std::string text(name);
    std::smatch m;
    for (const Rule& r : m_rules) {
        if (!std::regex_search(text, m, r.pattern))
            continue;
        std::string out;
        out.reserve(r.class_template.size() + 16);
        for (size_t i = 0; i < r.class_template.size(); ++i) {
            const char c = r.class_template[i];
            if (c == '{' && i + 2 < r.class_template.size() && r.class_template[i + 2] == '}' &&
                r.class_template[i + 1] >= '1' && r.class_template[i + 1] <= '9') {
                const size_t g = size_t(r.class_template[i + 1] - '0');
                if (g < m.size())
                    out += m[g].str();
                i += 2;
            } else {
                out += c;
            }
        }
        return KernelClass{r.family, out};
    }
    return KernelClass{"other", shortKernelName(name)};
}

} // namespace sightline
