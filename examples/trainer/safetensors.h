#pragma once
// The safetensors file format (the one Hugging Face checkpoints use), read and written at the
// byte level: 8 bytes of little-endian header length, a JSON header naming each tensor's dtype,
// shape and byte range, then the data. The libtorch glue lives with the model.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace sightline::trainer {

struct SafeTensor {
    std::string dtype; // "F32", "BF16", "F16", "I64", "I32", "U8", ...
    std::vector<int64_t> shape;
    std::vector<uint8_t> data; // element bytes, little-endian
};
using SafeTensors = std::map<std::string, SafeTensor>;

size_t dtypeSize(const std::string& dtype); // 0 for an unknown dtype

void writeSafeTensors(const std::filesystem::path& path, const SafeTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});
// Throws std::runtime_error with one line naming the file and what is wrong with it.
SafeTensors readSafeTensors(const std::filesystem::path& path, std::map<std::string, std::string>* metadata = nullptr);

} // namespace sightline::trainer
