// sightline-trainer-forward: one forward and backward pass of the hybrid model on a batch, for the
// parity check against transformers (tests/trainer/parity_test.py).
//
// usage: sightline-trainer-forward CONFIG.json WEIGHTS.safetensors BATCH.safetensors OUT.safetensors [--device D] [--bf16]
// --device runs it on D (cpu, the default, or cuda); --bf16 casts the weights to bf16 first (the
// GDN rule and the norms still compute in fp32, as in transformers). BATCH holds input_ids, attention_mask and labels (I64, [batch, seq]); OUT receives "logits",
// "loss" and "grad.NAME" for every parameter.
#include "device.h"
#include "model.h"
#include "weights.h"

#include <ATen/Context.h>

#include <cstdio>
#include <exception>

using namespace sightline::trainer;

int main(int argc, char** argv) {
    std::string device_name = "cpu";
    bool bf16 = false, usage = argc < 5;
    for (int i = 5; i < argc && !usage; ++i) {
        const std::string a = argv[i];
        if (a == "--bf16") bf16 = true;
        else if (a == "--device" && i + 1 < argc) device_name = argv[++i];
        else usage = true;
    }
    if (usage) {
        std::fprintf(stderr, "usage: sightline-trainer-forward CONFIG.json WEIGHTS.safetensors BATCH.safetensors OUT.safetensors [--device D] [--bf16]\n");
        return 2;
    }
    try {
        const torch::Device device = openDevice(device_name);
        if (!bf16) { // fp32 means fp32 on the GPU too: no TF32 in matrix products or convolutions
            at::globalContext().setAllowTF32CuBLAS(false);
            at::globalContext().setAllowTF32CuDNN(false);
        }
        const ModelConfig config = loadModelConfig(argv[1]);
        torch::manual_seed(0);
        CausalLM lm(config);
        loadParameters(*lm, readSafeTensors(argv[2]), {"lm_head.weight"});
        if (bf16) lm->to(torch::kBFloat16);
        lm->to(device);
        const SafeTensors batch = readSafeTensors(argv[3]);
        auto get = [&](const char* name) {
            auto it = batch.find(name);
            if (it == batch.end()) throw std::runtime_error(std::string(argv[3]) + ": no tensor " + name);
            return toTorch(it->second).to(device);
        };
        const torch::Tensor ids = get("input_ids"), mask = get("attention_mask"), labels = get("labels");
        const torch::Tensor logits = lm->forward(ids, mask);
        const torch::Tensor loss = shiftedCrossEntropy(logits, labels);
        loss.backward();
        SafeTensors out;
        out["logits"] = fromTorch(logits.to(torch::kFloat32));
        out["loss"] = fromTorch(loss.reshape({1}).to(torch::kFloat32));
        for (auto& [name, t] : parameterTensors(*lm, true)) out["grad." + name] = std::move(t);
        writeSafeTensors(argv[4], out);
        std::printf("loss %.6f\n", loss.item<double>());
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "sightline-trainer-forward: %s\n", e.what());
        return 1;
    }
}
