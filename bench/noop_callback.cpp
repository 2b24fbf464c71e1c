// A RecordFunction callback that does nothing, for bench/py_op_overhead.py and the no-op variant
// of tests/gpu/overhead_alternating.sh: what PyTorch itself costs per op once any op callback is
// registered, the floor under every op recorder.
#include <ATen/record_function.h>

namespace {
std::unique_ptr<at::ObserverContext> enter(const at::RecordFunction&) { return nullptr; }
void leave(const at::RecordFunction&, at::ObserverContext*) {}
at::CallbackHandle g_handle = 0;
} // namespace

// Registers the callback (on != 0) or removes it; not thread-safe, called from the job's main thread.
extern "C" __attribute__((visibility("default"))) void sightline_bench_noop(int on) {
    if (on && g_handle == 0)
        g_handle = at::addGlobalCallback(
            at::RecordFunctionCallback(enter, leave).scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
    else if (!on && g_handle != 0) {
        at::removeCallback(g_handle);
        g_handle = 0;
    }
}
