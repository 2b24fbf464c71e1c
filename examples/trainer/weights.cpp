#include "weights.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace sightline::trainer {

namespace {

struct DtypeName {
    const char* name;
    torch::ScalarType type;
};
constexpr DtypeName kDtypes[] = {{"F32", torch::kFloat32}, {"BF16", torch::kBFloat16}, {"F16", torch::kFloat16}, {"I64", torch::kInt64}, {"I32", torch::kInt32}};

std::string shapeText(at::IntArrayRef s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

} // namespace

torch::Tensor toTorch(const SafeTensor& t) {
    for (const DtypeName& d : kDtypes)
        if (t.dtype == d.name) {
            torch::Tensor out = torch::empty(t.shape, torch::dtype(d.type));
            if (size_t(out.nbytes()) != t.data.size()) throw std::runtime_error("tensor data does not match its shape");
            std::memcpy(out.data_ptr(), t.data.data(), t.data.size());
            return out;
        }
    throw std::runtime_error("tensors of dtype " + t.dtype + " are not supported");
}

SafeTensor fromTorch(const torch::Tensor& in) {
    const torch::Tensor t = in.detach().to(torch::kCPU).contiguous();
    for (const DtypeName& d : kDtypes)
        if (t.scalar_type() == d.type) {
            SafeTensor out{d.name, t.sizes().vec(), {}};
            out.data.resize(size_t(t.nbytes()));
            std::memcpy(out.data.data(), t.data_ptr(), out.data.size());
            return out;
        }
    throw std::runtime_error(std::string("cannot store a tensor of dtype ") + c10::toString(t.scalar_type()));
}

void loadParameters(torch::nn::Module& module, const SafeTensors& tensors, const std::vector<std::string>& optional) {
    torch::NoGradGuard no_grad;
    for (auto& p : module.named_parameters()) {
        auto it = tensors.find(p.key());
        if (it == tensors.end()) {
            if (std::find(optional.begin(), optional.end(), p.key()) != optional.end()) continue;
            throw std::runtime_error("the weights have no tensor " + p.key());
        }
        const torch::Tensor src = toTorch(it->second);
        if (src.sizes() != p.value().sizes())
            throw std::runtime_error(p.key() + ": the weights hold " + shapeText(src.sizes()) + ", the model wants " +
                                     shapeText(p.value().sizes()));
        p.value().copy_(src);
    }
}

SafeTensors parameterTensors(const torch::nn::Module& module, bool grads) {
    SafeTensors out;
    for (const auto& p : module.named_parameters()) {
        const torch::Tensor t = grads ? p.value().grad() : p.value();
        if (t.defined()) out[p.key()] = fromTorch(t);
    }
    return out;
}

} // namespace sightline::trainer
