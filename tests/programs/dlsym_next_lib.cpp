// Built twice (SIGHTLINE_NEXT_VALUE 1 and 2) into two libraries that a program links in that
// order: dlsym(RTLD_NEXT, ...) called from the first must find the second's definition, with the
// collector's dlsym in front of glibc's (collector/src/launch_hooks.cpp) as without it.
#include <dlfcn.h>

extern "C" {

__attribute__((visibility("default"))) int sl_next_value() { return SIGHTLINE_NEXT_VALUE; }

// The value of the next library's sl_next_value, or -1 when dlsym finds none.
__attribute__((visibility("default"))) int sl_next_probe_from_library_a() {
    auto next = reinterpret_cast<int (*)()>(dlsym(RTLD_NEXT, "sl_next_value"));
    return next ? next() : -1;
}

} // extern "C"
