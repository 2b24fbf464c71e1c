#!/usr/bin/env python3
"""Checks a capture of exactness.cu against what the program says it did.

usage: check_exactness.py EXPECTED.json TRACE.db
Counts kernels by name, copies by kind and memsets; requires nothing dropped or lost, the work
spread over the program's streams, and every GPU activity inside its launch API call's
correlation (an API record with the same correlation id that started before it).
"""
import json, sqlite3, sys

expected = json.load(open(sys.argv[1]))
db = sqlite3.connect(sys.argv[2])
q = lambda sql: db.execute(sql).fetchone()[0]
got = {
    "scale": q("SELECT count(*) FROM kernels WHERE kind='kernel' AND name LIKE '%scale%'"),
    "offset": q("SELECT count(*) FROM kernels WHERE kind='kernel' AND name LIKE '%offset%'"),
    "memcpy_htod": q("SELECT count(*) FROM kernels WHERE name LIKE 'Memcpy HtoD%'"),
    "memcpy_dtod": q("SELECT count(*) FROM kernels WHERE name LIKE 'Memcpy DtoD%'"),
    "memcpy_dtoh": q("SELECT count(*) FROM kernels WHERE name LIKE 'Memcpy DtoH%'"),
    "memset": q("SELECT count(*) FROM kernels WHERE kind='memset'"),
    "streams": q("SELECT count(DISTINCT stream) FROM kernels WHERE kind='kernel' AND (name LIKE '%scale%' OR name LIKE '%offset%')"),
}
dropped = q("SELECT value FROM quality WHERE key='dropped_records'")
lost = q("SELECT value FROM quality WHERE key='lost_chunks'")
unlinked = q("""SELECT count(*) FROM gpu_events g WHERE g.kind != 3 AND NOT EXISTS (
                  SELECT 1 FROM cpu_events c WHERE c.kind IN (2, 3) AND c.correlation = g.correlation AND c.start_ns <= g.start_ns)""")
# launches: CUPTI's records of cudaLaunchKernel, or the collector's counted cuLaunchKernel calls
threads = q("""SELECT count(DISTINCT thread_id) FROM cpu_events c WHERE (c.kind = 2 AND c.cbid IN (211, 214)) OR (c.kind = 3 AND
               c.name_id IN (SELECT id FROM strings WHERE text LIKE 'cuLaunchKernel%'))""")
ok = True
for k, v in got.items():
    status = "ok" if v == expected[k] else "MISMATCH"
    ok &= v == expected[k]
    print(f"{k:<12} expected {expected[k]:>6}  recorded {v:>6}  {status}")
print(f"dropped records {dropped}, lost chunks {lost}, GPU activities without their launch call {unlinked}")
print(f"threads that launched kernels: {threads} (program used {expected['threads']})")
ok &= dropped == 0 and lost == 0 and unlinked == 0
print("EXACTNESS OK" if ok else "EXACTNESS FAILED")
sys.exit(0 if ok else 1)
