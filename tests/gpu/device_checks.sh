#!/usr/bin/env bash
# GPU checks of the collector, run on the device machine in one go (docs/collector.md):
#   1. exactness: a CUDA program with known kernel/copy/memset counts on 8 streams from 4 threads;
#   2. against torch.profiler: the same small Qwen3-Next training steps recorded by both, ops and
#      kernels with their counts, and the kernels each op launched;
#   3. robustness: sys.exit, an exception, SIGTERM and SIGINT leave complete captures; a CPU-only
#      job yields its ops; torch.profiler inside a profiled job;
#   4. overhead: step times under sightline run (without and with shapes) and under torch.profiler
#      (without and with shapes), each against the same run's steps outside its profiling window.
# Expects devbin/ at the repository root, made by tests/gpu/make_devbin.sh and carried to the
# device (carry: ["devbin"]). Writes its results to $OUT. SKIP_EXACT=1 skips section 1,
# SKIP_COMPARE=1 section 2, SKIP_ROBUST=1 section 3; OV_STEPS / OV_WARMUP / OV_WINDOW / OV_ROUNDS set the overhead runs' steps and rounds. Every job runs under
# a time limit, so a job that hangs costs its limit and not the device call.
set -u
root=$(pwd)
bin=$root/devbin
export LD_LIBRARY_PATH=$bin/lib:${LD_LIBRARY_PATH:-}
export SIGHTLINE_COLLECTOR=$bin/libsightline_collector.so
export SIGHTLINE_TORCH_BRIDGE=$bin/libsightline_torch.so
export PYTHONUNBUFFERED=1
SL=$bin/sightline
T="timeout -k 5 ${JOB_LIMIT_S:-150}"
work=/tmp/slwork; rm -rf $work; mkdir -p $work
out=${OUT:-/tmp/out}; mkdir -p $out
log() { echo "=== $*"; }
# Sends a signal to a job and waits up to 20 s for it to end before killing it.
stop() { kill -$2 $1; for i in $(seq 1 40); do kill -0 $1 2>/dev/null || return 0; sleep 0.5; done
         kill -9 $1; echo "SIG$2: still running 20 s later, killed"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, "cuda", torch.cuda.is_available())'

