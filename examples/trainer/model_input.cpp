#include "model_input.h"

#include "device.h"

#include <ATen/Context.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace sightline::trainer {

namespace F = torch::nn::functional;
using torch::indexing::Slice;

const char* toString(KernelPath k) { return k == KernelPath::Naive ? "naive" : "fused"; }
const char* toString(Batching b) { return b == Batching::Padded ? "padded" : "packed"; }

Fixes parseFixes(const std::string& list) {
    Fixes f;
    std::stringstream in(list);
    for (std::string name; std::getline(in, name, ',');) {
        if (name == "gdn") f.gdn = true;
        else if (name == "elementwise") f.elementwise = true;
        else if (name == "optimizer") f.optimizer = true;
        else if (name == "attention") f.attention = true;
        else if (!name.empty()) throw std::runtime_error("--fix: unknown fix '" + name + "' (gdn, elementwise, optimizer, attention)");
    }
    return f;
}

std::string toString(const Fixes& f) {
    std::string out;
    for (const auto& [on, name] : {std::pair{f.gdn, "gdn"}, std::pair{f.elementwise, "elementwise"}, std::pair{f.optimizer, "optimizer"},
                                   std::pair{f.attention, "attention"}})
        if (on) out += (out.empty() ? "" : ",") + std::string(name);
    return out.empty() ? "none" : out;
}

FixScope::FixScope(const Fixes& f) : m_cudnn_sdp(at::globalContext().userEnabledCuDNNSDP()) {
    if (f.attention) at::globalContext().setSDPUseCuDNN(false);
}
FixScope::~FixScope() { at::globalContext().setSDPUseCuDNN(m_cudnn_sdp); }

namespace {

torch::Tensor deviceTensor(const std::vector<int32_t>& v, std::vector<int64_t> shape, torch::ScalarType type, const torch::Device& d) {
    // A copy always (the host vector may go), converted on the host
    return toDevice(torch::from_blob(const_cast<int32_t*>(v.data()), shape, torch::kInt32).to(type), d);
}

// Positions of a row-major [rows, columns] batch whose next label is kept.
int64_t lossTokens(const std::vector<int32_t>& labels, int64_t rows, int64_t columns) {
    int64_t n = 0;
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 1; j < columns; ++j) n += labels[size_t(r * columns + j)] != -100;
    return n;
}

void setSegments(ModelInput& in, std::vector<int32_t> segments, const torch::Device& d) {
    for (size_t s = 0; s + 1 < segments.size(); ++s) in.max_segment = std::max<int64_t>(in.max_segment, segments[s + 1] - segments[s]);
    in.cu_seqlens = deviceTensor(segments, {int64_t(segments.size())}, torch::kInt32, d);
    const std::vector<int32_t> seq = segmentIndex(segments);
    in.seq_idx = deviceTensor(seq, {int64_t(seq.size())}, torch::kInt32, d);
    in.segments = std::move(segments);
}

} // namespace

ModelInput modelInput(const PaddedBatch& b, const torch::Device& d) {
    ModelInput in;
    in.input_ids = deviceTensor(b.input_ids, {b.rows, b.columns}, torch::kInt64, d);
    in.labels = deviceTensor(b.labels, {b.rows, b.columns}, torch::kInt64, d);
    std::vector<int32_t> mask(b.attention_mask.begin(), b.attention_mask.end()), positions(b.input_ids.size());
    for (size_t i = 0; i < positions.size(); ++i) positions[i] = int32_t(int64_t(i) % b.columns);
    in.attention_mask = deviceTensor(mask, {b.rows, b.columns}, torch::kInt64, d);
    in.position_ids = deviceTensor(positions, {b.rows, b.columns}, torch::kInt64, d);
    in.loss_tokens = lossTokens(b.labels, b.rows, b.columns);
    setSegments(in, b.segmentOffsets(), d);
    return in;
}

ModelInput modelInput(const PackedBatch& b, const torch::Device& d) {
    ModelInput in;
    in.input_ids = deviceTensor(b.input_ids, {1, b.columns}, torch::kInt64, d);
    in.labels = deviceTensor(b.labels, {1, b.columns}, torch::kInt64, d);
    in.position_ids = deviceTensor(b.position_ids, {1, b.columns}, torch::kInt64, d);
    in.loss_tokens = lossTokens(b.labels, 1, b.columns);
    in.packed = true;
    setSegments(in, b.cu_seqlens, d);
    return in;
}

ModelInput modelInput(const torch::Tensor& input_ids, const torch::Tensor& attention_mask) {
    ModelInput in;
    const int64_t b = input_ids.size(0), t = input_ids.size(1);
    in.input_ids = input_ids;
    in.attention_mask = attention_mask;
    in.position_ids = torch::arange(t, input_ids.options().dtype(torch::kInt64)).unsqueeze(0).expand({b, t});
    return in;
}

torch::Tensor shiftedTargets(const torch::Tensor& labels) {
    return F::pad(labels.index({Slice(), Slice(1)}), F::PadFuncOptions({0, 1}).value(-100));
}

} // namespace sightline::trainer
