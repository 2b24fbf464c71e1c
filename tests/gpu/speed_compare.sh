#!/usr/bin/env bash
# The reference trainer against transformers on the shared benchmark config (issue 5), on a machine
# of two GPUs: each job on a GPU of its own, the two at the same time, the same examples.
#   1. both under `sightline run`, steps 3 and 4 recorded, budget 4,096; `sightline diff` with
#      transformers as "before" and the trainer as "after", and each one's report;
#   2. both for $STEPS steps without profiling, at each budget of $BUDGETS (default "4096 6144").
# SKIP_PROFILE, SKIP_SPEED skip sections; ALLOC sets PYTORCH_CUDA_ALLOC_CONF for both jobs.
# Expects devbin/ (tests/gpu/make_devbin.sh, carried). Writes its results to $OUT.
set -u
. "$(dirname "$0")/devbin_env.sh"
work=/tmp/slspeed; rm -rf $work; mkdir -p $work
[ -n "${ALLOC:-}" ] && export PYTORCH_CUDA_ALLOC_CONF=$ALLOC
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
$TR --config $BENCH --synthetic 400 --write-data $work/bench.jsonl > /dev/null || exit 1
common="--config $BENCH --data $work/bench.jsonl --bf16 --device cuda --peak-tflops 989"
HF="python3 examples/hf_train.py"

if [ -z "${SKIP_PROFILE:-}" ]; then
echo "=== 1. both under sightline run (budget 4096, steps 3-4 of 5 recorded)"
(CUDA_VISIBLE_DEVICES=0 T 420 $SL run --no-import --steps 3:4 -o $work/ptr -- $TR $common --steps 5 --budget 4096 > $work/ptr.out 2>&1
 echo "trainer rc=$?") &
(CUDA_VISIBLE_DEVICES=1 T 420 $SL run --no-import --steps 3:4 -o $work/phf -- $HF $common --steps 5 --budget 4096 > $work/phf.out 2>&1
 echo "transformers rc=$?") &
wait
grep -h "sightline:" $work/ptr.out $work/phf.out | tail -6
ctr=$(ls -S $work/ptr/*.slcap | head -1); chf=$(ls -S $work/phf/*.slcap | head -1)
T 300 $SL report "$ctr" -n 25 > $out/report-trainer.txt 2>&1 &
T 300 $SL report "$chf" -n 25 > $out/report-transformers.txt 2>&1 &
wait
T 300 $SL diff "$chf" "$ctr" -n 40 > $out/diff.txt 2>&1; echo "diff rc=$?"
head -60 $out/diff.txt
fi 2>&1 | tee $out/profile.txt

if [ -z "${SKIP_SPEED:-}" ]; then
echo "=== 2. speed, ${STEPS:=16} steps a run (totals over steps 3 on), trainer on GPU 0 and transformers on GPU 1 at once"
speed() { # NAME GPU CMD...: one job on one GPU, its log kept, its summary or why it stopped printed
  local name=$1 gpu=$2; shift 2
  CUDA_VISIBLE_DEVICES=$gpu T 400 "$@" > $out/speed-$name.log 2>&1; local rc=$?
  echo "$name rc=$rc $(grep '^summary:' $out/speed-$name.log || grep -iE 'out of|error' $out/speed-$name.log | tail -1)"
}
for b in ${BUDGETS:-4096 6144}; do
  speed trainer-$b 0 $TR $common --steps $STEPS --budget $b &
  speed transformers-$b 1 $HF $common --steps $STEPS --budget $b &
  wait
done
fi 2>&1 | tee $out/speed.txt
