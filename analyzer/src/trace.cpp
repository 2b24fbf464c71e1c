#include "sightline/trace.h"

namespace sightline {

const char* toString(CpuKind kind) {
    switch (kind) {
    case CpuKind::Op: return "op";
    case CpuKind::UserAnnotation: return "user_annotation";
    case CpuKind::Runtime: return "cuda_runtime";
    case CpuKind::Driver: return "cuda_driver";
    case CpuKind::PythonFunction: return "python_function";
    }
    return "?";
}

const char* toString(GpuKind kind) {
    switch (kind) {
    case GpuKind::Kernel: return "kernel";
    case GpuKind::Memcpy: return "memcpy";
    case GpuKind::Memset: return "memset";
    case GpuKind::Annotation: return "gpu_user_annotation";
    }
    return "?";
}

const char* toString(CounterKind kind) {
    return kind == CounterKind::Memory ? "memory" : "hardware";
}

uint32_t Trace::threadIndex(int64_t pid, int64_t tid) {
    auto [it, inserted] = m_threadIndex.try_emplace({pid, tid}, static_cast<uint32_t>(threads.size()));
    if (inserted)
        threads.push_back(Thread{pid, tid, StringId{}});
    return it->second;
}

} // namespace sightline
