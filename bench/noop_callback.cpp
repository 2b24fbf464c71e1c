// A RecordFunction callback that does nothing, for bench/py_op_overhead.py: what PyTorch itself
// costs per op once any op callback is registered, the floor under every op recorder.
#include <ATen/record_function.h>

namespace {
std::unique_ptr<at::ObserverContext> enter(const at::RecordFunction&) { return nullptr; }
void leave(const at::RecordFunction&, at::ObserverContext*) {}
} // namespace

extern "C" __attribute__((visibility("default"))) void sightline_bench_register_noop() {
    at::addGlobalCallback(at::RecordFunctionCallback(enter, leave).scopes(
        {at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
}
