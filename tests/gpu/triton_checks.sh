#!/usr/bin/env bash
# The default light mode on a job whose kernels come from Triton (tests/gpu/triton_job.py): every
# GPU activity linked, no counted call unmatched, and how many Triton kernels were linked to an op.
# Expects devbin/ (tests/gpu/make_devbin.sh). Writes triton.txt to $OUT.
set -u
source tests/gpu/devbin_env.sh
work=/tmp/sltriton; rm -rf $work; mkdir -p $work
T 150 $SL run -o $work/cap -- python3 tests/gpu/triton_job.py --steps 5 > $work/job.out 2>&1 || tail -5 $work/job.out
grep "sightline:" $work/job.out | head -5
cap=$(ls -S $work/cap/*.slcap | head -1)
{
  $SL report "$cap" --step all 2>/dev/null | grep -E "GPU activities linked|Launch calls counted|host synchronisations"
  python3 - "${cap%.slcap}.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
n, linked = db.execute("SELECT count(*), sum(external_id != 0) FROM kernels WHERE name LIKE 'triton%'").fetchone()
print(f"Triton kernels: {n}, linked to an op: {linked}")
PY
} | tee $out/triton.txt
