#!/usr/bin/env bash
# GPU checks of the reference trainer's fused path and packed batches (docs/trainer.md), on the
# device machine in one go. Sections (each on unless its SKIP_* is set):
#   CHECKS  sightline-trainer-checks --device cuda: every kernel against libtorch, the
#           chunk-parallel delta rule, packed against padded through the model, fused against naive;
#   CURVES  fused against naive over training: CURVE_STEPS steps (100) on the same data from the same
#           weights (examples/configs/small.json, packed, bf16), and naive bf16 against naive fp32
#           as the bf16 noise floor;
#   BENCH   the benchmark config (shared/configs) and synthetic data, every row in one run:
#           naive+padded at 6,144 (its largest that fits) and 4,096, fused+padded 8,192,
#           naive+packed 8,192 (6,144 if it does not fit), fused+packed 8,192 and 16,384
#           (BENCH_ROWS="kernels batching budget,..." picks other rows); each row runs STEPS timed
#           steps and one more inside a `sightline run --steps` window for its kernels a step;
#           tests/gpu/bench_rows.py prints the table;
#   FIXES   (when FIXES=1) naive+padded FIX_BUDGET (4,096) with each single fix (--fix), packed,
#           and the three kernel fixes together, each row STEPS timed steps and FIX_REC (3) recorded,
#           after a quick unrecorded run of the same padded batches (FIX_COLD=1 leaves it out: the
#           machine's first run of a shape has cuDNN compile kernels, seconds a step; FIX_ROWS="gdn
#           attention ..." picks the fixes, of gdn elementwise optimizer packing all attention, and
#           gdn+packing: the fallback's fix on packed batches, not in the default): tests/gpu/fix_table.py
#           sets each fix's measured saving against the advisor's prediction on the baseline row's
#           recorded steps, and prints every row's steps with the allocator's work in each
#           (FIX_BASE_AGAIN=1: the baseline again, last, as a row against itself; FIX_KEEP_TRACE=1:
#           the baseline's capture back, xz-compressed, FIX_KEEP_TRACE="base optimizer" those rows');
#   PROFILE sightline run on naive+padded (4,096) and fused+packed (8,192), their reports and the diff;
#   COST    (when COST=1) fused+packed 8,192 with and without `sightline run` (light mode, the
#           whole run recorded), COST_ROUNDS rounds alternated A B / B A: the median steps and
#           the cost in percent;
#   PEER    (when PEER=1) the peer stack, transformers + flash-linear-attention packed at 8,192
#           (devbin/peers and devbin/wheels, from make_devbin.sh).
# Expects devbin/ (tests/gpu/make_devbin.sh, carried). Results in $OUT (eight files at most come
# back: the summaries, and every job's log in logs.tgz).
set -u
. "$(dirname "$0")/devbin_env.sh"
work=/tmp/slfused; rm -rf $work; mkdir -p $work/logs
PEAK=989
SMALL=$root/examples/configs/small.json
STEPS=${STEPS:-8}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}

if [ -z "${SKIP_CHECKS:-}" ]; then
echo "=== checks (kernels, delta rule, packing) on the GPU"
for only in ${CHECKS_ONLY:-all}; do # CHECKS_ONLY="gdn packing" runs those parts alone
  T 400 $bin/sightline-trainer-checks $TINY --device cuda $([ $only = all ] || echo --only $only) 2>&1 | tee -a $out/checks.txt | grep -vE "^ok "
  echo "rc=${PIPESTATUS[0]}"
done
grep -E "fused vs naive|packed vs padded|without boundaries|AdamW" $out/checks.txt
fi

run_summary() { # NAME CMD...: runs one trainer job, keeps its log, prints its summary or why it stopped
  local name=$1; shift
  T ${RUN_LIMIT:-300} "$@" > $work/logs/$name.log 2>&1; local rc=$?
  echo "$name rc=$rc $(grep '^summary:' $work/logs/$name.log || grep -iE 'out of|error|what|non-finite' $work/logs/$name.log | tail -2)"
  return $rc
}

if [ -z "${SKIP_CURVES:-}" ]; then
echo "=== fused against naive over ${CURVE_STEPS:-100} steps (small config, packed 4,096, same data and weights)"
$TR --config $SMALL --synthetic 600 --max-len 2048 --write-data $work/small.jsonl > /dev/null
common="--config $SMALL --data $work/small.jsonl --steps ${CURVE_STEPS:-100} --budget 4096 --batching packed --device cuda --warmup 10 --lr 1e-3"
run_summary curve-fused $TR $common --bf16 --kernels fused --log-jsonl $work/logs/fused.jsonl
run_summary curve-naive $TR $common --bf16 --log-jsonl $work/logs/naive.jsonl
run_summary curve-fp32 $TR $common --log-jsonl $work/logs/fp32.jsonl
python3 - $work/logs/fused.jsonl $work/logs/naive.jsonl $work/logs/fp32.jsonl <<'PY' | tee $out/curves.txt
import json, sys
load = lambda p: [float("nan") if json.loads(l)["loss"] is None else json.loads(l)["loss"] for l in open(p)]
fused, naive, fp32 = (load(p) for p in sys.argv[1:4])
n = min(len(fused), len(naive), len(fp32))
d_fn = max(abs(a - b) for a, b in zip(fused[:n], naive[:n]))
d_nf = max(abs(a - b) for a, b in zip(naive[:n], fp32[:n]))
print(f"steps {n}: loss first/last fused {fused[0]:.4f}/{fused[n-1]:.4f} naive {naive[0]:.4f}/{naive[n-1]:.4f} fp32 {fp32[0]:.4f}/{fp32[n-1]:.4f}")
print(f"max |fused - naive| (bf16) {d_fn:.4f}; bf16 noise floor max |naive bf16 - naive fp32| {d_nf:.4f}; ratio {d_fn / d_nf:.2f}")
PY
fi

