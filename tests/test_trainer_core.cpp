// The reference trainer's CPU-side core: config reading, data and batching, the safetensors format.
#include "data.h"
#include "model_config.h"
#include "safetensors.h"
#include "test_support.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include <catch2/catch.hpp>

using namespace sightline::trainer;
namespace fs = std::filesystem;
namespace test = sightline::test;

TEST_CASE("the tiny and the benchmark configs are read", "[trainer]") {
    const ModelConfig tiny = loadModelConfig(fs::path(SIGHTLINE_SOURCE_DIR) / "examples/configs/tiny.json");
    CHECK(tiny.model_type == "qwen3_5_text");
    REQUIRE(tiny.layer_types.size() == 4);
    CHECK(tiny.layer_types[3] == LayerType::FullAttention);
    CHECK(tiny.rotaryDim() == 4);
    CHECK(tiny.tie_word_embeddings);
    const fs::path bench = fs::path(SIGHTLINE_SOURCE_DIR) / "../shared/configs/qwen35-4b-like.json";
    if (fs::exists(bench)) { // beside the checkout on development machines and in CI
        const ModelConfig c = loadModelConfig(bench);
        CHECK(c.vocab_size == 248320);
        CHECK(std::count(c.layer_types.begin(), c.layer_types.end(), LayerType::FullAttention) == 8);
        // "about 4.2B parameters" (shared/configs/README.md)
        CHECK(c.parameterCount() > 4'150'000'000);
        CHECK(c.parameterCount() < 4'250'000'000);
    }
}

TEST_CASE("the Qwen3-Next layout derives its layers from full_attention_interval", "[trainer]") {
    const ModelConfig c = parseModelConfig(R"({"model_type": "qwen3_next", "vocab_size": 32000, "hidden_size": 1024,
        "intermediate_size": 3072, "num_hidden_layers": 8, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128,
        "linear_num_key_heads": 8, "linear_num_value_heads": 16, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
        "full_attention_interval": 4})",
                                           "cfg");
    REQUIRE(c.layer_types.size() == 8);
    CHECK(c.layer_types[3] == LayerType::FullAttention);
    CHECK(c.layer_types[7] == LayerType::FullAttention);
    CHECK(c.layer_types[0] == LayerType::LinearAttention);
}

