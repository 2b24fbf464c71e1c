// Prints what dlsym answers for RTLD_NEXT from library A (expected: library B's value, 2) and for
// RTLD_DEFAULT (expected: A's, 1). Run with and without the collector preloaded (CTests
// collector.dlsym_next*).
#include <cstdio>

#include <dlfcn.h>

extern "C" int sl_next_probe_from_library_a();

int main() {
    auto first = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "sl_next_value"));
    std::printf("next %d default %d\n", sl_next_probe_from_library_a(), first ? first() : -1);
    return 0;
}
