#!/usr/bin/env bash
# The dormant collector's cost (issue 7, docs/attach.md) on a machine of two GPUs, measured side by
# side so that drift over time cancels: the same job (tests/gpu/train_small.py) runs twice at once,
# one on each GPU, and each step's time of one is divided by the same step's time of the other.
#   pair A: no collector on GPU 0, collector dormant on GPU 1;
#   pair B: the same, GPUs swapped (a faster GPU cancels out of the two pairs' geometric mean);
#   pair C: no collector on both: the noise floor of the same comparison.
# Expects devbin/ (tests/gpu/make_devbin.sh, carried). Writes its results to $OUT.
set -u
. "$(dirname "$0")/devbin_env.sh"
work=/tmp/sldormant; rm -rf $work; mkdir -p $work/run $work/caps; chmod 700 $work/run
export XDG_RUNTIME_DIR=$work/run
STEPS=${DORMANT_STEPS:-200}
job() { # GPU LOG [dormant]
  local env=(CUDA_VISIBLE_DEVICES=$1)
  [ "${3:-}" = dormant ] && env+=(SIGHTLINE_DORMANT=1 SIGHTLINE_OUTPUT=$work/caps LD_PRELOAD=$COL)
  T 200 env "${env[@]}" python3 tests/gpu/train_small.py --warmup 10 --steps $STEPS --log-steps $2 > /dev/null 2> $2.err ||
    { echo "job on GPU $1 failed:"; tail -3 $2.err; }
}
job 0 $work/a_plain.log & job 1 $work/a_dormant.log dormant & wait
job 1 $work/b_plain.log & job 0 $work/b_dormant.log dormant & wait
job 0 $work/c_plain0.log & job 1 $work/c_plain1.log & wait
grep -h "sightline:" $work/a_dormant.log.err | head -2
python3 - $work <<'PY' | tee $out/dormant_cost.txt
import math, statistics, sys
w = sys.argv[1]
def ms(name):
    return [float(l.split()[1]) for l in open(f"{w}/{name}.log") if l.strip()]
def ratio(num, den):  # per step, matched by index: the median and the middle half's spread
    r = sorted(a / b for a, b in zip(ms(num), ms(den)))
    return statistics.median(r), r[len(r) // 4], r[3 * len(r) // 4], len(r)
rows = [("A: dormant (GPU 1) / none (GPU 0)", "a_dormant", "a_plain"),
        ("B: dormant (GPU 0) / none (GPU 1)", "b_dormant", "b_plain"),
        ("C: none (GPU 1) / none (GPU 0)", "c_plain1", "c_plain0")]
res = {}
print("per-step time ratios of two jobs run at once (median, quartiles, steps)")
for label, num, den in rows:
    m, lo, hi, n = ratio(num, den)
    res[num] = m
    print(f"  {label:36s} {m:.4f}  [{lo:.4f}, {hi:.4f}]  {n}")
cost = math.sqrt(res["a_dormant"] * res["b_dormant"]) - 1
print(f"dormant cost (geometric mean of A and B, the GPU difference cancelled): {cost * 100:+.2f}%")
print(f"noise floor (C, the same job on both GPUs): {(res['c_plain1'] - 1) * 100:+.2f}%")
print(f"median step without the collector: {statistics.median(ms('a_plain') + ms('b_plain')):.2f} ms")
PY
