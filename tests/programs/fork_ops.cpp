// A libtorch program that forks a worker (as a DataLoader does) and runs ops in both processes,
// with RANK set: the parent's capture must hold the parent's ops only, named with its rank, and
// the forked worker must write nothing.
#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <cstdio>
#include <sys/wait.h>
#include <unistd.h>

int main() {
    const pid_t child = fork();
    if (child == 0) {
        for (int i = 0; i < 5; ++i) {
            RECORD_USER_SCOPE("worker_batch");
            (void)at::mm(at::ones({32, 32}), at::ones({32, 32}));
        }
        _exit(0);
    }
    for (int step = 0; step < 2; ++step) {
        RECORD_USER_SCOPE("train_step");
        (void)at::mm(at::ones({32, 32}), at::ones({32, 32}));
    }
    int status = 0;
    waitpid(child, &status, 0);
    std::printf("parent done, worker status %d\n", status);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
