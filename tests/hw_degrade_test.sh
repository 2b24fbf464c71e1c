#!/usr/bin/env bash
# --hw where the GPU's counters cannot be read, on the CPU against the stand-in CUPTI
# (tests/programs/mock_cupti.cpp): an attach window with --hw on a dormant job whose "CUPTI" refuses
# PM sampling for want of privileges (MOCK_CUPTI_PM=denied), then one that finds the counters held
# by another profiler (busy). Each time the job's stderr has exactly one line saying so, the window
# records its GPU activities as without --hw, the job ends normally, and the capture says why there
# are no hardware counters (what the report shows).
# usage: hw_degrade_test.sh SIGHTLINE COLLECTOR MOCK_CUPTI MOCK_JOB WORKDIR
set -u
SL=$1; COLLECTOR=$2; MOCK=$3; JOB=$4; W=$5
rm -rf "$W"; mkdir -p "$W"
fail() { echo "FAIL: $*"; touch "$W/stop"; exit 1; }

one_job() { # NAME MOCK_MODE EXPECTED_LINE
  local name=$1 mode=$2 expected=$3
  local d=$W/$name; mkdir -p "$d/run" "$d/caps"; chmod 700 "$d/run"; rm -f "$W/stop"
  env MOCK_CUPTI_PM=$mode SIGHTLINE_ACTIVITIES=all XDG_RUNTIME_DIR=$d/run SIGHTLINE_OUTPUT=$d/caps SIGHTLINE_DORMANT=1 \
    SIGHTLINE_CUPTI_PATH=$MOCK LD_PRELOAD=$COLLECTOR "$JOB" "$W/stop" 30 > "$d/job.out" 2> "$d/job.err" &
  local pid=$!
  for _ in $(seq 1 100); do [ -S "$d/run/sightline/$pid.sock" ] && break; sleep 0.05; done
  XDG_RUNTIME_DIR=$d/run "$SL" attach "$pid" --duration 300ms --hw --hw-interval 100 -o "$d/w.db" > /dev/null 2> "$d/w.err"
  grep -q "recorded 0 ops and [1-9][0-9]* GPU activities" "$d/w.err" || fail "$name: window: $(cat "$d/w.err")"
  touch "$W/stop"
  wait "$pid" || fail "$name: the job failed: $(cat "$d/job.err")"
  [ "$(grep -c "hardware counters" "$d/job.err")" = 1 ] || fail "$name: want one line on hardware counters: $(cat "$d/job.err")"
  grep -q "sightline: hardware counters not recorded: .*$expected.*; everything else is recorded" "$d/job.err" ||
    fail "$name: the line does not say '$expected': $(cat "$d/job.err")"
  # The capture says why too (the report shows it; this job has no CPU ops to report on).
  "$SL" import "$(ls "$d"/caps/*.slcap)" -o "$d/all.db" > /dev/null 2>&1 || fail "$name: import"
  python3 -c "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(\"SELECT value FROM meta WHERE key = 'hw_sampling'\").fetchone()[0])" \
    "$d/all.db" > "$d/status.txt" 2>&1
  grep -q "^not recorded on GPU 0: .*$expected" "$d/status.txt" || fail "$name: the capture does not say why: $(cat "$d/status.txt")"
  echo "$name: $(grep "hardware counters" "$d/job.err")"
}
one_job denied denied "INSUFFICIENT_PRIVILEGES"
one_job busy busy "another profiler holds the GPU's counters"
echo "hardware counters unavailable: all checks passed"
