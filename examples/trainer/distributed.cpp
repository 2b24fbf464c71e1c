#include "distributed.h"
#include "device.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <dlfcn.h>
#include <cstdlib>
#include <stdexcept>

namespace sightline::trainer {

namespace {

int envInt(const char* name, int fallback) {
    const char* v = std::getenv(name);
    if (!v || !*v) return fallback;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end || n < 0) throw std::runtime_error(std::string(name) + "=" + v + " is not a non-negative integer");
    return int(n);
}

} // namespace

Distributed Distributed::fromEnvironment() {
    Distributed d;
    d.world = envInt("WORLD_SIZE", 1);
    d.rank = envInt("RANK", 0);
    d.local_rank = envInt("LOCAL_RANK", d.rank);
    if (d.world < 1 || d.rank >= d.world) throw std::runtime_error("RANK must be below WORLD_SIZE");
    return d;
}

void Distributed::connect() {
    if (!active()) return;
    const char* addr = std::getenv("MASTER_ADDR");
    const int port = envInt("MASTER_PORT", -1);
    if (!addr || port < 0) throw std::runtime_error("WORLD_SIZE > 1 needs MASTER_ADDR and MASTER_PORT (torchrun sets them)");
    const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
    c10d::TCPStoreOptions opts;
    opts.port = uint16_t(port);
    opts.isServer = !(agent && std::string(agent) == "True") && rank == 0; // torchrun's agent serves its own store
    opts.numWorkers = size_t(world);
    opts.waitWorkers = false;
    auto store = c10::make_intrusive<c10d::PrefixStore>("sightline_trainer",
                                                        c10::make_intrusive<c10d::TCPStore>(std::string(addr), opts));
    void* lib = dlopen(besideExecutable("libsightline_trainer_nccl.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!lib) throw std::runtime_error(std::string("cannot load the NCCL process group: ") + dlerror());
    using Make = c10d::Backend* (*)(c10d::Store*, int, int);
    auto make = reinterpret_cast<Make>(dlsym(lib, "sightline_make_nccl_backend"));
    if (!make) throw std::runtime_error("libsightline_trainer_nccl.so has no sightline_make_nccl_backend");
    group = c10::intrusive_ptr<c10d::Backend>::reclaim(make(store.get(), rank, world));
}

void Distributed::sumAcrossRanks(torch::Tensor& values, const torch::Device& device) const {
    if (!active()) return;
    std::vector<torch::Tensor> t{values.to(device, torch::kFloat64)};
    group->allreduce(t)->wait();
    values.copy_(t[0].cpu());
}

GradientSync::GradientSync(std::vector<torch::Tensor> params, c10::intrusive_ptr<c10d::Backend> group, int world,
                           int64_t bucket_bytes)
    : m_params(std::move(params)), m_where(m_params.size()), m_group(std::move(group)), m_world(world) {
    // Reverse order: the last parameters' gradients are ready first. A bucket holds one dtype.
    Bucket current;
    int64_t bytes = 0;
    auto close = [&] {
        if (current.params.empty()) return;
        const torch::Tensor& first = m_params[current.params.front()];
        current.flat = torch::zeros({current.offsets.back()}, first.options());
        current.offsets.pop_back();
        m_buckets.push_back(std::move(current));
        current = Bucket{};
        bytes = 0;
    };
    for (size_t i = m_params.size(); i-- > 0;) {
        const torch::Tensor& p = m_params[i];
        if (!current.params.empty() && (bytes >= bucket_bytes || p.scalar_type() != m_params[current.params.front()].scalar_type()))
            close();
        if (current.offsets.empty()) current.offsets.push_back(0);
        m_where[i] = {m_buckets.size(), current.params.size()};
        current.params.push_back(i);
        current.offsets.push_back(current.offsets.back() + p.numel());
        bytes += p.numel() * int64_t(p.element_size());
    }
    close();
    for (size_t i = 0; i < m_params.size(); ++i)
        m_hooks.push_back(m_params[i].register_hook([this, i](torch::Tensor grad) { onGradient(i, grad); }));
}

GradientSync::~GradientSync() {
    for (size_t i = 0; i < m_hooks.size(); ++i) m_params[i].remove_hook(m_hooks[i]);
}

void GradientSync::onGradient(size_t param, const torch::Tensor& grad) {
    if (!m_armed) return;
    const auto [b, slot] = m_where[param];
    Bucket& bucket = m_buckets[b];
    if (bucket.pending == 0) bucket.pending = bucket.params.size(); // its first gradient this step
    torch::NoGradGuard no_grad;
    torch::Tensor dst = bucket.flat.narrow(0, bucket.offsets[slot], grad.numel()).view_as(grad);
    const torch::Tensor& earlier = m_params[param].grad(); // accumulated over the step's earlier micro-batches
    if (earlier.defined()) torch::add_out(dst, grad, earlier);
    else dst.copy_(grad);
    if (--bucket.pending == 0) {
        bucket.pending = SIZE_MAX; // complete, waiting for its turn
        launchReady();
    }
}

void GradientSync::launchReady() {
    while (m_next < m_buckets.size() && m_buckets[m_next].pending == SIZE_MAX) {
        std::vector<torch::Tensor> t{m_buckets[m_next].flat};
        m_buckets[m_next].work = m_group->allreduce(t);
        ++m_next;
    }
}

void GradientSync::finish() {
    if (!m_armed) return;
    m_armed = false;
    // A parameter that got no gradient this step still takes part, with what it has (or zeros).
    for (Bucket& b : m_buckets) {
        if (b.pending == SIZE_MAX) continue; // complete (launched, or launched just below)
        for (size_t s = 0; s < b.params.size(); ++s) {
            const torch::Tensor& g = m_params[b.params[s]].grad();
            torch::Tensor dst = b.flat.narrow(0, b.offsets[s], m_params[b.params[s]].numel());
            if (g.defined()) dst.copy_(g.reshape(-1));
            else dst.zero_();
        }
        b.pending = SIZE_MAX;
    }
    launchReady();
    torch::NoGradGuard no_grad;
    for (Bucket& b : m_buckets) {
        b.work->wait();
        b.work.reset();
        b.pending = 0;
        b.flat.div_(double(m_world));
        for (size_t s = 0; s < b.params.size(); ++s) {
            torch::Tensor& p = m_params[b.params[s]];
            // A view of the bucket, as DDP's gradient_as_bucket_view: no copy. It lives until the
            // optimizer's zero_grad(set_to_none) drops it, before the next backward.
            p.mutable_grad() = b.flat.narrow(0, b.offsets[s], p.numel()).view_as(p);
        }
    }
    m_next = 0;
}

void GradientSync::releaseGradients() {
    for (torch::Tensor& p : m_params) p.mutable_grad().reset();
}

} // namespace sightline::trainer
