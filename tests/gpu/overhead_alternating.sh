#!/usr/bin/env bash
# Profiler overhead measured by alternation inside each job, so that the machine's drift (step
# times of one job move by 10-65% between processes and between phases of one process on the
# lent H200s) falls out: every profiled stretch of ON steps is compared with the OFF steps just
# before it in the same process, and the median of those ratios is the overhead.
#   plain                  the job alone; ON/OFF only mark steps (the method's own noise)
#   noop-callback          a RecordFunction callback that does nothing, on for the ON steps:
#                          PyTorch's own cost per op, the floor of any op recorder
#   torch-profiler[-shapes] torch.profiler's schedule: wait OFF steps, record ON, repeated
#   sightline[-shapes]     the job started dormant; `sightline attach --steps ON` after every OFF
#   sightline-cupti-only / sightline-ops-only   the parts alone (ALT_ONLY names them), and CUPTI
#   alone with fewer activity kinds: sightline-cupti-no-sync-nvtx, sightline-cupti-kernels-copies,
#   sightline-cupti-kernels, sightline-cupti-api, sightline-cupti-none (subscribed, nothing recorded)
#   torch-profiler-cuda    torch.profiler with CUDA activities only (Kineto's CUPTI part)
#   sightline-counted      ops, kernels, copies and sets, no API calls: kernels linked by counting
#   launches; sightline-no-api the same uncounted
# ALT_OFF / ALT_ON (5 / 5), ALT_CYCLES (8), ALT_LAYERS (8), ALT_WARMUP (3), ALT_JOB_ARGS (extra
# arguments of tests/gpu/train_small.py), PY (python3). Expects devbin/ (tests/gpu/make_devbin.sh).
# Writes alternating.txt to $OUT.
set -u
source tests/gpu/devbin_env.sh
PY=${PY:-python3}
work=/tmp/slalt; rm -rf $work; mkdir -p $work/run $work/caps; chmod 700 $work/run
export XDG_RUNTIME_DIR=$work/run
OFF=${ALT_OFF:-5}; ON=${ALT_ON:-5}; CYCLES=${ALT_CYCLES:-8}
# An attach window starts at the step boundary after the request: each cycle of an attach run
# takes a step or two more than OFF + ON, hence the spare steps.
steps=$(( (OFF + ON + 3) * CYCLES + OFF ))
JOB="$PY tests/gpu/train_small.py --layers ${ALT_LAYERS:-8} --warmup ${ALT_WARMUP:-3} --steps $steps ${ALT_JOB_ARGS:-}"
lines() { cat "$1" 2>/dev/null | wc -l; }
# wait_lines FILE N [PID]: until FILE has N lines; gives up after 300 s or once PID has ended.
wait_lines() { for _ in $(seq 1 3000); do [ "$(lines $1)" -ge "$2" ] && return 0; [ -n "${3:-}" ] && ! kill -0 $3 2>/dev/null && return 1
               sleep 0.1; done; return 1; }

# ALT_ONLY="NAME ..." runs just those configurations (default: all but the parts).
want() { [[ " ${ALT_ONLY:-plain torch-profiler torch-profiler-shapes sightline sightline-shapes} " == *" $1 "* ]]; }
export SIGHTLINE_NOOP_LIB=$bin/libsightline_noop_callback.so
for mode in plain noop-callback torch-profiler torch-profiler-shapes torch-profiler-cuda; do
  want $mode || continue
  T 400 $JOB --mode $mode --cycle $OFF:$ON --log-steps $work/$mode.log > /dev/null 2> $work/$mode.err || tail -3 $work/$mode.err
done

# A dormant job, attached to for ON steps each time OFF more steps have ended.
# Extra environment of the job: ATTACH_ENV. The window is not imported (attach --no-import), so
# that each window's OFF steps are about OFF steps, not the import's time.
attach_run() {
  local name=$1; shift
  want $name || return 0
  env ${ATTACH_ENV:-} SIGHTLINE_DORMANT=1 SIGHTLINE_OUTPUT=$work/caps LD_PRELOAD=$COL $JOB --mode plain --log-steps $work/$name.log \
    > /dev/null 2> $work/$name.err &
  local pid=$! c
  : > $work/$name.windows
  for c in $(seq 1 $CYCLES); do
    wait_lines $work/$name.log $(( $(lines $work/$name.log) + OFF )) $pid || { echo "$name: the job stopped stepping"; break; }
    kill -0 $pid 2>/dev/null || break
    T 120 $SL attach $pid --no-import --steps $ON "$@" > /dev/null 2>> $work/$name.windows || echo "$name: attach $c failed"
  done
  wait $pid || { echo "$name: job status $?"; tail -3 $work/$name.err; }
}
attach_run sightline
attach_run sightline-shapes --shapes
# The parts alone: CUPTI without the op callback, the op callback without CUPTI.
ATTACH_ENV=SIGHTLINE_OPS=0 attach_run sightline-cupti-only
ATTACH_ENV=SIGHTLINE_CUDA=0 attach_run sightline-ops-only
# CUPTI alone with fewer kinds: torch.profiler's (no sync, NVTX), then kernels and copies only.
ATTACH_ENV="SIGHTLINE_OPS=0 SIGHTLINE_ACTIVITIES=kernel,memcpy,memset,runtime,driver" attach_run sightline-cupti-no-sync-nvtx
ATTACH_ENV="SIGHTLINE_OPS=0 SIGHTLINE_ACTIVITIES=kernel,memcpy,memset" attach_run sightline-cupti-kernels-copies
# ... kernels alone, API calls alone, and CUPTI subscribed with no kind recorded ("none" names no kind).
ATTACH_ENV="SIGHTLINE_OPS=0 SIGHTLINE_ACTIVITIES=kernel" attach_run sightline-cupti-kernels
ATTACH_ENV="SIGHTLINE_OPS=0 SIGHTLINE_ACTIVITIES=runtime,driver" attach_run sightline-cupti-api
ATTACH_ENV="SIGHTLINE_OPS=0 SIGHTLINE_ACTIVITIES=none" attach_run sightline-cupti-none
ATTACH_ENV="SIGHTLINE_OPS=0 SIGHTLINE_ACTIVITIES=runtime" attach_run sightline-cupti-runtime
ATTACH_ENV="SIGHTLINE_OPS=0 SIGHTLINE_ACTIVITIES=driver" attach_run sightline-cupti-driver
# API calls without muting the chatty ones (SIGHTLINE_CUPTI_MUTE=0)
ATTACH_ENV="SIGHTLINE_OPS=0 SIGHTLINE_CUPTI_MUTE=0 SIGHTLINE_ACTIVITIES=runtime,driver" attach_run sightline-cupti-api-nomute
ATTACH_ENV="SIGHTLINE_OPS=0 SIGHTLINE_CUPTI_MUTE=0" attach_run sightline-cupti-only-nomute
# Ops and GPU activities without API calls: kernels linked by the collector's count of the job's
# launch, copy and set calls; then the same without the count (nothing linked).
ATTACH_ENV="SIGHTLINE_ACTIVITIES=kernel,memcpy,memset" attach_run sightline-counted
ATTACH_ENV="SIGHTLINE_ACTIVITIES=kernel,memcpy,memset SIGHTLINE_LAUNCH_HOOKS=0" attach_run sightline-no-api

$PY tests/gpu/alternating_table.py $work | tee $out/alternating.txt
tar -C $work -czf $out/alternating-logs.tgz $(cd $work && ls *.log *.windows 2>/dev/null)
