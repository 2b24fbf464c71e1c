// libsightline_trainer_nccl.so: makes c10d's NCCL process group for the trainer. A plugin, so that
// the trainer itself links only libtorch's CPU part (distributed.cpp loads it on demand).
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

extern "C" __attribute__((visibility("default"))) c10d::Backend* sightline_make_nccl_backend(c10d::Store* store, int rank,
                                                                                             int world) {
    auto options = c10d::ProcessGroupNCCL::Options::create();
    auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(c10::intrusive_ptr<c10d::Store>::reclaim_copy(store), rank,
                                                             world, options);
    return group.release();
}
