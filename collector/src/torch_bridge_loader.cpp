#include "torch_bridge_loader.h"

#include "collector_state.h"

#include <chrono>
#include <string>
#include <thread>

#include <dlfcn.h>
#include <unistd.h>

namespace sightline::collector {

namespace {

// SIGHTLINE_TORCH_BRIDGE, else libsightline_torch.so beside the collector (or in torch/ there).
std::string bridgePath() {
    if (!g_collector.config->torch_bridge.empty()) return g_collector.config->torch_bridge;
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&bridgePath), &info) && info.dli_fname) {
        std::string self = info.dli_fname;
        const size_t slash = self.rfind('/');
        const std::string dir = slash == std::string::npos ? "." : self.substr(0, slash);
        for (const char* rel : {"/libsightline_torch.so", "/torch/libsightline_torch.so"}) {
            const std::string candidate = dir + rel;
            if (access(candidate.c_str(), R_OK) == 0) return candidate;
        }
    }
    return {};
}

} // namespace

void maybeLoadTorchBridge() {
    CollectorState& c = g_collector;
    if (c.bridge_loaded.load() || !c.recorder || !c.config->torch) return;
    void* torch = dlopen("libtorch_cpu.so", RTLD_LAZY | RTLD_NOLOAD);
    if (!torch) return;
    dlclose(torch);
    if (c.bridge_loaded.exchange(true)) return;
    const std::string path = bridgePath();
    if (path.empty()) {
        logLine("libtorch is loaded but libsightline_torch.so was not found (set SIGHTLINE_TORCH_BRIDGE); recording without PyTorch ops");
        return;
    }
    void* bridge = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!bridge) {
        std::string why = std::string("cannot load the PyTorch op bridge: ") + dlerror() + "; recording without PyTorch ops";
        logLine(why.c_str());
        return;
    }
    auto init = reinterpret_cast<SightlineTorchInitFn>(dlsym(bridge, "sightline_torch_init"));
    auto recordOps = reinterpret_cast<SightlineTorchRecordOpsFn>(dlsym(bridge, "sightline_torch_record_ops"));
    if (!init || !recordOps || init(&c.table) != 0) {
        logLine("the PyTorch op bridge did not start; recording without PyTorch ops");
        return;
    }
    c.record_ops = recordOps;
    if (c.recording) setOps(true);
}

void watchForTorch() {
    // libtorch linked into the program is loaded but maybe not initialised yet while shared-library
    // constructors run: the bridge is loaded from __libc_start_main. A Python job loads torch later
    // with dlopen: this thread looks for it every 50 ms. (Interposing dlopen would change the caller
    // dlopen sees, and libtorch's own dlopen calls rely on their RUNPATH.)
    startQuietThread([] {
        while (!g_collector.stopped.load() && !g_collector.bridge_loaded.load()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            try {
                maybeLoadTorchBridge();
            } catch (...) {
                return;
            }
        }
    });
}

} // namespace sightline::collector
