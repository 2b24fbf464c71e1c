#!/usr/bin/env bash
# Where the collector's cost goes on the benchmark config (issue 4), on a machine of two GPUs: the
# transformers job (examples/hf_train.py) on GPU 0 and the reference trainer on GPU 1, at once,
# each run four ways in turn: without the collector, and under `sightline run --steps 3:4` with
# ops only (no CUDA), with GPU activities but no API-call records, and with everything. The step
# times of steps 3 and 4 (the same batches in every run) are compared. First, what a timestamp
# and a CUPTI external-correlation push/pop cost here (bench/clock_cost.cpp).
# Expects devbin/ (tests/gpu/make_devbin.sh, carried). Writes its results to $OUT.
set -u
. "$(dirname "$0")/devbin_env.sh"
work=/tmp/slparts; rm -rf $work; mkdir -p $work
cupti=$(python3 -c 'import glob, os, torch; d = os.path.dirname(os.path.dirname(torch.__file__)); print(" ".join(glob.glob(d + "/nvidia/**/libcupti.so*", recursive=True)))' | awk '{print $1}')
echo "CUPTI: ${cupti:-none in the wheel, the system one}"
LD_LIBRARY_PATH=${cupti:+$(dirname $cupti):}$LD_LIBRARY_PATH:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64 \
  T 120 $bin/sightline_clock_cost 2000000 | tee $out/clock_cost.txt
$TR --config $BENCH --synthetic 400 --write-data $work/bench.jsonl > /dev/null || exit 1
common="--config $BENCH --data $work/bench.jsonl --bf16 --device cuda --steps 5 --budget 4096"
lane() { # NAME GPU CMD...: the four configurations in turn
  local name=$1 gpu=$2; shift 2
  export CUDA_VISIBLE_DEVICES=$gpu
  T 300 "$@" > $work/$name-none.log 2>&1
  T 300 env SIGHTLINE_CUDA=0 $SL run --no-import --steps 3:4 -o $work/$name-ops -- "$@" > $work/$name-ops.log 2>&1
  T 300 $SL run --no-import --steps 3:4 --activities kernel,memcpy,memset,sync -o $work/$name-noapi -- "$@" > $work/$name-noapi.log 2>&1
  T 300 $SL run --no-import --steps 3:4 -o $work/$name-all -- "$@" > $work/$name-all.log 2>&1
}
lane transformers 0 python3 examples/hf_train.py $common &
lane trainer 1 $TR $common &
wait
python3 - $work <<'PY' | tee $out/overhead_parts.txt
import re, sys
w = sys.argv[1]
def steps(path):  # real tokens/s of each step, from the progress lines
    out = {}
    for line in open(path, errors="replace"):
        m = re.match(r"step (\d+)/\d+ .*tokens/s (\d+) real", line)
        if m:
            out[int(m.group(1))] = int(m.group(2))
    return out
print("steps 3 and 4 (the window), real tokens/s of each step; slowdown against the run without the collector")
for job in ("transformers", "trainer"):
    base = steps(f"{w}/{job}-none.log")
    for cfg, label in (("none", "no collector"), ("ops", "ops only (SIGHTLINE_CUDA=0)"), ("noapi", "ops + GPU activities, no API records"), ("all", "everything (the default)")):
        s = steps(f"{w}/{job}-{cfg}.log")
        if 3 not in s or 4 not in s or 3 not in base:
            print(f"  {job:12s} {label:40s} (no step 3/4 in the log)")
            continue
        slow = [base[k] / s[k] for k in (3, 4)]  # time ratio: the tokens are the same
        print(f"  {job:12s} {label:40s} step 3 {s[3]:5d}  step 4 {s[4]:5d} tok/s   x{slow[0]:.2f} x{slow[1]:.2f}")
PY
grep -h "sightline:" $work/*-all.log | head -4
