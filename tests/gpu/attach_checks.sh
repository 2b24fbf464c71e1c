#!/usr/bin/env bash
# GPU checks of attach (docs/attach.md), run on the device machine in one go:
#   1. dormant cost: the same training job with no collector and with the collector preloaded but
#      dormant, alternated (plain, dormant, plain, dormant), median step time of each run;
#   2. on one running job: a 10-step window, a 10-step window with shapes, then a client that dies
#      mid-window; each window's capture must hold exactly its steps with kernels linked to ops,
#      and the job's step times before, during, between and after the windows are reported.
# Expects devbin/ (tests/gpu/make_devbin.sh, carried). Writes its results to $OUT.
set -u
root=$(pwd); bin=$root/devbin
export LD_LIBRARY_PATH=$bin/lib:${LD_LIBRARY_PATH:-}
export SIGHTLINE_TORCH_BRIDGE=$bin/libsightline_torch.so
export PYTHONUNBUFFERED=1
SL=$bin/sightline; COL=$bin/libsightline_collector.so
work=/tmp/slattach; rm -rf $work; mkdir -p $work/run $work/caps; chmod 700 $work/run
export XDG_RUNTIME_DIR=$work/run
out=${OUT:-/tmp/out}; mkdir -p $out
JOB="python3 tests/gpu/train_small.py --warmup 5"
lines() { cat "$1" 2>/dev/null | wc -l; }
wait_lines() { for i in $(seq 1 600); do [ "$(lines $1)" -ge "$2" ] && return 0; sleep 0.1; done; return 1; }

echo "=== 1. dormant cost (${DORMANT_STEPS:-60} steps a run)"
for i in 1 2; do
  timeout 150 $JOB --steps ${DORMANT_STEPS:-60} --log-steps $work/plain$i.log > /dev/null 2> $work/plain$i.err || tail -3 $work/plain$i.err
  timeout 150 env SIGHTLINE_DORMANT=1 SIGHTLINE_OUTPUT=$work/caps LD_PRELOAD=$COL $JOB --steps ${DORMANT_STEPS:-60} \
    --log-steps $work/dormant$i.log > /dev/null 2> $work/dormant$i.err || tail -3 $work/dormant$i.err
done
grep -h "sightline:" $work/dormant1.err | head -3

echo "=== 2. windows on a running job"
SIGHTLINE_DORMANT=1 SIGHTLINE_OUTPUT=$work/caps LD_PRELOAD=$COL $JOB --steps 150 --log-steps $work/job.log \
  > $work/job.out 2> $work/job.err &
pid=$!
wait_lines $work/job.log 20 || echo "the job did not start its steps"
$SL ps | tee $work/ps.txt
timeout 120 $SL attach $pid --steps 10 -o $work/w1.db > $work/w1.txt 2> $work/w1.err; echo "window 1 rc=$?"; cat $work/w1.err
n=$(lines $work/job.log); wait_lines $work/job.log $((n + 20))
timeout 120 $SL attach $pid --steps 10 --shapes -o $work/w2.db > $work/w2.txt 2> $work/w2.err; echo "window 2 rc=$?"; cat $work/w2.err
n=$(lines $work/job.log); wait_lines $work/job.log $((n + 25))
cut=$(date +%s.%N)
$SL attach $pid --duration 2s > /dev/null 2>&1 & client=$!
sleep 0.5; kill -9 $client; echo "client killed mid-window"
( sleep 150; kill -9 $pid 2>/dev/null && echo "job still running 150 s later, killed" ) & wait $pid; echo "job rc=$? (0 expected)"; tail -1 $work/job.out | cut -c1-80
grep "sightline:" $work/job.err | tail -3
[ -e $work/run/sightline/$pid.sock ] && echo "socket left behind" || echo "socket removed"
for w in w1 w2; do $SL report $work/$w.db --format json > $work/$w.json 2> $work/$w.report.err || cat $work/$w.report.err; done
cp $work/w1.txt $out/attach_window1.txt
python3 tests/gpu/attach_report.py --plain $work/plain1.log $work/plain2.log --dormant $work/dormant1.log $work/dormant2.log \
  --job $work/job.log --window $work/w1.err $work/w1.json 10 --window $work/w2.err $work/w2.json 10 --cut $cut | tee $out/attach.txt