if [ -z "${SKIP_EXACT:-}" ]; then
log "1. exactness"
$SL run -o $work/exact --no-import -- $bin/exactness > $work/exact.json 2> $work/exact.err; echo "rc=$?"
cat $work/exact.err | head -5
cap=$(ls $work/exact/*.slcap | head -1)
$SL import "$cap" -o $work/exact.db 2>&1 | tail -1
python3 tests/gpu/check_exactness.py $work/exact.json $work/exact.db | tee $out/exactness.txt
fi

if [ -z "${SKIP_COMPARE:-}" ]; then
log "2. sightline vs torch.profiler on the same training steps"
python3 tests/gpu/train_small.py --mode torch-profiler --trace $work/torch_trace.json --steps 2 --warmup 3 > $work/tp.out 2>&1; echo "torch.profiler rc=$?"; tail -1 $work/tp.out
$SL run -o $work/cmp -- python3 tests/gpu/train_small.py --mode plain --steps 2 --warmup 3 > $work/sl.out 2> $work/sl.err; echo "sightline run rc=$?"
tail -3 $work/sl.err
cap=$(ls -S $work/cmp/*.slcap | head -1)
$SL import $work/torch_trace.json -o $work/torch.db 2>&1 | tail -1
python3 tests/gpu/compare_runs.py $work/torch.db "${cap%.slcap}.db" | tee $out/compare.txt
$SL report "$cap" --step all -n 12 > $out/sightline_report.txt 2>&1
cp $work/sl.out $out/sightline_run_stdout.txt
fi

if [ -z "${SKIP_ROBUST:-}" ]; then
log "3. robustness"
for how in sys-exit exception; do
  $T $SL run -o $work/rb-$how -- python3 tests/gpu/train_small.py --steps 1 --warmup 1 --exit $how > /dev/null 2> $work/rb-$how.err
  echo "$how: job rc=$?; $(grep -c '' $work/rb-$how.err) stderr lines"; grep "sightline:" $work/rb-$how.err | tail -2
done
for sig in TERM; do
  ( $T $SL run -o $work/rb-$sig -- python3 tests/gpu/train_small.py --steps 1 --warmup 1 --exit wait-signal > $work/rb-$sig.out 2> $work/rb-$sig.err & echo $! > $work/rb-$sig.pid; wait )&
  for i in $(seq 1 120); do grep -q READY $work/rb-$sig.out 2>/dev/null && break; sleep 0.5; done
  sleep 2; stop $(cat $work/rb-$sig.pid) $sig; wait
  echo "SIG$sig:"; grep "sightline:" $work/rb-$sig.err | tail -3
done
$T $SL run -o $work/rb-cpu -- python3 tests/gpu/train_small.py --no-cuda --steps 1 --warmup 0 --hidden 256 > /dev/null 2> $work/rb-cpu.err
echo "cpu-only job rc=$?"; grep "sightline:" $work/rb-cpu.err | tail -3
$T $SL run -o $work/rb-tp -- python3 tests/gpu/train_small.py --mode torch-profiler --trace $work/inner.json --steps 1 --warmup 1 > $work/rb-tp.out 2> $work/rb-tp.err
echo "torch.profiler inside a profiled job rc=$?"; grep -iE "sightline:|cupti|subscriber" $work/rb-tp.err | head -5
# SIGINT: Python's KeyboardInterrupt, the job's own handling, then the exit flush.
( $T $SL run -o $work/rb-INT -- python3 tests/gpu/train_small.py --steps 1 --warmup 1 --exit wait-signal > $work/rb-INT.out 2> $work/rb-INT.err & echo $! > $work/rb-INT.pid; wait )&
for i in $(seq 1 120); do grep -q READY $work/rb-INT.out 2>/dev/null && break; sleep 0.5; done
# (the job's own pid: sightline run's command line holds the same words and lets SIGINT pass to the job)
job=$(pgrep -f "^python3 tests/gpu/train_small.py --steps 1 --warmup 1 --exit wait-signal" | head -1)
sleep 2; stop $job INT; wait
echo "SIGINT:"; grep -E "sightline:|KeyboardInterrupt" $work/rb-INT.err | tail -3
# Forked DataLoader workers, and two "ranks" as torchrun would start them.
$T $SL run -o $work/rb-dl -- python3 tests/gpu/dataloader_job.py > /dev/null 2> $work/rb-dl.err
echo "dataloader job rc=$?; captures: $(ls $work/rb-dl/*.slcap | wc -l)"; grep "sightline:" $work/rb-dl.err | tail -3
for r in 0 1; do RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r $T $SL run -o $work/rb-ranks --no-import -- python3 tests/gpu/dataloader_job.py > /dev/null 2>&1 & done; wait
echo "ranks: $(ls $work/rb-ranks/ | tr '\n' ' ')"
for d in rb-sys-exit rb-exception rb-TERM rb-INT rb-cpu rb-tp rb-dl; do
  c=$(ls -S $work/$d/*.slcap 2>/dev/null | head -1)
  [ -n "$c" ] && $SL report "$c" --format json 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); q=d['data_quality']; c=d['trace']['counts']; print('$d', 'ops', c['cpu_ops'], 'kernels', c['kernels'], 'lost_chunks', q['lost_chunks'], 'dropped', q['dropped_records'])"
done 2>&1 | tee $out/robustness.txt
fi

log "4. overhead: each run's steps inside its profiling window against its own steps around it, ${OV_ROUNDS:-2} rounds"
# The fixture's workload (8 layers), ${OV_STEPS:-30} measured steps; each profiler records steps
# ${OV_WINDOW:-11:20} only (sightline run --steps, torch.profiler started and stopped around them),
# so a run's steps outside the window are its own baseline: the same process, minutes apart at
# most, which removes the 15-65% swings between processes seen on this machine. "plain" records
# nothing: its "window" shows the method's own noise.
job="python3 tests/gpu/train_small.py --layers ${OV_LAYERS:-8} --steps ${OV_STEPS:-30} --warmup ${OV_WARMUP:-3}"
win=${OV_WINDOW:-11:20}
# OV_ONLY="NAME ..." runs just those configurations; OV_PARTS=1 adds the collector's parts alone
# (ops only, CUPTI only, kernels and copies only).
run_timed() { name=$1; shift; [ -n "${OV_ONLY:-}" ] && ! [[ " $OV_ONLY " == *" $name "* ]] && return 0
  $T "$@" > $work/ov-$name.out 2> $work/ov-$name.err; tail -1 $work/ov-$name.out | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('$name', '$win', *d['step_ms'])" 2>/dev/null || { echo "$name failed"; tail -3 $work/ov-$name.err; }; }
{
for r in $(seq 1 ${OV_ROUNDS:-2}); do
  run_timed plain $job
  run_timed sightline $SL run -o $work/ov1 --no-import --steps $win -- $job
  run_timed sightline-shapes $SL run -o $work/ov2 --no-import --shapes --steps $win -- $job
  run_timed torch-profiler $job --mode torch-profiler --profile-steps $win --trace $work/ov3.json
  run_timed torch-profiler-shapes $job --mode torch-profiler-shapes --profile-steps $win --trace $work/ov4.json
  run_timed sightline-correlation-ids env SIGHTLINE_LINK=correlation $SL run -o $work/ov5 --no-import --steps $win -- $job
done
[ "${OV_OPS_ONLY:-1}" = 1 ] && run_timed sightline-ops-only env SIGHTLINE_CUDA=0 $SL run -o $work/ov6 --no-import --steps $win -- $job
if [ "${OV_PARTS:-0}" = 1 ]; then
  run_timed sightline-cupti-only env SIGHTLINE_OPS=0 $SL run -o $work/ov7 --no-import --steps $win -- $job
  run_timed sightline-kernels-copies env SIGHTLINE_OPS=0 $SL run -o $work/ov8 --no-import --activities kernel,memcpy,memset --steps $win -- $job
fi
} > $out/overhead.raw # written as the runs end: a device call cut short keeps what ran
python3 tests/gpu/overhead_table.py $out/overhead.raw | tee $out/overhead.txt
for d in ov1 ov5; do
  [ -d $work/$d ] || continue
  c=$(ls -S $work/$d/*.slcap | head -1); $SL report "$c" --format json | python3 -c "import json,sys; d=json.load(sys.stdin); q=d['data_quality']; c=d['trace']['counts']; print('$d capture: steps', len(d.get('steps', [])), 'dropped', q['dropped_records'], 'ops', c['cpu_ops'], 'kernels', c['kernels'], 'GPU activities linked', q['gpu_linked_to_op'], 'not linked', q['gpu_without_external_id'])"
done | tee -a $out/overhead.txt
# The API calls recorded a step (what CUPTI pays a record for), most frequent first.
[ -d $work/ov1 ] && c=$(ls -S $work/ov1/*.slcap | head -1) && $SL import "$c" -o $work/ov1.db >/dev/null 2>&1 && python3 - $work/ov1.db <<'PY' | tee -a $out/overhead.txt
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT s.text, count(*) FROM cpu_events e JOIN strings s ON s.id = e.name_id WHERE e.kind IN (2, 3) GROUP BY s.text ORDER BY 2 DESC LIMIT 12").fetchall()
print("API calls recorded in the 10-step window:", ", ".join(f"{n} {c}" for n, c in rows))
PY
