// The collector's configuration, parsed from made-up environments (no process environment, no GPU).
#include "collector_config.h"

#include <map>
#include <string>

#include <catch2/catch.hpp>

using namespace sightline::collector;

namespace {

using Env = std::map<std::string, std::string>;

CollectorConfig parsed(const Env& env) {
    return CollectorConfig::parse(
        [](const char* name, void* context) -> const char* {
            const Env& e = *static_cast<const Env*>(context);
            const auto it = e.find(name);
            return it == e.end() ? nullptr : it->second.c_str();
        },
        const_cast<Env*>(&env));
}

} // namespace

TEST_CASE("an empty environment gives the defaults", "[collector][config]") {
    const CollectorConfig c = parsed({});
    CHECK(c.enabled);
    CHECK(c.output_dir == ".");
    CHECK(c.rank_name.empty());
    CHECK(c.rank == -1);
    CHECK(c.world_size == -1);
    CHECK_FALSE(c.shapes);
    CHECK(c.ops);
    CHECK(c.torch);
    CHECK(c.cuda);
    CHECK_FALSE(c.correlate_ops);
    CHECK(c.cupti_detach);
    CHECK_FALSE(c.dormant);
    CHECK_FALSE(c.debug);
    CHECK_FALSE(c.steps_given);
}

TEST_CASE("flags read 0, false and off as off and anything else as on, and empty is unset", "[collector][config]") {
    CHECK_FALSE(parsed({{"SIGHTLINE_ENABLE", "0"}}).enabled);
    CHECK_FALSE(parsed({{"SIGHTLINE_CUDA", "false"}}).cuda);
    CHECK_FALSE(parsed({{"SIGHTLINE_OPS", "off"}}).ops);
    CHECK(parsed({{"SIGHTLINE_SHAPES", "1"}}).shapes);
    CHECK(parsed({{"SIGHTLINE_DORMANT", "yes"}}).dormant);
    CHECK(parsed({{"SIGHTLINE_CUDA", ""}}).cuda);
    CHECK(parsed({{"SIGHTLINE_DEBUG", "0"}}).debug); // set at all
}

TEST_CASE("the output directory, rank and link mode come from their variables", "[collector][config]") {
    const CollectorConfig c = parsed({{"SIGHTLINE_OUTPUT", "/tmp/caps"}, {"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"SIGHTLINE_LINK", "correlation"}, {"SIGHTLINE_TORCH_BRIDGE", "/opt/libsightline_torch.so"}});
    CHECK(c.output_dir == "/tmp/caps");
    CHECK(c.rank_name == "3");
    CHECK(c.rank == 3);
    CHECK(c.world_size == 8);
    CHECK(c.local_rank == 1);
    CHECK(c.correlate_ops);
    CHECK(c.torch_bridge == "/opt/libsightline_torch.so");
    CHECK(parsed({{"SIGHTLINE_OUTPUT", ""}}).output_dir == ".");
    CHECK_FALSE(parsed({{"SIGHTLINE_LINK", "push"}}).correlate_ops);
}

TEST_CASE("hardware sampling: off by default, its interval at least 1 us, the fallback device from SIGHTLINE_HW_DEVICE or LOCAL_RANK", "[collector][config]") {
    const CollectorConfig plain = parsed({});
    CHECK_FALSE(plain.hw);
    CHECK(plain.hw_interval_us == 1000);
    CHECK(plain.hw_fallback_device == 0);
    const CollectorConfig c = parsed({{"SIGHTLINE_HW", "1"}, {"SIGHTLINE_HW_INTERVAL_US", "250"}, {"LOCAL_RANK", "3"}});
    CHECK(c.hw);
    CHECK(c.hw_interval_us == 250);
    CHECK(c.hw_fallback_device == 3);
    CHECK(parsed({{"SIGHTLINE_HW_DEVICE", "2"}, {"LOCAL_RANK", "3"}}).hw_fallback_device == 2);
    CHECK(parsed({{"SIGHTLINE_HW_INTERVAL_US", "0"}}).hw_interval_us == 1);
}

TEST_CASE("SIGHTLINE_STEPS is A:B with 1 <= A <= B, else an error", "[collector][config]") {
    const CollectorConfig ok = parsed({{"SIGHTLINE_STEPS", "3:5"}});
    CHECK(ok.steps_given);
    CHECK_FALSE(ok.steps_error);
    CHECK(ok.steps_first == 3);
    CHECK(ok.steps_last == 5);
    for (const char* bad : {"0:2", "5:3", "x", "4"}) {
        const CollectorConfig c = parsed({{"SIGHTLINE_STEPS", bad}});
        CHECK(c.steps_given);
        CHECK(c.steps_error);
    }
}

TEST_CASE("the activity kinds: the light mode by default where launches can be counted", "[collector][config]") {
    const CuptiOptions light = activityOptions(parsed({}), true);
    CHECK(light.kernels);
    CHECK(light.nvtx);
    CHECK_FALSE(light.runtime);
    CHECK_FALSE(light.driver);
    CHECK_FALSE(light.sync);
    CHECK_FALSE(light.overhead);

    const CuptiOptions uncountable = activityOptions(parsed({}), false);
    CHECK(uncountable.runtime);
    CHECK(uncountable.driver);
    const CuptiOptions pushing = activityOptions(parsed({{"SIGHTLINE_LINK", "correlation"}}), true);
    CHECK(pushing.runtime);

    const CuptiOptions all = activityOptions(parsed({{"SIGHTLINE_ACTIVITIES", "all"}}), true);
    CHECK(all.runtime);
    CHECK(all.overhead);

    const CuptiOptions listed = activityOptions(parsed({{"SIGHTLINE_ACTIVITIES", "kernel,driver"}}), true);
    CHECK(listed.kernels);
    CHECK(listed.driver);
    CHECK_FALSE(listed.runtime);
    CHECK_FALSE(listed.memcpy);
    CHECK_FALSE(listed.nvtx);
}
