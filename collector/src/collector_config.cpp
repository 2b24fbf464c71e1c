#include "collector_config.h"

#include "sightline/activities.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string_view>

namespace sightline::collector {

namespace {

struct Reader {
    CollectorConfig::Lookup lookup;
    void* context;

    const char* text(const char* name) const {
        const char* v = lookup(name, context);
        return v && *v ? v : nullptr;
    }
    bool flag(const char* name, bool fallback) const {
        const char* v = text(name);
        if (!v) return fallback;
        return std::strcmp(v, "0") != 0 && std::strcmp(v, "false") != 0 && std::strcmp(v, "off") != 0;
    }
    int integer(const char* name, int fallback) const {
        const char* v = text(name);
        return v ? std::atoi(v) : fallback;
    }
};

void parseSteps(const char* steps, CollectorConfig& c) {
    if (!steps) return;
    c.steps_given = true;
    unsigned long long a = 0, b = 0;
    if (std::sscanf(steps, "%llu:%llu", &a, &b) == 2 && a >= 1 && b >= a) {
        c.steps_first = a;
        c.steps_last = b;
    } else {
        c.steps_error = true;
    }
}

} // namespace

CollectorConfig CollectorConfig::parse(Lookup lookup, void* context) {
    const Reader env{lookup, context};
    CollectorConfig c;
    c.enabled = env.flag("SIGHTLINE_ENABLE", true);
    if (const char* dir = env.text("SIGHTLINE_OUTPUT")) c.output_dir = dir;
    if (const char* rank = env.text("RANK")) c.rank_name = rank;
    c.rank = env.integer("RANK", -1);
    c.world_size = env.integer("WORLD_SIZE", -1);
    c.local_rank = env.integer("LOCAL_RANK", -1);
    c.shapes = env.flag("SIGHTLINE_SHAPES", false);
    c.ops = env.flag("SIGHTLINE_OPS", true);
    c.torch = env.flag("SIGHTLINE_TORCH", true);
    if (const char* bridge = env.text("SIGHTLINE_TORCH_BRIDGE")) c.torch_bridge = bridge;
    c.cuda = env.flag("SIGHTLINE_CUDA", true);
    const char* link = lookup("SIGHTLINE_LINK", context);
    c.correlate_ops = link && std::strcmp(link, "correlation") == 0;
    if (const char* acts = lookup("SIGHTLINE_ACTIVITIES", context)) c.activities = acts;
    c.nvtx_injection_set = lookup("NVTX_INJECTION64_PATH", context) != nullptr;
    c.cupti_detach = env.flag("SIGHTLINE_CUPTI_DETACH", true);
    c.dormant = env.flag("SIGHTLINE_DORMANT", false);
    c.debug = lookup("SIGHTLINE_DEBUG", context) != nullptr;
    c.hw = env.flag("SIGHTLINE_HW", false);
    c.hw_interval_us = uint64_t(std::max(1, env.integer("SIGHTLINE_HW_INTERVAL_US", 1000)));
    c.hw_fallback_device = env.integer("SIGHTLINE_HW_DEVICE", env.integer("LOCAL_RANK", 0));
    parseSteps(env.text("SIGHTLINE_STEPS"), c);
    return c;
}

CollectorConfig CollectorConfig::fromEnvironment() {
    return parse([](const char* name, void*) -> const char* { return std::getenv(name); }, nullptr);
}

CuptiOptions activityOptions(const CollectorConfig& config, bool launches_countable) {
    CuptiOptions o; // every kind
    const std::string_view a = config.activities;
    if (a.empty() || a == "default") {
        // The light mode where launches can be counted (preloaded, on x86-64): CUPTI's hooks on
        // every API call are most of its cost, and counting links the kernels as well (docs/collector.md,
        // "Linking without API calls"). CUPTI's overhead records would disturb its numbering.
        if (launches_countable && !config.correlate_ops) o.runtime = o.driver = o.sync = o.overhead = false;
    } else if (a != "all") {
        bool* const kinds[] = {&o.kernels, &o.memcpy, &o.memset, &o.runtime, &o.driver, &o.sync, &o.nvtx, &o.overhead};
        static_assert(std::size(kinds) == capture::kActivityWordCount, "one option for each word of kActivityWords");
        for (size_t i = 0; i < capture::kActivityWordCount; ++i) *kinds[i] = a.find(capture::kActivityWords[i]) != a.npos;
    }
    return o;
}

} // namespace sightline::collector