common="--config $BENCH --data $work/bench.jsonl --bf16 --device cuda --peak-tflops $PEAK"
bench_row() { # KERNELS BATCHING BUDGET [FIXES]: STEPS timed steps, then REC (1 unless set) recorded; their report as JSON
  local name=bench-$1-$2-$3${4:+-${4//,/+}}${TAG:+-$TAG} end=$((STEPS + ${REC:-1}))
  echo ${REC:-1} > $work/logs/$name.recorded
  run_summary $name $SL run --steps $((STEPS + 1)):$end -o $work/cap-$name -- $TR $common --steps $end --kernels $1 --batching $2 \
    --budget $3 ${4:+--fix $4} --log-jsonl $work/logs/$name.jsonl || return 1
  local cap=$(ls -S $work/cap-$name/*.slcap 2>/dev/null | head -1)
  [ -n "$cap" ] && T 200 $SL report "$cap" --format json ${REPORT_ARGS:-} -o $work/report-$name.json > /dev/null 2>&1
  names="$names $name"
}
if [ -n "${FIXES:-}" ] || [ -z "${SKIP_BENCH:-}" ]; then
  $TR --config $BENCH --synthetic 400 --write-data $work/bench.jsonl > /dev/null
fi

if [ -z "${SKIP_BENCH:-}" ]; then
echo "=== benchmark config, $STEPS timed steps a row (the first 2 left out) and one more recorded by sightline run"
names=""
IFS=, read -ra rows <<< "${BENCH_ROWS:-naive padded 6144,naive padded 4096,fused padded 8192,naive packed 8192,fused packed 8192,fused packed 16384}"
for row in "${rows[@]}"; do
  set -- $row
  bench_row $1 $2 $3 ${4:-} || { [ "$1 $2 $3" = "naive packed 8192" ] && bench_row naive packed 6144; }
done
python3 $root/tests/gpu/bench_rows.py $work $names
fi 2>&1 | tee $out/bench.txt

if [ -n "${FIXES:-}" ]; then
fb=${FIX_BUDGET:-4096} rec=${FIX_REC:-3}
echo "=== each fix alone on naive+padded $fb against the advisor's prediction on the baseline's last $rec steps, recorded"
unset PYTORCH_CUDA_ALLOC_CONF # expandable segments grow slowly (seconds a step) under the naive path's changing shapes
n=bench-naive-padded-$fb names=""
if [ -z "${FIX_COLD:-}" ]; then # the machine's first run of these shapes has cuDNN compile its attention plans' kernels
  # (seconds a new shape, cached on the machine after): a quick run of the same padded batches first, unrecorded
  run_summary warm-up $TR $common --steps $((STEPS + rec)) --kernels naive --batching padded --budget $fb --fix gdn,elementwise,optimizer
fi
# the baseline's report also replays the three kernel fixes together, against the "all" row
REC=$rec REPORT_ARGS="--combine gdn-torch-fallback,causal-conv1d-missing,elementwise-storm,non-fused-optimizer" bench_row naive padded $fb
fix_row() { # FIX: the row's name
  case $1 in
    base) echo $n ;; packing) echo bench-naive-packed-$fb ;; gdn+packing) echo bench-naive-packed-$fb-gdn ;;
    all) echo $n-gdn+elementwise+optimizer ;; *) echo $n-$1 ;;
  esac
}
fixes="" rows="$n" # FIX_ROWS picks the fixes (default all): gdn elementwise optimizer packing all attention, and gdn+packing
for fix in ${FIX_ROWS:-gdn elementwise optimizer packing all attention}; do
  case $fix in
    packing) REC=$rec bench_row naive packed $fb ;;
    gdn+packing) REC=$rec bench_row naive packed $fb gdn ;;
    all) REC=$rec bench_row naive padded $fb gdn,elementwise,optimizer ;;
    *) REC=$rec bench_row naive padded $fb $fix ;;
  esac && fixes="$fixes $fix=$(fix_row $fix)" rows="$rows $(fix_row $fix)"
done
again="" # FIX_BASE_AGAIN=1: the baseline once more, last, as a row against itself (the table's noise floor)
[ -n "${FIX_BASE_AGAIN:-}" ] && TAG=again REC=$rec bench_row naive padded $fb && again=again=$n-again
# FIX_KEEP_TRACE=1 brings the baseline's capture back in $OUT (xz), to replay the rules' changes on it
# later; FIX_KEEP_TRACE="base optimizer ..." those rows' captures
for keep in $([ "${FIX_KEEP_TRACE:-}" = 1 ] && echo base || echo ${FIX_KEEP_TRACE:-}); do
  k=$(fix_row $keep) cap=$(ls -S $work/cap-$(fix_row $keep)/*.slcap 2>/dev/null | head -1)
  [ -n "$cap" ] && xz -T0 -6 -c "$cap" > $out/$k.slcap.xz && echo "kept $k.slcap.xz: $(du -h $out/$k.slcap.xz | cut -f1)" \
    "(what comes back is at most 16 MiB a file)"
done
python3 $root/tests/gpu/bench_rows.py $work $rows
python3 $root/tests/gpu/fix_table.py $work $n $fixes $again
fi 2>&1 | tee $out/fixes.txt

if [ -z "${SKIP_PROFILE:-}" ]; then
echo "=== sightline run: naive+padded 4,096 and fused+packed 8,192 (benchmark config, ${PROFILE_STEPS:-4} steps)"
[ -f $work/bench.jsonl ] || $TR --config $BENCH --synthetic 400 --write-data $work/bench.jsonl > /dev/null
prof() { # NAME ARGS...
  local name=$1; shift
  T 300 $SL run -o $work/prof-$name -- $TR --config $BENCH --data $work/bench.jsonl --steps ${PROFILE_STEPS:-4} --bf16 --device cuda \
    --peak-tflops $PEAK "$@" > $work/prof-$name.out 2> $work/prof-$name.err; echo "$name rc=$?"
  grep '^summary:' $work/prof-$name.out; grep "sightline:" $work/prof-$name.err | tail -3
  cap=$(ls -S $work/prof-$name/*.slcap | head -1)
  T 200 $SL import "$cap" -o $work/$name.db > /dev/null 2>&1
  T 200 $SL report $work/$name.db -n 40 > $out/report-$name.txt 2>&1
  T 200 $SL report $work/$name.db --format json > $work/report-$name.json 2>/dev/null
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("rules fired:", [(f["rule"], f.get("severity")) for f in r.get("findings", [])])' $work/report-$name.json
}
prof before --kernels naive --batching padded --budget 4096
prof after --kernels fused --batching packed --budget 8192
T 200 $SL diff $work/before.db $work/after.db > $out/diff.txt 2>&1; echo "diff rc=$?"; head -60 $out/diff.txt
fi 2>&1 | tee $out/profile.txt

if [ -n "${COST:-}" ]; then
echo "=== cost of sightline run on fused+packed 8,192: ${COST_ROUNDS:-2} rounds A B / B A, $STEPS steps a run"
[ -f $work/bench.jsonl ] || $TR --config $BENCH --synthetic 400 --write-data $work/bench.jsonl > /dev/null
costrun() { # NAME [sightline run --]: one run, its median step from the trainer's summary
  local name=$1; shift
  T ${RUN_LIMIT:-300} "$@" $TR --config $BENCH --data $work/bench.jsonl --steps $STEPS --bf16 --device cuda --peak-tflops $PEAK \
    --kernels fused --batching packed --budget 8192 > $work/logs/$name.log 2> $work/logs/$name.err
  echo "$name rc=$? $(grep -o '"median_step_s":[0-9.]*' $work/logs/$name.log)"
}
for r in $(seq 1 ${COST_ROUNDS:-2}); do
  if [ $((r % 2)) = 1 ]; then costrun plain-$r; costrun sightline-$r $SL run -o $work/cost-$r --; else
    costrun sightline-$r $SL run -o $work/cost-$r --; costrun plain-$r; fi
done
python3 - $work/logs <<'PY'
import glob, json, os, re, statistics, sys
med = lambda kind: [float(re.search(r'"median_step_s":([0-9.]+)', open(p).read()).group(1))
                    for p in sorted(glob.glob(os.path.join(sys.argv[1], kind + "-*.log"))) if '"median_step_s"' in open(p).read()]
a, b = med("plain"), med("sightline")
if a and b:
    print(f"median step s: plain {a}, under sightline run {b}; mean {statistics.mean(a):.4f} vs {statistics.mean(b):.4f}: "
          f"cost {100 * (statistics.mean(b) / statistics.mean(a) - 1):+.1f}%")
PY
fi 2>&1 | tee $out/cost.txt

if [ -n "${PEER:-}" ]; then
echo "=== peer stack: transformers + flash-linear-attention, packed 8,192 (WARM=8 STEPS=10; Triton compiles first)"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $bin/wheels/*.whl 2>&1 | tail -1
(cd $bin/peers && PYTHONPATH=/tmp/site KERNELS=fla BATCH=packed BUDGET=8192 WARM=8 STEPS=10 T ${PEER_LIMIT:-330} python3 peer_stack.py $BENCH) \
  > $work/logs/peer.log 2>&1; echo "peer rc=$?"; grep RESULT $work/logs/peer.log || tail -3 $work/logs/peer.log
fi 2>&1 | tee $out/peer.txt
tar czf $out/logs.tgz -C $work logs
