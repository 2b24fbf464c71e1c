#!/usr/bin/env bash
# One layer's delta rule kernel by kernel, ours beside flash-linear-attention's: each side's
# benchmark under `sightline run`, then `sightline report`'s kernel table of each (name, calls,
# total, average a call). Ours: sightline-trainer-checks --only gdn-bench, the kernels alone, one
# round (forward calls, then forward+backward calls, on 1 x 8,192 / 8 x 1,024 / mixed); FLA:
# gdn_bench_table.py --fla-calls CALLS (10) forward+backward calls on each of CASES (all three), its
# wheels from devbin/wheels, each call a step and only those recorded (not Triton's compiling and
# autotuning in the warm-up calls). Set side by side the average a call: the forward's kernels run more
# often on ours (its bench times the forward alone too). Expects devbin/ (make_devbin.sh); tables
# in $OUT/kernels-ours.txt and $OUT/kernels-fla.txt (OURS_ONLY=1: ours alone).
#   CASES="1x8192" tests/gpu/gdn_by_kernel.sh
set -u
. "$(dirname "$0")/devbin_env.sh"
profile() { # NAME LIMIT STEPS COMMAND...: the command under sightline run (STEPS: --steps A:B, or "all"), its kernel table into $out
  local name=$1 limit=$2 steps=$3; shift 3
  local window=(); [ "$steps" = all ] || window=(--steps $steps)
  rm -rf /tmp/prof-$name
  T $limit $SL run -o /tmp/prof-$name "${window[@]}" -- "$@" > /tmp/prof-$name.out 2> /tmp/prof-$name.err || echo "gdn_by_kernel: $name exited $?"
  local cap=$(ls -S /tmp/prof-$name/*.slcap 2>/dev/null | head -1)
  [ -n "$cap" ] || { echo "gdn_by_kernel: no capture for $name"; tail -5 /tmp/prof-$name.err; return 1; }
  # a step window still records what runs between its steps (FLA's autotuning of the next case):
  # the tables then take the steps alone
  local only=(); [ "$steps" = all ] || only=(--step all)
  T 120 $SL report "$cap" -n ${ROWS:-30} --kernel-sort total "${only[@]}" > $out/kernels-$name.txt 2>&1
  echo "=== $name (kernels by total time)"
  sed -n '/^Kernels (/,/^$/p' $out/kernels-$name.txt | head -$(( ${ROWS:-30} + 4 ))
}
GDN_BENCH_ONLY=kernels GDN_BENCH_ROUNDS=1 profile ours 120 all $bin/sightline-trainer-checks $TINY --device cuda --only gdn-bench
[ -z "${OURS_ONLY:-}" ] || exit 0 # ours alone (FLA's kernels do not change between our builds)
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $bin/wheels/*.whl 2>&1 | tail -1
names=(${CASES:-1x8192 8x1024 mixed}) calls=${CALLS:-10} cases=()
for c in "${names[@]}"; do cases+=(--case $c); done
PYTHONPATH=/tmp/site profile fla ${FLA_LIMIT:-300} 1:$((calls * ${#names[@]})) python3 $root/tests/gpu/gdn_bench_table.py --fla-calls $calls "${cases[@]}"
