#include "device.h"

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Event.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <dlfcn.h>
#include <filesystem>
#include <stdexcept>

namespace sightline::trainer {

torch::Device openDevice(const std::string& name) {
    torch::Device device(torch::kCPU);
    try {
        device = torch::Device(name);
    } catch (const std::exception&) {
        throw std::runtime_error("unknown device '" + name + "' (cpu, cuda or cuda:N)");
    }
    if (!device.is_cuda()) {
        if (!device.is_cpu()) throw std::runtime_error("device '" + name + "' is not supported (cpu, cuda or cuda:N)");
        return device;
    }
    // Loaded before anything asks libtorch about CUDA: the first question fixes its answer (the CUDA
    // hooks are looked up once). Its static initialisers register the CUDA backend; it stays loaded.
    if (!dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_GLOBAL))
        throw std::runtime_error(std::string("--device cuda: cannot load libtorch_cuda.so (") + dlerror() + ")");
    if (!torch::cuda::is_available()) throw std::runtime_error("--device cuda: no CUDA GPU is visible");
    if (device.has_index() && device.index() >= int(torch::cuda::device_count()))
        throw std::runtime_error("--device " + name + ": only " + std::to_string(torch::cuda::device_count()) + " CUDA devices");
    return device;
}

std::string besideExecutable(const std::string& file) {
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    return (ec ? std::filesystem::path(file) : self.parent_path() / file).string();
}

AllocatorStats allocatorStats(const torch::Device& d, bool reset_peaks) {
    if (!d.is_cuda()) return {};
    const c10::DeviceIndex index = d.has_index() ? d.index() : c10::DeviceIndex(0);
    c10::DeviceAllocator* allocator = c10::getDeviceAllocator(c10::DeviceType::CUDA);
    const c10::CachingDeviceAllocator::DeviceStats st = allocator->getDeviceStats(index);
    if (reset_peaks) allocator->resetPeakStats(index);
    return {st.allocated_bytes[0].peak, st.reserved_bytes[0].peak, st.num_device_alloc, st.num_device_free, st.num_alloc_retries};
}

torch::Tensor toDevice(const torch::Tensor& host, const torch::Device& d) {
    if (!d.is_cuda()) return host.to(d, /*non_blocking=*/false, /*copy=*/true);
    // the pinned block goes back to libtorch's host cache once the copy that reads it is done
    return host.pin_memory().to(d, /*non_blocking=*/true);
}

torch::Tensor toDevice(const std::vector<int32_t>& host, const torch::Device& d) {
    return toDevice(torch::from_blob(const_cast<int32_t*>(host.data()), {int64_t(host.size())}, torch::kInt32), d);
}

torch::Tensor toDevice(const std::vector<int64_t>& host, const torch::Device& d) {
    return toDevice(torch::from_blob(const_cast<int64_t*>(host.data()), {int64_t(host.size())}, torch::kInt64), d);
}

torch::Tensor toHostQueued(const torch::Tensor& t) {
    if (!t.is_cuda()) return t.clone();
    torch::Tensor host = torch::empty(t.sizes(), t.options().device(torch::kCPU).pinned_memory(true));
    host.copy_(t, /*non_blocking=*/true);
    return host;
}

QueueMark::QueueMark(const torch::Device& d) : m_host(std::chrono::steady_clock::now()) {
    if (!d.is_cuda()) return;
    const c10::impl::DeviceGuardImplInterface* cuda = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    const c10::Device at = d.has_index() ? d : cuda->getDevice();
    m_event = std::make_shared<c10::Event>(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT); // timed
    m_event->record(cuda->getStream(at));
}

void QueueMark::wait() const {
    if (m_event) m_event->synchronize();
}

double QueueMark::secondsAfter(const QueueMark& earlier) const {
    if (m_event && earlier.m_event) return earlier.m_event->elapsedTime(*m_event) / 1e3;
    return std::chrono::duration<double>(m_host - earlier.m_host).count();
}

} // namespace sightline::trainer
