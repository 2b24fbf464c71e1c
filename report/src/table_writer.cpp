#include "sightline/report/table_writer.h"

#include <algorithm>

#include <fmt/format.h>

namespace sightline {

namespace {

std::string clip(const std::string& s, size_t max_width) {
    if (max_width == 0 || s.size() <= max_width)
        return s;
    return s.substr(0, max_width - 3) + "...";
}

} // namespace

std::string TextTable::renderText() const {
    std::vector<size_t> width(columns.size());
    for (size_t c = 0; c < columns.size(); ++c) {
        width[c] = clip(columns[c].header, columns[c].max_width).size();
        for (const auto& row : rows)
            width[c] = std::max(width[c], clip(row[c], columns[c].max_width).size());
    }
    std::string out;
    auto line = [&](auto cell) {
        std::string l;
        for (size_t c = 0; c < columns.size(); ++c) {
            const std::string s = clip(cell(c), columns[c].max_width);
            if (c) l += "  ";
            const std::string pad(width[c] - s.size(), ' ');
            l += columns[c].right ? pad + s : s + pad;
        }
        while (!l.empty() && l.back() == ' ') l.pop_back();
        out += l;
        out += '\n';
    };
    line([&](size_t c) { return columns[c].header; });
    size_t total = 0;
    for (size_t w : width) total += w;
    out += std::string(total + 2 * (columns.size() - 1), '-') + '\n';
    for (const auto& row : rows)
        line([&](size_t c) { return row[c]; });
    return out;
}

std::string TextTable::renderMarkdown() const {
    auto escape = [](const std::string& s) {
        std::string o;
        for (char ch : s) {
            if (ch == '|') o += "\\|";
            else if (ch == '<') o += "&lt;";
            else if (ch == '>') o += "&gt;";
            else o += ch;
        }
        return o;
    };
    std::string out = "|";
    for (const Column& c : columns) out += " " + c.header + " |";
    out += "\n|";
    for (const Column& c : columns) out += c.right ? "---:|" : ":---|";
    out += '\n';
    for (const auto& row : rows) {
        out += "|";
        for (size_t c = 0; c < columns.size(); ++c)
            out += " " + escape(clip(row[c], columns[c].max_width)) + " |";
        out += '\n';
    }
    return out;
}

std::string withThousands(uint64_t n) {
    std::string s = std::to_string(n);
    for (int i = int(s.size()) - 3; i > 0; i -= 3)
        s.insert(size_t(i), ",");
    return s;
}

std::string percent(double fraction) { return fmt::format("{:.2f}%", fraction * 100.0); }

} // namespace sightline
