#!/usr/bin/env bash
# The Python adapter and the batching simulator on the GPU (docs/adapter.md, docs/padding.md), in
# one device call, every job under `timeout`:
#   1. the peer stack (devbin/peers/peer_stack.py: transformers' Qwen3_5ForCausalLM on the benchmark
#      config, bf16, fused AdamW; flash-linear-attention when its wheels are in devbin/wheels, else
#      the torch fallback) on padded batches of 4,096 tokens under `sightline run`, no annotation:
#      every batch the adapter recorded against the peer's own batching, the padding efficiency of
#      its timed steps against its own figure, padding-waste's saving and predicted tokens/s;
#   2. the same with `sightline run --no-python-adapter`: step time with the adapter and without;
#   3. the peer on packed rows of 4,096 tokens (position_ids, cu_seq_lens, seq_idx) under
#      `sightline run`: tokens exact, efficiency 1, packed with boundaries; its measured real
#      tokens/s against 1.'s prediction (FLA compiles its Triton kernels in each new process's
#      first step: 90-140 s for the first, less once its cache is warm);
#   4. the reference trainer on padded batches and, when it has `--batching`, packed rows, under
#      `sightline run`: the report's tokens against the trainer's log, the padded run's saving
#      against the packed run's gain.
# Device time (estimated, not yet measured): the peer part 5-7 min with flash-linear-attention
# (its Triton kernels compile in each run's first step, the packed run's varlen ones too), about
# 3 min on the torch fallback (PEER_KERNELS=fallback, nothing to compile); the trainer part about
# 1.5 min. Each part fits one 10-minute call: SKIP_TRAINER=1 in one, SKIP_PEER=1 in the next.
# Expects devbin/ (tests/gpu/make_devbin.sh, carried). Writes its results to $OUT. PEER_KERNELS=
# fla|fallback, PEER_WARM (default 3), PEER_STEPS (5), TRAINER_STEPS (5); SKIP_PEER=1,
# SKIP_NOADAPTER=1, SKIP_TRAINER=1 leave sections out.
set -u
. "$(dirname "$0")/devbin_env.sh"
work=/tmp/sladapter; rm -rf $work; mkdir -p $work
BUDGET=4096
WARM=${PEER_WARM:-3}; STEPS=${PEER_STEPS:-5}
check=$root/tests/gpu/adapter_check.py
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'

if [ -z "${SKIP_PEER:-}" ]; then
kernels=${PEER_KERNELS:-}
if [ -z "$kernels" ]; then ls $bin/wheels/*.whl > /dev/null 2>&1 && kernels=fla || kernels=fallback; fi
if [ "$kernels" = fla ]; then
  python3 -m pip install --quiet --no-index --no-deps --target $work/site $bin/wheels/*.whl || kernels=fallback
  export PYTHONPATH=$work/site${PYTHONPATH:+:$PYTHONPATH}
fi
# NAME BATCH LIMIT_S [run options]: the peer under sightline run; its RESULT line and the adapter's own cost line.
peer() {
  local name=$1 batch=$2 limit=$3; shift 3
  local t0=$(date +%s)
  SIGHTLINE_DEBUG=1 KERNELS=$kernels BATCH=$batch BUDGET=$BUDGET WARM=$WARM STEPS=$STEPS \
    T $limit $SL run -o $work/$name "$@" -- python3 $bin/peers/peer_stack.py $BENCH > $work/$name.out 2> $work/$name.err
  echo "--- $name: rc=$? in $(( $(date +%s) - t0 )) s; $(grep '^RESULT' $work/$name.out)"
  grep -E "^sightline: (Python adapter|the job|.*capture)" $work/$name.err | tail -3
}
echo "=== peer stack, KERNELS=$kernels, budget $BUDGET, $WARM warm-up + $STEPS timed steps"
peer pad padded 300
[ -z "${SKIP_NOADAPTER:-}" ] && peer noadapter padded 150 --no-python-adapter
peer pack packed 240
T 300 python3 $check peer $SL $work $kernels $BUDGET $WARM $STEPS
echo "peer checks rc=$?"
cp $work/*.out $work/*.err $out/ 2>/dev/null
for n in pad pack; do d=$(ls -S $work/$n/*.db 2>/dev/null | head -1); [ -n "$d" ] && T 120 $SL report $d -n 10 > $out/report-$n.txt 2>&1; done
d=$(ls -S $work/pad/*.db 2>/dev/null | head -1); [ -n "$d" ] && T 120 $SL padding $d > $out/padding-pad.txt 2>&1 && cat $out/padding-pad.txt
fi 2>&1 | tee $out/peer.txt

if [ -z "${SKIP_TRAINER:-}" ]; then
echo "=== reference trainer, budget $BUDGET, ${TRAINER_STEPS:-5} steps"
$TR --config $BENCH --synthetic 400 --write-data $work/bench.jsonl > /dev/null
modes="pad"
$TR --help 2>&1 | grep -q -- "--batching" && modes="pad pack"
for m in $modes; do
  extra=""; [ $m = pack ] && extra="--batching packed"
  t0=$(date +%s)
  T 300 $SL run -o $work/trainer-$m -- $TR --config $BENCH --data $work/bench.jsonl --steps ${TRAINER_STEPS:-5} --budget $BUDGET \
    --bf16 --device cuda $extra --log-jsonl $work/log-trainer-$m.jsonl > $work/trainer-$m.out 2> $work/trainer-$m.err
  echo "--- trainer-$m: rc=$? in $(( $(date +%s) - t0 )) s; $(grep '^summary:' $work/trainer-$m.out)"
done
[ "$modes" = pad ] && echo "(this trainer has no --batching: the packed run is left out)"
T 300 python3 $check trainer $SL $work
echo "trainer checks rc=$?"
cp $work/log-*.jsonl $out/ 2>/dev/null
fi 2>&1 | tee $out/trainer.txt
