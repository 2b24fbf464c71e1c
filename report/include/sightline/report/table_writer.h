#pragma once
// A table of strings rendered as aligned text or as a Markdown pipe table.
#include <string>
#include <vector>

namespace sightline {

struct TextTable {
    struct Column {
        std::string header;
        bool right = true;    // numbers right-aligned, names left
        size_t max_width = 0; // 0 = unlimited; longer cells end in "..."
    };
    std::vector<Column> columns;
    std::vector<std::vector<std::string>> rows;

    std::string renderText() const;
    std::string renderMarkdown() const;
};

std::string withThousands(uint64_t n);
std::string percent(double fraction);

} // namespace sightline
