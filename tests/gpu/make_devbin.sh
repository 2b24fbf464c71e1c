#!/usr/bin/env bash
# Gathers what tests/gpu/device_checks.sh needs on the GPU machine into devbin/ (git-ignored; pass
# it in the device call's carry list): the build of sightline, the collector, its torch bridge and
# Python adapter, the reference trainer with its kernels plugin, forward tool and checks, the
# exactness program, the peer stack with its wheels, and the shared libraries sightline links that
# the GPU machine's image lacks.
# PRESET=dev takes the development build instead (RelWithDebInfo, already built), debug info stripped.
set -euo pipefail
cd "$(dirname "$0")/../.."
preset=${PRESET:-release}
cmake --preset $preset >/dev/null
cmake --build --preset $preset
exclude=$(git rev-parse --git-path info/exclude) # a worktree has its own path for it
mkdir -p "$(dirname "$exclude")"
grep -qx "/devbin/" "$exclude" 2>/dev/null || echo "/devbin/" >> "$exclude"
rm -rf devbin && mkdir -p devbin/lib
cp build/$preset/cli/sightline build/$preset/collector/libsightline_collector.so build/$preset/collector/libsightline_torch.so devbin/
cp -r build/$preset/collector/python devbin/ # the Python adapter, where sightline run looks for it (beside the collector)
find devbin/python -name __pycache__ -prune -exec rm -rf {} +
cp build/$preset/examples/sightline-trainer build/$preset/examples/sightline-trainer-forward build/$preset/examples/libsightline_trainer_nccl.so devbin/
cp build/$preset/examples/sightline-trainer-checks build/$preset/examples/libsightline_trainer_kernels.so devbin/
cp build/$preset/bench/sightline_clock_cost build/$preset/bench/sightline_op_overhead build/$preset/bench/libsightline_noop_callback.so devbin/
cp ../shared/configs/qwen35-4b-like.json devbin/ # the benchmark config (../shared does not travel)
# The peer stack (tests/gpu/adapter_checks.sh) and the flash-linear-attention wheels it needs
# (../shared/peers/README.md; the GPU machine has Python 3.12 and no internet): about 1.5 MB.
mkdir -p devbin/peers devbin/wheels
cp -r ../shared/peers/peer_stack.py ../shared/peers/shim devbin/peers/
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
  -d devbin/wheels fla-core==0.6.0 flash-linear-attention==0.6.0 || echo "make_devbin: no FLA wheels (the peer runs on its torch fallback)"
/usr/local/cuda/bin/nvcc -O2 -arch=sm_90 -o devbin/exactness tests/gpu/exactness.cu
for l in libtomlplusplus.so.3 libfmt.so.9 libsimdjson.so.14 libsqlite3.so.0; do
  cp -L "/lib/x86_64-linux-gnu/$l" devbin/lib/
done
if [ "$preset" != release ]; then strip --strip-debug devbin/*.so devbin/sightline* devbin/exactness; fi
du -sh devbin
