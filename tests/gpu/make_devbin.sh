#!/usr/bin/env bash
# Gathers what tests/gpu/device_checks.sh needs on the GPU machine into devbin/ (git-ignored; pass
# it in the device call's carry list): the build of sightline, the collector and its
# torch bridge, the reference trainer with its kernels plugin, forward tool and checks, the exactness program, and the shared libraries sightline links that the GPU
# machine's image lacks.
# PRESET=dev takes the development build instead (RelWithDebInfo, already built), debug info stripped.
set -euo pipefail
cd "$(dirname "$0")/../.."
preset=${PRESET:-release}
cmake --preset $preset >/dev/null
cmake --build --preset $preset
grep -qx "/devbin/" .git/info/exclude 2>/dev/null || echo "/devbin/" >> .git/info/exclude
rm -rf devbin && mkdir -p devbin/lib
cp build/$preset/cli/sightline build/$preset/collector/libsightline_collector.so build/$preset/collector/libsightline_torch.so devbin/
cp build/$preset/examples/sightline-trainer build/$preset/examples/sightline-trainer-forward build/$preset/examples/libsightline_trainer_nccl.so devbin/
cp build/$preset/examples/sightline-trainer-checks build/$preset/examples/libsightline_trainer_kernels.so devbin/
cp build/$preset/bench/sightline_clock_cost build/$preset/bench/sightline_op_overhead build/$preset/bench/libsightline_noop_callback.so devbin/
cp ../shared/configs/qwen35-4b-like.json devbin/ # the benchmark config (../shared does not travel)
/usr/local/cuda/bin/nvcc -O2 -arch=sm_90 -o devbin/exactness tests/gpu/exactness.cu
for l in libtomlplusplus.so.3 libfmt.so.9 libsimdjson.so.14 libsqlite3.so.0; do
  cp -L "/lib/x86_64-linux-gnu/$l" devbin/lib/
done
if [ "$preset" != release ]; then strip --strip-debug devbin/*.so devbin/sightline* devbin/exactness; fi
du -sh devbin
