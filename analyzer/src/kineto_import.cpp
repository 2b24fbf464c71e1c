// Chooses the Kineto reader compiled for this CPU (see kineto_reader.inc).
#include "sightline/import.h"

namespace sightline {
namespace kineto_generic {
Trace importKinetoJsonImpl(char* data, size_t size, size_t capacity, const std::string& source, const ProgressFn& progress);
}
#if SIGHTLINE_HAVE_HASWELL_READER
namespace kineto_haswell {
Trace importKinetoJsonImpl(char* data, size_t size, size_t capacity, const std::string& source, const ProgressFn& progress);
}
#endif

Trace importKinetoJson(char* data, size_t size, size_t capacity, const std::string& source, const ProgressFn& progress) {
#if SIGHTLINE_HAVE_HASWELL_READER
    static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi") &&
        __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("pclmul") &&
        __builtin_cpu_supports("popcnt");
    if (avx2)
        return kineto_haswell::importKinetoJsonImpl(data, size, capacity, source, progress);
#endif
    return kineto_generic::importKinetoJsonImpl(data, size, capacity, source, progress);
}

} // namespace sightline
