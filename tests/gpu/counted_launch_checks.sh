#!/usr/bin/env bash
# Kernels linked to ops by counting launches (collector/src/launch_hooks.cpp), on the GPU machine:
#  1. sightline run --activities kernel,memcpy,memset against torch.profiler on the same training
#     steps (tests/gpu/compare_runs.py: ops, kernels and op->kernel links with equal counts);
#  2. the exactness program (known launches, copies and sets on several streams and threads):
#     its counts, and how many counted calls were matched with their GPU activities;
#  3. a dormant job attached to twice with counting (two windows, two segments), imported;
#  4. the same training job with NVTX ranges, recorded with more kinds beside the light mode's
#     (COUNTED_EXTRA, default nvtx,overhead): do those kinds' records leave the counted calls'
#     numbers alone (nothing left unmatched), and are the ranges there?
# Each report's host synchronisations are printed too (the collector records them in the light mode).
# Expects devbin/ (tests/gpu/make_devbin.sh). Results under $OUT. COUNTED_ONLY="1 3" runs those parts;
# COUNTED_ACTS replaces the light mode's kinds (kernel,memcpy,memset; "default": no list given).
set -u
source tests/gpu/devbin_env.sh
work=/tmp/slcount; rm -rf $work; mkdir -p $work/run; chmod 700 $work/run
export XDG_RUNTIME_DIR=$work/run
ACTS=${COUNTED_ACTS:-kernel,memcpy,memset} # "default": the collector's default activities
quality() { $SL report "$1" --step all 2>/dev/null | grep -E "GPU activities linked|Launch calls counted|CUDA API calls linked|host synchronisations"; }

want() { [[ " ${COUNTED_ONLY:-1 2 3 4} " == *" $1 "* ]]; }
if want 1; then
echo "== 1. against torch.profiler"
T 300 python3 tests/gpu/train_small.py --mode torch-profiler --trace $work/torch_trace.json --steps 2 --warmup 3 > $work/tp.out 2>&1 || tail -3 $work/tp.out
T 300 $SL run --activities $ACTS -o $work/cmp -- python3 tests/gpu/train_small.py --steps 2 --warmup 3 > /dev/null 2> $work/sl.err || tail -3 $work/sl.err
grep "sightline:" $work/sl.err | head -4
cap=$(ls -S $work/cmp/*.slcap | head -1)
$SL import $work/torch_trace.json -o $work/torch.db > /dev/null 2>&1
python3 tests/gpu/compare_runs.py $work/torch.db "${cap%.slcap}.db" | tee $out/compare_counted.txt
quality "$cap" | tee -a $out/compare_counted.txt
fi

if want 2; then
echo "== 2. exactness"
T 120 $SL run --activities $ACTS -o $work/ex --no-import -- $bin/exactness > $work/expected.json 2> $work/ex.err || tail -3 $work/ex.err
excap=$(ls $work/ex/*.slcap | head -1)
$SL import "$excap" -o $work/ex.db > /dev/null 2>&1
python3 tests/gpu/check_exactness.py $work/expected.json $work/ex.db 2>&1 | tail -6 | tee $out/exactness_counted.txt
quality "$excap" | tee -a $out/exactness_counted.txt
fi

if want 4; then
# COUNTED_EXTRA: the kinds added, one run per word ("nvtx,overhead nvtx overhead": three runs).
for extra in ${COUNTED_EXTRA:-nvtx,overhead}; do
echo "== 4. with $extra beside the light mode's kinds, NVTX ranges in the job"
rm -rf $work/nvtx
T 300 $SL run --activities $ACTS,$extra -o $work/nvtx -- python3 tests/gpu/train_small.py --steps 2 --warmup 3 --nvtx \
  > /dev/null 2> $work/nvtx.err || tail -3 $work/nvtx.err
ncap=$(ls -S $work/nvtx/*.slcap | head -1)
quality "$ncap" | tee $out/counted_with_$extra.txt
python3 - "${ncap%.slcap}.db" <<'PY' | tee -a $out/counted_with_$extra.txt
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT s.text, count(*) FROM cpu_events e JOIN strings s ON s.id = e.name_id "
                  "WHERE s.text IN ('forward', 'backward', 'optimizer') GROUP BY s.text").fetchall()
print("NVTX ranges:", dict(rows), "(2 measured steps + 3 warm-up steps: 5 each when NVTX is recorded)")
PY
done
fi

want 3 || exit 0
echo "== 3. attach twice, counted"
SIGHTLINE_ACTIVITIES=$ACTS SIGHTLINE_DORMANT=1 SIGHTLINE_OUTPUT=$work/caps LD_PRELOAD=$COL \
  python3 tests/gpu/train_small.py --warmup 3 --steps 150 --log-steps $work/attach.log > /dev/null 2> $work/attach.err &
job=$! # the job itself (attach needs its pid), so not under T
for _ in $(seq 1 600); do [ -s $work/attach.log ] && break; sleep 0.1; done
for w in 1 2; do
  T 120 $SL attach $job --steps 5 -o $work/win$w > $work/win$w.out 2>&1 || tail -3 $work/win$w.out
  grep -E "steps|linked" $work/win$w.out | head -3
  sleep 2
done
wait $job; echo "job status $?"
quality "$(ls -S $work/caps/*.slcap | head -1)" | tee $out/attach_counted.txt
