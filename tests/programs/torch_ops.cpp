// A libtorch program with a known op count, profiled by `sightline run` in the CLI tests: three
// steps, each a "train_step" user range around one mm, one add, one relu and one sum.
#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <cstdio>

int main() {
    float total = 0;
    for (int step = 0; step < 3; ++step) {
        RECORD_USER_SCOPE("train_step");
        const at::Tensor a = at::ones({64, 64});
        const at::Tensor b = at::mm(a, a);
        const at::Tensor c = at::relu(at::add(b, 1));
        total += c.sum().item<float>();
    }
    std::printf("total %.0f\n", total);
    return total == 3 * 64 * 64 * 65 ? 0 : 1;
}
