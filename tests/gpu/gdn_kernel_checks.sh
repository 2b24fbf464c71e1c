#!/usr/bin/env bash
# GPU checks of the gated delta rule's CUDA kernels (docs/trainer.md), in one device call of about
# four minutes. Sections, in order:
#   1 CHECK    sightline-trainer-checks --only gdn-kernels: outputs, final states and the gradients
#              of q, k, v, g, beta against the naive rule on fresh random inputs (benchmark heads
#              16/32 x 128; one sequence of 2,000; 100 of 20; lengths 1..300 not multiples of 64;
#              1-token ones), fp32 (limit 1e-4) and bf16 (1e-2), relative error over the tensor, NaN
#              fails; exact zeros across boundaries. Every line prints its error, so a failure
#              says where; sections 2-4 are then skipped.
#   2 SANITIZE compute-sanitizer memcheck and racecheck on a tiny case, when the machine has it.
#   3 BENCH    one layer's delta rule at 8,192 tokens (1 x 8,192, 8 x 1,024, mixed lengths),
#              forward and forward+backward: the kernels, the libtorch chunk-parallel rule, and
#              flash-linear-attention's chunk_gated_delta_rule when its wheels are in devbin/wheels
#              (speed only); ms, TFLOP/s, ratio (tests/gpu/gdn_bench_table.py). The kernels run
#              twice: products on the tensor cores (TF32), and plain (SIGHTLINE_GDN_PLAIN=1).
#   4 TRAIN    the trainer's bench row fused+packed 8,192 (benchmark config, synthetic data, bf16),
#              --gdn kernels against --gdn libtorch, STEPS timed steps (tests/gpu/bench_rows.py).
#   3b PROFILE sightline run on the bench (kernels only): the time of each of the four kernels.
# TRAIN_RULES="kernels" leaves section 4's libtorch row out.
# SKIP_SANITIZE=1, SKIP_BENCH=1, SKIP_FLA=1, SKIP_PROFILE=1, SKIP_TRAIN=1 leave sections out. Expects devbin/
# (PRESET=dev tests/gpu/make_devbin.sh, carried). Results in $OUT.
set -u
. "$(dirname "$0")/devbin_env.sh"
work=/tmp/slgdn; rm -rf $work; mkdir -p $work/logs
CHECKS="$bin/sightline-trainer-checks $TINY --device cuda"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

echo "=== 1 kernels against the naive rule"
T 180 $CHECKS --only gdn-kernels > $out/gdn_checks.txt 2>&1; rc=$?
cat $out/gdn_checks.txt
if [ $rc -ne 0 ]; then
  echo "FAIL gdn kernels (rc=$rc): $(grep -c '^FAIL' $out/gdn_checks.txt) failing checks (errors above); sections 2-4 skipped"
  exit 1
fi
echo "PASS gdn kernels: $(tail -1 $out/gdn_checks.txt)"

if [ -z "${SKIP_SANITIZE:-}" ]; then
  echo "=== 2 compute-sanitizer, tiny case (segments 1, 70, 5; 1/2 heads of 128; bf16; forward and backward)"
  san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  if [ -z "$san" ]; then
    echo "SKIP compute-sanitizer: not on this machine"
  else
    for tool in memcheck racecheck; do
      T 90 $san --tool $tool --error-exitcode 3 $CHECKS --only gdn-sanitize > $work/san-$tool.txt 2>&1; rc=$?
      cp $work/san-$tool.txt $out/
      case $rc in
        0) echo "PASS compute-sanitizer $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $work/san-$tool.txt | tail -1)" ;;
        124|137) echo "SKIP compute-sanitizer $tool: over 90 s, no verdict" ;;
        *) echo "FAIL compute-sanitizer $tool (rc=$rc)"; grep -m 12 -E "=====" $work/san-$tool.txt ;;
      esac
    done
  fi
fi

if [ -z "${SKIP_BENCH:-}" ]; then
  echo "=== 3 one layer's delta rule, 8,192 tokens, 16/32 heads of 128, bf16"
  T 150 $CHECKS --only gdn-bench > $work/bench.txt 2>&1; echo "bench rc=$?"
  grep -v "^gdn-bench" $work/bench.txt | tail -5
  if [ -z "${SKIP_FLA:-}" ] && ls $bin/wheels/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $bin/wheels/*.whl 2>&1 | tail -1
    export PYTHONPATH=/tmp/site # FLA's Triton kernels compile on first use (a minute or two)
  fi
  T 200 python3 $root/tests/gpu/gdn_bench_table.py $work/bench.txt 2>&1 | tee $out/gdn_bench.txt
  unset PYTHONPATH
fi

if [ -z "${SKIP_PROFILE:-}" ]; then
  echo "=== 3b the kernels' time by kernel (sightline run on the bench, kernels only)"
  GDN_BENCH_ONLY=kernels T 120 $SL run -o $work/prof-bench -- $CHECKS --only gdn-bench > $work/prof-bench.out 2> $work/prof-bench.err
  echo "profile rc=$?"; grep "sightline:" $work/prof-bench.err | tail -2
  cap=$(ls -S $work/prof-bench/*.slcap 2>/dev/null | head -1)
  [ -n "$cap" ] && T 120 $SL report "$cap" -n 15 > $out/gdn_profile.txt 2>&1
  grep -A 12 "GPU time by kernel class" $out/gdn_profile.txt
fi

if [ -z "${SKIP_TRAIN:-}" ]; then
  STEPS=${STEPS:-5}
  echo "=== 4 trainer, fused+packed 8,192, benchmark config, $((STEPS + 1)) steps (steps 3-$STEPS measured)"
  export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}
  $TR --config $BENCH --synthetic 400 --write-data $work/bench.jsonl > /dev/null
  names=""
  for gdn in ${TRAIN_RULES:-kernels libtorch}; do
    name=fused-packed-8192-$gdn
    T ${RUN_LIMIT:-150} $TR --config $BENCH --data $work/bench.jsonl --steps $((STEPS + 1)) --bf16 --device cuda --peak-tflops 989 \
      --kernels fused --batching packed --budget 8192 --gdn $gdn --log-jsonl $work/logs/$name.jsonl > $work/logs/$name.log 2>&1
    echo "$name rc=$? $(grep '^summary:' $work/logs/$name.log || grep -iE 'out of|error|what|non-finite' $work/logs/$name.log | tail -2)"
    names="$names $name"
  done
  python3 $root/tests/gpu/bench_rows.py $work $names | tee $out/gdn_train.txt
fi
tar czf $out/gdn_logs.tgz -C $work logs bench.txt 2>/dev/null
