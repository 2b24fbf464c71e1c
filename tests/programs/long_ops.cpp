// A libtorch job that runs for a while (STEPS steps of about 20 ms, default 300), for the attach
// tests: each step is a "train_step" range around one mm.
#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

int main(int argc, char** argv) {
    const int steps = argc > 1 ? std::atoi(argv[1]) : 300;
    std::printf("ready\n");
    std::fflush(stdout);
    for (int step = 0; step < steps; ++step) {
        RECORD_USER_SCOPE("train_step");
        (void)at::mm(at::ones({16, 16}), at::ones({16, 16}));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return 0;
}
