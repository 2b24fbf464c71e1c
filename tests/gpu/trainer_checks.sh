#!/usr/bin/env bash
# GPU checks of the reference trainer (docs/trainer.md), run on the device machine in one go:
#   1. parity with transformers' Qwen3_5ForCausalLM on the GPU: the tiny config and the benchmark
#      config cut to 4 layers, in fp32 and in bf16 (tests/trainer/parity_test.py);
#   2. speed on the shared benchmark config and synthetic data: sightline-trainer at the largest
#      token budget that fits (8,192, else 6,144, else 4,096) and at 4,096, and transformers
#      (examples/hf_train.py) at 4,096 and 8,192, each a separate process, the same examples;
#   3. the trainer under `sightline run`: its report and the rules that fire;
#   4. the trainer started dormant and `sightline attach PID --steps 2`.
# Expects devbin/ (tests/gpu/make_devbin.sh, carried). Writes its results to $OUT; SKIP_PARITY=1,
# SKIP_SPEED=1, SKIP_PROFILE=1, SKIP_ATTACH=1 skip sections; STEPS sets the speed runs' steps,
# PROFILE_STEPS and PROFILE_BUDGET the profiled run's, ATTACH_ARGS the attached trainer's model and data.
set -u
. "$(dirname "$0")/devbin_env.sh"
work=/tmp/sltrainer; rm -rf $work; mkdir -p $work/run; chmod 700 $work/run
PEAK=989   # H200 dense bf16 TFLOP/s (datasheet), for MFU
STEPS=${STEPS:-8}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
[ -f "$BENCH" ] || { echo "no benchmark config at $BENCH"; exit 1; }

if [ -z "${SKIP_PARITY:-}" ]; then
echo "=== 1. parity with transformers on the GPU"
for args in "examples/configs/tiny.json" "examples/configs/tiny.json --bf16" "$BENCH --layers 4" "$BENCH --layers 4 --bf16"; do
  echo "--- $args"
  T 240 python3 tests/trainer/parity_test.py $bin/sightline-trainer-forward $args $work/parity --device cuda 2>&1 | grep -vE "Writing|falling back"
  echo "rc=${PIPESTATUS[0]}"
done 2>&1 | tee $out/parity.txt
fi

if [ -z "${SKIP_SPEED:-}" ]; then
echo "=== 2. speed on the benchmark config ($STEPS steps a run, the first 2 left out of the medians)"
$TR --config $BENCH --synthetic 400 --write-data $work/bench.jsonl
speed() { # NAME CMD...: runs one job, keeps its log, prints its summary or why it stopped
  local name=$1; shift
  T 300 "$@" > $out/speed-$name.log 2>&1; local rc=$?
  echo "$name rc=$rc $(grep '^summary:' $out/speed-$name.log || grep -iE 'out of|error' $out/speed-$name.log | tail -1)"
  return $rc
}
common="--config $BENCH --data $work/bench.jsonl --steps $STEPS --bf16 --device cuda --peak-tflops $PEAK"
best=""
for b in 8192 6144; do
  if speed trainer-$b $TR $common --budget $b; then best=$b; break; fi
done
speed trainer-4096 $TR $common --budget 4096
speed transformers-4096 python3 examples/hf_train.py $common --budget 4096
speed transformers-8192 python3 examples/hf_train.py $common --budget 8192 --steps 3
echo "trainer's largest budget that fits: ${best:-4096}"
fi 2>&1 | tee $out/speed.txt

if [ -z "${SKIP_PROFILE:-}" ]; then
echo "=== 3. the trainer under sightline run (benchmark config, budget ${PROFILE_BUDGET:-4096}, ${PROFILE_STEPS:-4} steps)"
[ -f $work/bench.jsonl ] || $TR --config $BENCH --synthetic 400 --write-data $work/bench.jsonl
T 400 $SL run -o $work/prof -- $TR --config $BENCH --data $work/bench.jsonl --steps ${PROFILE_STEPS:-4} --budget ${PROFILE_BUDGET:-4096} --bf16 \
  --device cuda --peak-tflops $PEAK > $work/prof.out 2> $work/prof.err; echo "rc=$?"
tail -3 $work/prof.out; grep "sightline:" $work/prof.err | tail -4
cap=$(ls -S $work/prof/*.slcap | head -1)
T 200 $SL report "$cap" -n 15 > $out/trainer_report.txt 2>&1; echo "report rc=$?"
T 200 $SL report "$cap" --format json > $out/trainer_report.json 2>/dev/null
python3 - $out/trainer_report.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("rules fired:", ", ".join(f["rule"] for f in r.get("findings", [])))
m = r.get("metrics", {})
print("metrics:", {k: m[k] for k in sorted(m) if k.split(".")[0] in ("tokens", "padding", "mfu", "step", "gpu", "kernels")})
PY
fi 2>&1 | tee $out/profile.txt

if [ -z "${SKIP_ATTACH:-}" ]; then
echo "=== 4. attach to the dormant trainer"
export XDG_RUNTIME_DIR=$work/run
SIGHTLINE_DORMANT=1 SIGHTLINE_OUTPUT=$work/attach LD_PRELOAD=$COL $TR ${ATTACH_ARGS:---config $BENCH --synthetic 400 --steps 14 --budget 4096} \
  --bf16 --device cuda > $work/att.out 2> $work/att.err &
pid=$!
for i in $(seq 1 600); do [ "$(grep -c '^step' $work/att.out)" -ge 4 ] && break; sleep 0.2; done
T 200 $SL attach $pid --steps 2 -o $work/window.db > $work/window.txt 2> $work/window.err; echo "attach rc=$?"; cat $work/window.err
wait $pid; echo "trainer rc=$? after $(grep -c '^step' $work/att.out) steps"
T 120 $SL report $work/window.db --format json 2>/dev/null | python3 -c 'import json,sys; r=json.load(sys.stdin); m=r["metrics"]; print("window: steps", m.get("steps.count"), "real tokens a step", m.get("tokens.real"), "rules", [f["rule"] for f in r.get("findings", [])])'
fi 2>&1 | tee $out/attach.txt
