#!/usr/bin/env bash
# Multi-GPU checks (issue 8, docs/multi-rank.md), on a machine of two or more GPUs in one go:
#   1. a Python DDP job over NCCL (tests/gpu/ddp_job.py) under `sightline run`, torchrun starting
#      two ranks, rank 1 delayed: one capture per rank, NCCL kernels classified, the straggler
#      named with its delay (`sightline ranks`);
#   2. the C++ trainer over NCCL: two ranks with one micro-batch each against one GPU
#      accumulating two (the same global batch, fp32, tiny config): the same losses;
#   3. the trainer's tokens/s on the benchmark config with the same global batch, one GPU then two;
#   4. the two-rank trainer under `sightline run` (`sightline ranks`).
# SKIP_DDP, SKIP_EQUAL, SKIP_SCALING, SKIP_TR2 skip sections.
# Expects devbin/ (tests/gpu/make_devbin.sh, carried). Writes its results to $OUT.
set -u
. "$(dirname "$0")/devbin_env.sh"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 # never NVLink multicast here
work=/tmp/slmulti; rm -rf $work; mkdir -p $work
RUN2="torchrun --standalone --nproc-per-node 2"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
python3 -c 'import torch; print("GPUs:", torch.cuda.device_count())'
nvidia-smi topo -m 2>/dev/null | head -4

if [ -z "${SKIP_DDP:-}" ]; then
echo "=== 1. Python DDP over NCCL, rank 1 delayed by 40 ms a step"
T 240 $SL run --no-import -o $work/ddp -- $RUN2 tests/gpu/ddp_job.py --steps 12 --slow-rank 1 --delay-ms 40 > $work/ddp.out 2>&1
echo "rc=$?"; grep -E "steps done|sightline:|Error" $work/ddp.out | head -8
ls $work/ddp
T 200 $SL ranks $(ls $work/ddp/*-rank*.slcap) > $out/ddp_ranks.txt 2>&1; echo "ranks rc=$?"; head -40 $out/ddp_ranks.txt
T 200 $SL ranks $(ls $work/ddp/*-rank*.slcap) --format json > $work/ddp_ranks.json 2>/dev/null
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("straggler", r.get("straggler"), "delay ms/step", r.get("straggler_delay_ms_per_step"), "matched collectives", r.get("matched_collectives"))' $work/ddp_ranks.json
cap0=$(ls $work/ddp/*-rank0.slcap | head -1)
T 200 $SL report $cap0 -n 12 > $out/ddp_rank0_report.txt 2>&1; grep -iE "nccl|communic|collective" $out/ddp_rank0_report.txt | head -12
fi 2>&1 | tee $out/ddp.txt

if [ -z "${SKIP_EQUAL:-}" ]; then
echo "=== 2. the trainer: two ranks against one GPU with the same global batch (fp32, tiny config)"
data="--config $TINY --synthetic 64 --median-len 100 --max-len 200 --budget 512 --steps 6 --device cuda --lr 1e-2 --warmup 2"
T 120 $TR $data --accumulate 2 --log-jsonl $work/one.jsonl > $work/one.out 2>&1; echo "one GPU rc=$?"
T 180 $RUN2 --no-python $TR $data --accumulate 1 --log-jsonl $work/two.jsonl > $work/two.out 2>&1; echo "two ranks rc=$?"
tail -3 $work/two.out
python3 - $work/one.jsonl $work/two.jsonl <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]; b = [json.loads(l) for l in open(sys.argv[2])]
worst = max(abs(x["loss"] - y["loss"]) / abs(x["loss"]) for x, y in zip(a, b)) if a and b else float("nan")
same = len(a) == len(b) == 6 and all((x["real_tokens"], x["padded_tokens"]) == (y["real_tokens"], y["padded_tokens"]) for x, y in zip(a, b))
for x, y in zip(a, b):
    print(f"step {x['step']}: loss {x['loss']:.6f} vs {y['loss']:.6f}, |g| {x['grad_norm']:.5f} vs {y['grad_norm']:.5f}, tokens {x['real_tokens']} vs {y['real_tokens']}")
print(f"same batches: {same}; largest loss relative difference {worst:.2e}: {'SAME' if same and worst < 1e-4 else 'DIFFERENT'}")
PY
fi 2>&1 | tee $out/equal.txt

if [ -z "${SKIP_SCALING:-}" ]; then
echo "=== 3. scaling on the benchmark config (bf16, budget 4096, ${STEPS:-10} steps): the same global batch a step,"
echo "    one GPU accumulating 2 micro-batches against two GPUs with one each"
T 200 $TR --config $BENCH --synthetic 400 --write-data $work/bench.jsonl > /dev/null
common="--config $BENCH --data $work/bench.jsonl --steps ${STEPS:-10} --budget 4096 --bf16 --device cuda --peak-tflops 989"
T 240 $TR $common --accumulate 2 > $out/scale-1gpu.log 2>&1; echo "1 GPU rc=$? $(grep '^summary' $out/scale-1gpu.log)"
T 300 $RUN2 --no-python $TR $common > $out/scale-2gpu.log 2>&1; echo "2 GPUs rc=$? $(grep '^summary' $out/scale-2gpu.log)"
python3 - $out/scale-1gpu.log $out/scale-2gpu.log <<'PY'
import json, sys
s = [json.loads(next(l for l in open(f) if l.startswith("summary:"))[8:]) for f in sys.argv[1:3]]
print(f"tokens/s real: 1 GPU {s[0]['real_tokens_per_s']:.0f}, 2 GPUs {s[1]['real_tokens_per_s']:.0f}: x{s[1]['real_tokens_per_s'] / s[0]['real_tokens_per_s']:.2f}"
      f" (median step {s[0]['median_step_s']:.3f} s vs {s[1]['median_step_s']:.3f} s; peak memory {s[0]['peak_memory_gib']:.1f} vs {s[1]['peak_memory_gib']:.1f} GiB)")
PY
fi 2>&1 | tee $out/scaling.txt

if [ -z "${SKIP_TR2:-}" ]; then
echo "=== 4. the two-rank trainer under sightline run (3 steps)"
[ -f $work/bench.jsonl ] || T 200 $TR --config $BENCH --synthetic 400 --write-data $work/bench.jsonl > /dev/null
common="--config $BENCH --data $work/bench.jsonl --budget 4096 --bf16 --device cuda --peak-tflops 989"
T 300 $SL run --no-import -o $work/tr2 -- $RUN2 --no-python $TR $common --steps 3 > $work/tr2.out 2>&1; echo "rc=$?"
grep -E "sightline:" $work/tr2.out | tail -4
T 300 $SL ranks $(ls $work/tr2/*-rank*.slcap) > $out/trainer_ranks.txt 2>&1; echo "ranks rc=$?"; head -45 $out/trainer_ranks.txt
fi 2>&1 | tee $out/trainer_ranks_run.txt
