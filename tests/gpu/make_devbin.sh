#!/usr/bin/env bash
# Gathers what tests/gpu/device_checks.sh needs on the GPU machine into devbin/ (git-ignored; pass
# it in the device call's carry list): the release build of sightline, the collector and its
# torch bridge, the reference trainer and its forward tool, the exactness program, and the shared libraries sightline links that the GPU
# machine's image lacks.
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake --preset release >/dev/null
cmake --build --preset release
grep -qx "/devbin/" .git/info/exclude 2>/dev/null || echo "/devbin/" >> .git/info/exclude
rm -rf devbin && mkdir -p devbin/lib
cp build/release/cli/sightline build/release/collector/libsightline_collector.so build/release/collector/libsightline_torch.so devbin/
cp build/release/examples/sightline-trainer build/release/examples/sightline-trainer-forward build/release/examples/libsightline_trainer_nccl.so devbin/
cp build/release/bench/sightline_clock_cost build/release/bench/sightline_op_overhead build/release/bench/libsightline_noop_callback.so devbin/
cp ../shared/configs/qwen35-4b-like.json devbin/ # the benchmark config (../shared does not travel)
/usr/local/cuda/bin/nvcc -O2 -arch=sm_90 -o devbin/exactness tests/gpu/exactness.cu
for l in libtomlplusplus.so.3 libfmt.so.9 libsimdjson.so.14 libsqlite3.so.0; do
  cp -L "/lib/x86_64-linux-gnu/$l" devbin/lib/
done
du -sh devbin