TEST_CASE("a bad config gets one line naming the file and the field", "[trainer]") {
    auto err = [](const std::string& text) {
        try {
            parseModelConfig(text, "cfg.json");
        } catch (const std::runtime_error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    CHECK_THAT(err("{not json"), Catch::StartsWith("cfg.json: not valid JSON"));
    CHECK_THAT(err(R"({"model_type": "llama"})"), Catch::Contains("is not a Qwen3.5 / Qwen3-Next"));
    CHECK_THAT(err(R"({"model_type": "qwen3_5_text", "vocab_size": 10})"), Catch::Contains("missing \"hidden_size\""));
    CHECK_THAT(err(R"({"model_type": "qwen3_5_text", "vocab_size": -1})"), Catch::Contains("\"vocab_size\" must be a positive integer"));
    std::string text = test::readFile(fs::path(SIGHTLINE_SOURCE_DIR) / "examples/configs/tiny.json");
    text.replace(text.find("\"full_attention\"]"), 16, "\"mamba\"");
    CHECK_THAT(err(text), Catch::Contains("unknown layer type \"mamba\""));
}

TEST_CASE("synthetic chat data follows its documented length distribution, deterministically", "[trainer]") {
    SyntheticSpec spec;
    spec.examples = 5000;
    const auto a = syntheticExamples(spec);
    const auto b = syntheticExamples(spec);
    REQUIRE(a.size() == 5000);
    CHECK(a[17].input_ids == b[17].input_ids);
    std::vector<double> len;
    for (const Example& e : a) {
        len.push_back(double(e.input_ids.size()));
        CHECK(e.input_ids.size() >= 64);
        CHECK(e.input_ids.size() <= 8192);
        CHECK(e.labels[0] == -100);                   // the prompt carries no loss
        CHECK(e.labels.back() == e.input_ids.back()); // the answer does
    }
    std::nth_element(len.begin(), len.begin() + 2500, len.end());
    CHECK(len[2500] == Approx(1100).epsilon(0.05));
    const double mean = std::accumulate(len.begin(), len.end(), 0.0) / double(len.size());
    CHECK(mean == Approx(1100 * std::exp(0.6 * 0.6 / 2)).epsilon(0.05)); // about 1,317
    spec.seed = 1;
    CHECK(syntheticExamples(spec)[17].input_ids != a[17].input_ids);
}

TEST_CASE("padded batching keeps every token once and respects the budget", "[trainer]") {
    SyntheticSpec spec;
    spec.examples = 800;
    const auto examples = syntheticExamples(spec);
    BatchingStats stats;
    const auto batches = padBatches(examples, 8192, 0, &stats);
    CHECK(stats.truncated == 0);
    size_t next = 0;
    int64_t real = 0, total = 0;
    for (const PaddedBatch& b : batches) {
        CHECK(b.paddedTokens() <= 8192);
        for (size_t r = 0; r < b.example_index.size(); ++r) {
            CHECK(b.example_index[r] == next++); // in order, each once
            const Example& e = examples[b.example_index[r]];
            CHECK(std::equal(e.input_ids.begin(), e.input_ids.end(), b.input_ids.begin() + long(r * size_t(b.columns))));
        }
        real += b.realTokens();
    }
    for (const Example& e : examples) total += int64_t(e.input_ids.size());
    CHECK(next == examples.size());
    CHECK(real == total);
    // An example longer than the budget is cut to it and counted.
    std::vector<Example> one(1);
    one[0].input_ids.assign(100, 5);
    one[0].labels = one[0].input_ids;
    const auto cut = padBatches(one, 64, 0, &stats);
    CHECK(stats.truncated == 1);
    CHECK(cut[0].columns == 64);
}

TEST_CASE("packed batching keeps every example once with its boundaries, positions and masked first labels", "[trainer]") {
    SyntheticSpec spec;
    spec.examples = 800;
    const auto examples = syntheticExamples(spec);
    for (bool fixed : {false, true}) {
        const auto batches = packBatches(examples, 8192, 0, fixed);
        size_t next = 0;
        int64_t real = 0, padded = 0;
        for (const PackedBatch& b : batches) {
            CHECK(b.columns <= 8192);
            if (fixed) CHECK(b.columns == 8192);
            REQUIRE(b.cu_seqlens.front() == 0);
            REQUIRE(b.cu_seqlens.back() == b.columns);
            REQUIRE(int64_t(b.position_ids.size()) == b.columns);
            // one segment an example, and one more for a padding tail
            CHECK(b.cu_seqlens.size() == b.example_index.size() + 1 + (b.real_tokens < b.columns ? 1 : 0));
            for (size_t s = 0; s < b.example_index.size(); ++s) {
                CHECK(b.example_index[s] == next++);
                const Example& e = examples[b.example_index[s]];
                const int32_t at = b.cu_seqlens[s], end = b.cu_seqlens[s + 1];
                REQUIRE(end - at == int32_t(e.input_ids.size()));
                CHECK(std::equal(e.input_ids.begin(), e.input_ids.end(), b.input_ids.begin() + at));
                CHECK(b.position_ids[size_t(at)] == 0);
                CHECK(b.position_ids[size_t(end - 1)] == end - at - 1);
                CHECK(b.labels[size_t(at)] == -100); // the previous example does not predict this one
                CHECK(std::equal(e.labels.begin() + 1, e.labels.end(), b.labels.begin() + at + 1));
            }
            for (int64_t t = b.real_tokens; t < b.columns; ++t) CHECK(b.labels[size_t(t)] == -100);
            CHECK(b.exampleLengths().size() == b.example_index.size());
            real += b.realTokens();
            padded += b.paddedTokens();
        }
        CHECK(next == examples.size());
        int64_t total = 0;
        for (const Example& e : examples) total += int64_t(e.input_ids.size());
        CHECK(real == total);
        if (!fixed) CHECK(padded == real);
        // greedy in order: no row could have taken the next example
        for (size_t i = 0; i + 1 < batches.size(); ++i)
            CHECK(batches[i].real_tokens + int64_t(examples[batches[i + 1].example_index[0]].input_ids.size()) > 8192);
    }
}

TEST_CASE("segments of padded and packed batches, and each token's segment", "[trainer]") {
    std::vector<Example> ex(3);
    for (size_t i = 0; i < ex.size(); ++i) {
        ex[i].input_ids.assign(i == 1 ? 5 : 3, int32_t(i + 1));
        ex[i].labels = ex[i].input_ids;
    }
    const auto padded = padBatches(ex, 15, 0);
    REQUIRE(padded.size() == 1);
    CHECK(padded[0].segmentOffsets() == std::vector<int32_t>{0, 3, 5, 10, 13, 15}); // rows of 5: 3+2, 5, 3+2
    const auto packed = packBatches(ex, 16, 0, true);
    REQUIRE(packed.size() == 1);
    CHECK(packed[0].cu_seqlens == std::vector<int32_t>{0, 3, 8, 11, 16});
    CHECK(packed[0].real_tokens == 11);
    CHECK(segmentIndex(packed[0].cu_seqlens) == std::vector<int32_t>{0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3});
    BatchingStats stats;
    const auto cut = packBatches(ex, 4, 0, false, &stats); // the 5-token example is cut to the budget
    CHECK(stats.truncated == 1);
    REQUIRE(cut.size() == 3);
    CHECK(cut[1].columns == 4);
}

TEST_CASE("JSONL examples with labels or a loss mask, and errors name the line", "[trainer]") {
    const auto dir = test::tempDir();
    test::writeFile(dir / "data.jsonl", "{\"input_ids\": [1, 2, 3]}\n\n{\"input_ids\": [4, 5], \"loss_mask\": [0, 1]}\n"
                                        "{\"input_ids\": [6, 7], \"labels\": [-100, 7]}\n");
    const auto ex = loadJsonl(dir / "data.jsonl");
    REQUIRE(ex.size() == 3);
    CHECK(ex[0].labels == std::vector<int32_t>{1, 2, 3});
    CHECK(ex[1].labels == std::vector<int32_t>{-100, 5});
    CHECK(ex[2].labels == std::vector<int32_t>{-100, 7});
    test::writeFile(dir / "bad.jsonl", "{\"input_ids\": [1]}\n{\"input_ids\": [1, 2], \"labels\": [1]}\n");
    CHECK_THROWS_WITH(loadJsonl(dir / "bad.jsonl"), Catch::Contains("bad.jsonl:2: labels must match"));
    test::writeFile(dir / "text.jsonl", "hello\n");
    CHECK_THROWS_WITH(loadJsonl(dir / "text.jsonl"), Catch::Contains("text.jsonl:1: not a JSON object"));
}

TEST_CASE("safetensors round trip, and truncated or damaged files are refused", "[trainer]") {
    const auto dir = test::tempDir();
    SafeTensors t;
    t["model.embed_tokens.weight"] = SafeTensor{"BF16", {4, 2}, std::vector<uint8_t>(16)};
    t["model.norm.weight"] = SafeTensor{"F32", {2}, std::vector<uint8_t>(8)};
    for (size_t i = 0; i < 16; ++i) t["model.embed_tokens.weight"].data[i] = uint8_t(i);
    writeSafeTensors(dir / "m.safetensors", t, {{"format", "pt"}});
    std::map<std::string, std::string> meta;
    const SafeTensors back = readSafeTensors(dir / "m.safetensors", &meta);
    CHECK(meta.at("format") == "pt");
    REQUIRE(back.size() == 2);
    CHECK(back.at("model.embed_tokens.weight").shape == std::vector<int64_t>{4, 2});
    CHECK(back.at("model.embed_tokens.weight").data == t.at("model.embed_tokens.weight").data);
    CHECK(back.at("model.norm.weight").dtype == "F32");

    const std::string bytes = test::readFile(dir / "m.safetensors");
    test::writeFile(dir / "cut.safetensors", bytes.substr(0, bytes.size() - 5));
    CHECK_THROWS_WITH(readSafeTensors(dir / "cut.safetensors"), Catch::Contains("outside the file (truncated?)"));
    test::writeFile(dir / "tiny.safetensors", "abc");
    CHECK_THROWS_WITH(readSafeTensors(dir / "tiny.safetensors"), Catch::Contains("not a safetensors file"));
    std::string junk(16, '\0');
    const uint64_t n = 8;
    std::memcpy(junk.data(), &n, 8);
    std::memcpy(junk.data() + 8, "not json", 8);
    test::writeFile(dir / "junk.safetensors", junk);
    CHECK_THROWS_WITH(readSafeTensors(dir / "junk.safetensors"), Catch::Contains("header is not JSON"));
}
