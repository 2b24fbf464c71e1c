#include "table_functions.h"

#include <algorithm>

namespace sightline::rules {

namespace {

template <class Value>
double overClasses(const Tables& t, bool by_family, const std::string& arg, Value value) {
    double sum = 0;
    for (const GpuRow& r : t.kernel_classes)
        if (by_family ? r.family == arg : globMatch(arg, r.name)) sum += value(r);
    return sum;
}

template <class Value>
double overOps(const Tables& t, const std::string& arg, Value value) {
    double sum = 0;
    for (const OpRow& r : t.ops)
        if (globMatch(arg, r.name)) sum += value(r);
    return sum;
}

double gpuMs(const GpuRow& r) { return double(r.total_ns) / 1e6; }
double gpuCount(const GpuRow& r) { return double(r.calls); }

constexpr TableFunction kTableFunctions[] = {
    {"family_ms", "GPU time of a kernel family",
     [](const Tables& t, const std::string& a) { return overClasses(t, true, a, gpuMs); }},
    {"family_count", "activities of a kernel family",
     [](const Tables& t, const std::string& a) { return overClasses(t, true, a, gpuCount); }},
    {"class_ms", "GPU time of kernel classes (name, or prefix ending in *)",
     [](const Tables& t, const std::string& a) { return overClasses(t, false, a, gpuMs); }},
    {"class_count", "activities of kernel classes (name, or prefix ending in *)",
     [](const Tables& t, const std::string& a) { return overClasses(t, false, a, gpuCount); }},
    {"op_calls", "calls of ops (name, or prefix ending in *)",
     [](const Tables& t, const std::string& a) { return overOps(t, a, [](const OpRow& r) { return double(r.calls); }); }},
    {"op_self_device_ms", "self GPU time of ops",
     [](const Tables& t, const std::string& a) { return overOps(t, a, [](const OpRow& r) { return double(r.self_device_ns) / 1e6; }); }},
    {"op_device_ms", "GPU time of ops including their children's",
     [](const Tables& t, const std::string& a) { return overOps(t, a, [](const OpRow& r) { return double(r.device_total_ns) / 1e6; }); }},
    {"op_cpu_ms", "self CPU time of ops",
     [](const Tables& t, const std::string& a) { return overOps(t, a, [](const OpRow& r) { return double(r.self_cpu_ns) / 1e6; }); }},
};

} // namespace

std::span<const TableFunction> tableFunctions() { return kTableFunctions; }

const TableFunction* findTableFunction(std::string_view name) {
    auto it = std::find_if(std::begin(kTableFunctions), std::end(kTableFunctions),
                           [&](const TableFunction& f) { return name == f.name; });
    return it == std::end(kTableFunctions) ? nullptr : it;
}

} // namespace sightline::rules
