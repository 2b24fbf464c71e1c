// sightline-trainer-forward: one forward and backward pass of the hybrid model on a batch, for the
// parity check against transformers (tests/trainer/parity_test.py).
//
// usage: sightline-trainer-forward CONFIG.json WEIGHTS.safetensors BATCH.safetensors OUT.safetensors
// BATCH holds input_ids, attention_mask and labels (I64, [batch, seq]); OUT receives "logits",
// "loss" and "grad.NAME" for every parameter.
#include "model.h"
#include "weights.h"

#include <cstdio>
#include <exception>

using namespace sightline::trainer;

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: sightline-trainer-forward CONFIG.json WEIGHTS.safetensors BATCH.safetensors OUT.safetensors\n");
        return 2;
    }
    try {
        const ModelConfig config = loadModelConfig(argv[1]);
        torch::manual_seed(0);
        CausalLM lm(config);
        loadParameters(*lm, readSafeTensors(argv[2]), {"lm_head.weight"});
        const SafeTensors batch = readSafeTensors(argv[3]);
        auto get = [&](const char* name) {
            auto it = batch.find(name);
            if (it == batch.end()) throw std::runtime_error(std::string(argv[3]) + ": no tensor " + name);
            return toTorch(it->second);
        };
        const torch::Tensor ids = get("input_ids"), mask = get("attention_mask"), labels = get("labels");
        const torch::Tensor logits = lm->forward(ids, mask);
        const torch::Tensor loss = shiftedCrossEntropy(logits, labels);
        loss.backward();
        SafeTensors out;
        out["logits"] = fromTorch(logits);
        out["loss"] = fromTorch(loss.reshape({1}));
        for (auto& [name, t] : parameterTensors(*lm, true)) out["grad." + name] = std::move(t);
        writeSafeTensors(argv[4], out);
        std::printf("loss %.6f\n", loss.item<double>());
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "sightline-trainer-forward: %s\n", e.what());
        return 1;
    }
}
