#!/usr/bin/env bash
# Variants of the trainer's kernels plugin against each other in one device call, alternated, as
# docs/trainer.md's kernel rows are measured. VARIANTS names them: "tree" is devbin/'s own plugin,
# any other name a folder made by tests/gpu/make_variant.sh; NAME+VAR=VALUE runs NAME's programs
# with VAR=VALUE in their environment (e.g. "tree tree+SIGHTLINE_GDN_NARROW=1"). Sections:
#   CHECKS  each variant: sightline-trainer-checks --only gdn-kernels, and compute-sanitizer's
#           memcheck and racecheck on --only gdn-sanitize where the machine has it;
#   BENCH   ROUNDS rounds (2), each variant once a round in VARIANTS' order: one layer's rule at the
#           benchmark's heads, 8,192 tokens, bf16 (1 x 8,192 / 8 x 1,024 / mixed), forward and
#           forward+backward ms;
#   TRAIN   the trainer's fused + packed 8,192 row (benchmark config, synthetic data, 8 steps, steps
#           3-8 measured, expandable segments) for each variant in VARIANTS' order, then reversed;
#   FLA     where FLA_FOR names a variant: flash-linear-attention's table (gdn_bench_table.py, its
#           wheels from devbin/wheels) beside that variant's bench, one more round;
#   PHASE   where PHASE names variants built with the phase clock (gdn_phase_clock.sh): each one's
#           split, the held passes' sums by line and the five largest lines of the other kernels
#           (NAME+VAR=VALUE as above; the output's lines only with SIGHTLINE_GDN_NO_HELD_OUTPUT=1:
#           the held output, the default, notes no phases).
# SKIP_CHECKS=1, SKIP_BENCH=1, SKIP_TRAIN=1 leave sections out. Expects devbin/ (make_devbin.sh).
#   VARIANTS="tree wide8" tests/gpu/gdn_variants.sh
set -u
. "$(dirname "$0")/devbin_env.sh"
variants=${VARIANTS:-tree}
dir() { local name=${1%%+*}; [ "$name" = tree ] && echo $bin || echo $bin/$name; }
envOf() { case $1 in *+*) echo "${1#*+}" ;; esac; } # the variant's VAR=VALUE, if any
tag() { echo "${1//[^A-Za-z0-9_.-]/_}"; }             # the variant as a file name
run() { local v=$1 limit=$2; shift 2; T $limit env $(envOf $v) $(dir $v)/"$@"; }
for v in $variants; do
  [ -f "$(dir $v)/libsightline_trainer_kernels.so" ] || { echo "gdn_variants: no plugin for '$v' (tests/gpu/make_variant.sh)"; exit 2; }
done
summary() { grep '^summary:' "$1" | grep -oE '"(median_step_s|mfu_6n|peak_memory_gib|real_tokens_per_s)":[0-9.]*' | tr '\n' ' '; }

if [ -z "${SKIP_CHECKS:-}" ]; then
  san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  for v in $variants; do
    log=$out/checks-$(tag $v).txt
    run $v 200 sightline-trainer-checks $TINY --device cuda --only gdn-kernels > $log 2>&1
    echo "$v checks rc=$? $(tail -1 $log)"; grep "^FAIL" $log | head -5
    [ -n "$san" ] || continue
    for tool in memcheck racecheck; do
      T 100 env $(envOf $v) $san --tool $tool --error-exitcode 3 $(dir $v)/sightline-trainer-checks $TINY --device cuda --only gdn-sanitize > /tmp/san.txt 2>&1
      echo "$v $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.txt | tail -1)"
    done
  done
fi

if [ -z "${SKIP_BENCH:-}" ]; then
  echo "=== one layer's rule, 8,192 tokens (1 x 8,192 / 8 x 1,024 / mixed), ms"
  for r in $(seq 1 ${ROUNDS:-2}); do
    for v in $variants; do
      GDN_BENCH_ONLY=kernels run $v 100 sightline-trainer-checks $TINY --device cuda --only gdn-bench > /tmp/bench.txt 2>&1
      echo "$v round $r rc=$? $(awk '{for (i = 1; i <= NF; i++) if ($i ~ /^(fwd_ms|fwdbwd_ms)=/) printf "%s ", $i}' /tmp/bench.txt)"
    done
  done
fi

if [ -z "${SKIP_TRAIN:-}" ]; then
  echo "=== trainer, fused + packed 8,192, 8 steps (3-8 measured)"
  export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}
  $TR --config $BENCH --synthetic 400 --write-data /tmp/variants.jsonl > /dev/null
  for v in $variants $(echo $variants | tr ' ' '\n' | tac); do
    run $v ${RUN_LIMIT:-110} sightline-trainer --config $BENCH --data /tmp/variants.jsonl --bf16 --device cuda --peak-tflops 989 \
      --steps 8 --kernels fused --batching packed --budget 8192 > /tmp/train.log 2>&1
    echo "$v rc=$? $(summary /tmp/train.log)"
  done
fi

if [ -n "${FLA_FOR:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $bin/wheels/*.whl 2>&1 | tail -1
  GDN_BENCH_ONLY=kernels run $FLA_FOR 100 sightline-trainer-checks $TINY --device cuda --only gdn-bench > $out/ours-bench.txt 2>&1
  PYTHONPATH=/tmp/site T 400 python3 $root/tests/gpu/gdn_bench_table.py $out/ours-bench.txt > $out/fla-table.txt 2>&1
  echo "=== FLA's table (ours: $FLA_FOR)"; tail -25 $out/fla-table.txt
fi

for v in ${PHASE:-}; do
  T 260 env $(envOf $v) $root/tests/gpu/gdn_phase_clock.sh ${v%%+*} > $out/phase-$(tag $v).txt 2>&1
  echo "=== phase clock $v rc=$?"
  grep "cycles a block" $out/phase-$(tag $v).txt
  for k in fwd bwd_state; do grep -E "^sightline_gdn_$k +all" $out/phase-$(tag $v).txt | cut -c1-200; done
  for k in prep out bwd_chunk; do grep -E "^sightline_gdn_$k +all" $out/phase-$(tag $v).txt | sort -k3 -n -r | head -5 | cut -c1-200; done
done
