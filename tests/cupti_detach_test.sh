#!/usr/bin/env bash
# The collector's CUPTI session across attach windows, on the CPU, against a stand-in CUPTI
# (tests/programs/mock_cupti.cpp): after each window CUPTI is finalised on the job's next launch
# call and subscribed again by the next window; every kernel of both windows keeps its own launch
# call although CUPTI numbers launches from 1 again after finalising, and the collector's buffers
# are freed while CUPTI is detached. With SIGHTLINE_CUPTI_DETACH=0
# CUPTI stays subscribed between the windows. All activity kinds are recorded (the launch calls
# are CUPTI's records here; the default light mode would count them instead, which the mock job's
# direct calls never reach).
# usage: cupti_detach_test.sh SIGHTLINE COLLECTOR MOCK_CUPTI MOCK_JOB WORKDIR
set -u
SL=$1; COLLECTOR=$2; MOCK=$3; JOB=$4; W=$5
rm -rf "$W"; mkdir -p "$W"
fail() { echo "FAIL: $*"; touch "$W/stop"; exit 1; }

# one_job NAME EXPECTED_COUNTS [ENV...]: two 300 ms windows on a dormant job, then the checks.
one_job() {
  local name=$1 expected=$2; shift 2
  local d=$W/$name; mkdir -p "$d/run" "$d/caps"; chmod 700 "$d/run"; rm -f "$W/stop"
  env SIGHTLINE_ACTIVITIES=all "$@" XDG_RUNTIME_DIR=$d/run SIGHTLINE_OUTPUT=$d/caps SIGHTLINE_DORMANT=1 SIGHTLINE_CUPTI_PATH=$MOCK \
    LD_PRELOAD=$COLLECTOR "$JOB" "$W/stop" 30 > "$d/job.out" 2> "$d/job.err" &
  local pid=$!
  for _ in $(seq 1 100); do [ -S "$d/run/sightline/$pid.sock" ] && break; sleep 0.05; done
  for w in 1 2; do
    # The window's database is written before the summary, which refuses a trace without CPU ops.
    XDG_RUNTIME_DIR=$d/run "$SL" attach "$pid" --duration 300ms -o "$d/w$w.db" > /dev/null 2> "$d/w$w.err"
    grep -q "recorded 0 ops and [1-9][0-9]* GPU activities" "$d/w$w.err" && [ -s "$d/w$w.db" ] ||
      fail "$name: window $w: $(cat "$d/w$w.err")"
    sleep 0.2
  done
  touch "$W/stop"
  wait "$pid" || fail "$name: the job failed: $(cat "$d/job.err")"
  grep -q "$expected" "$d/job.out" || fail "$name: expected '$expected', the mock says: $(cat "$d/job.out") $(cat "$d/job.err")"
  "$SL" import "$(ls "$d"/caps/*.slcap)" -o "$d/all.db" > /dev/null 2> "$d/import.err" || fail "$name: import: $(cat "$d/import.err")"
  # Every record the stand-in wrote is in the capture (at a window's edge a launch may have its call
  # without its kernel or the reverse: the kinds are switched one by one, by CUPTI too).
  python3 - "$d" $(sed -n 's/.*launch calls recorded \([0-9]*\) kernels recorded \([0-9]*\).*/\1 \2/p' "$d/job.out") <<'PY' ||
import sqlite3, sys
d, made_calls, made_kernels = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
q = lambda db, sql: sqlite3.connect(f"{d}/{db}.db").execute(sql).fetchone()[0]
kernels = q("all", "SELECT count(*) FROM gpu_events WHERE kind = 0")
calls = q("all", "SELECT count(*) FROM cpu_events WHERE kind IN (2, 3)")
shared = q("all", "SELECT count(*) FROM (SELECT correlation FROM cpu_events WHERE kind IN (2, 3) GROUP BY correlation HAVING count(*) > 1)")
orphans = q("all", """SELECT count(*) FROM gpu_events g WHERE NOT EXISTS (
                        SELECT 1 FROM cpu_events c WHERE c.kind IN (2, 3) AND c.correlation = g.correlation AND c.start_ns <= g.start_ns)""")
per_window = [q(w, "SELECT count(*) FROM gpu_events") for w in ("w1", "w2")]
print(f"made: {made_calls} launch calls, {made_kernels} kernels; in the capture: {calls} and {kernels}; correlation ids "
      f"shared {shared}, kernels without their call {orphans}, kernels per window {per_window}")
sys.exit(0 if (calls, kernels) == (made_calls, made_kernels) and shared == 0 and orphans <= 2 and min(per_window) > 0 else 1)
PY
    fail "$name: the records do not add up"
}
one_job detach "subscribes 2 finalizes 2 busy 0" SIGHTLINE_DEBUG=1
# Each detach gave the buffer pool back (4 buffers of 8 MB filled at each subscription).
[ "$(grep -c "CUPTI detached after the window; 32 MB of buffers released" "$W/detach/job.err")" = 2 ] ||
  fail "detach: the buffers were not released after each window: $(grep sightline: "$W/detach/job.err")"
one_job stay "subscribes 1 finalizes 0 busy 0" SIGHTLINE_CUPTI_DETACH=0
echo "CUPTI across windows: all checks passed"
