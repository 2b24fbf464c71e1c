#pragma once
// The rule language's functions over the steady-state tables, each taking one string argument
// (a name, or a prefix ending in '*'): one entry per function gives its name, what it returns
// (docs/rules.md) and how it is computed. Values are per steady step (totals divided by their
// number), or for the hardware figures time-weighted averages over the named kernels.
#include "sightline/metrics.h"

#include <span>
#include <string>
#include <string_view>

namespace sightline::rules {

struct TableFunction {
    const char* name;
    const char* doc;
    double (*value)(const Metrics& m, const std::string& argument);
};

std::span<const TableFunction> tableFunctions();
// nullptr when no table function has that name.
const TableFunction* findTableFunction(std::string_view name);

} // namespace sightline::rules
