#include "safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace sightline::trainer {

size_t dtypeSize(const std::string& d) {
    static const std::map<std::string, size_t> sizes = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1}, {"U8", 1}, {"BOOL", 1}, {"U16", 2}, {"U32", 4}, {"U64", 8}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
    auto it = sizes.find(d);
    return it == sizes.end() ? 0 : it->second;
}

void writeSafeTensors(const std::filesystem::path& path, const SafeTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
    nlohmann::ordered_json header;
    if (!metadata.empty()) header["__metadata__"] = metadata;
    uint64_t offset = 0;
    for (const auto& [name, t] : tensors) {
        header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.data.size()}}};
        offset += t.data.size();
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' '); // keep the data 8-byte aligned
    std::ofstream out(path, std::ios::binary);
    if (!out) throw std::runtime_error(path.string() + ": cannot write");
    const uint64_t n = text.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(text.data(), std::streamsize(text.size()));
    for (const auto& [name, t] : tensors) out.write(reinterpret_cast<const char*>(t.data.data()), std::streamsize(t.data.size()));
    if (!out) throw std::runtime_error(path.string() + ": write failed");
}

SafeTensors readSafeTensors(const std::filesystem::path& path, std::map<std::string, std::string>* metadata) {
    auto fail = [&](const std::string& why) -> void { throw std::runtime_error(path.string() + ": " + why); };
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot open");
    in.seekg(0, std::ios::end);
    const uint64_t size = uint64_t(in.tellg());
    in.seekg(0);
    uint64_t n = 0;
    if (size < 8 || !in.read(reinterpret_cast<char*>(&n), 8)) fail("not a safetensors file (shorter than its header length)");
    if (n > size - 8 || n > (uint64_t(100) << 20)) fail("not a safetensors file (header length " + std::to_string(n) + " is impossible)");
    std::string text(n, '\0');
    in.read(text.data(), std::streamsize(n));
    nlohmann::json header;
    try {
        header = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error&) {
        fail("not a safetensors file (its header is not JSON)");
    }
    if (!header.is_object()) fail("not a safetensors file (its header is not an object)");
    const uint64_t data_size = size - 8 - n;
    SafeTensors out;
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (const auto& [name, v] : header.items()) {
        if (name == "__metadata__") {
            if (metadata && v.is_object())
                for (const auto& [k, val] : v.items()) (*metadata)[k] = val.is_string() ? val.get<std::string>() : val.dump();
            continue;
        }
        if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
            fail("tensor \"" + name + "\" lacks dtype, shape or data_offsets");
        SafeTensor t;
        t.dtype = v["dtype"].get<std::string>();
        const size_t esize = dtypeSize(t.dtype);
        if (!esize) fail("tensor \"" + name + "\" has an unknown dtype " + t.dtype);
        uint64_t elements = 1;
        for (const auto& d : v["shape"]) {
            if (!d.is_number_integer() || d.get<int64_t>() < 0) fail("tensor \"" + name + "\" has a bad shape");
            t.shape.push_back(d.get<int64_t>());
            elements *= uint64_t(d.get<int64_t>());
        }
        const uint64_t begin = v["data_offsets"][0].get<uint64_t>(), end = v["data_offsets"][1].get<uint64_t>();
        if (begin > end || end > data_size) fail("tensor \"" + name + "\" points outside the file (truncated?)");
        if (end - begin != elements * esize) fail("tensor \"" + name + "\" has " + std::to_string(end - begin) + " bytes for its shape");
        t.data.resize(end - begin);
        in.seekg(std::streamoff(8 + n + begin));
        if (!in.read(reinterpret_cast<char*>(t.data.data()), std::streamsize(t.data.size()))) fail("read error");
        ranges.emplace_back(begin, end);
        out.emplace(name, std::move(t));
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
        if (ranges[i].first < ranges[i - 1].second) fail("tensors overlap in the file");
    return out;
}

} // namespace sightline::trainer
