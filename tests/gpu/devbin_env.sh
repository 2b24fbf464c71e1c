# Sourced by the device scripts of the trainer (trainer_checks.sh, multi_gpu_checks.sh): devbin/'s
# programs (tests/gpu/make_devbin.sh) with the device's own libtorch on the library path, and the
# helpers they share. Run from the repository root; results go to $OUT.
root=$(pwd); bin=$root/devbin
torchlib=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
export LD_LIBRARY_PATH=$bin/lib:$torchlib:${LD_LIBRARY_PATH:-}
export SIGHTLINE_TORCH_BRIDGE=$bin/libsightline_torch.so PYTHONUNBUFFERED=1
SL=$bin/sightline; TR=$bin/sightline-trainer; COL=$bin/libsightline_collector.so
BENCH=$bin/qwen35-4b-like.json; TINY=$root/examples/configs/tiny.json
out=${OUT:-/tmp/out}; mkdir -p $out
T() { timeout -k 5 "$@"; } # every job under a time limit: a hang costs its limit, not the device call
