#!/usr/bin/env python3
"""How CUPTI numbers its correlation ids, from a Sightline trace database (a capture imported by
`sightline run`): for GPU activities and for API calls, how many there are, how many distinct ids,
and how often the next id (in id order) is the last plus one. Run on a capture recorded with
kernels only and on one with API calls too, it tells whether kernels recorded without API calls
still carry ids dense enough to be matched, in launch order, with launches counted elsewhere.
usage: correlation_probe.py DB..."""
import sqlite3, sys


def stats(ids):
    ids = sorted(ids)
    steps = [b - a for a, b in zip(ids, ids[1:])]
    ones = sum(1 for s in steps if s == 1)
    big = sorted(steps)[-3:] if steps else []
    return (f"{len(ids)} records, {len(set(ids))} distinct ids, {ids[0] if ids else '-'}..{ids[-1] if ids else '-'}, "
            f"next id = last + 1 for {ones}/{len(steps)}, zero ids {sum(1 for i in ids if i == 0)}, largest gaps {big}")


for db in sys.argv[1:]:
    c = sqlite3.connect(db)
    print(db)
    for table, kinds in (("gpu_events", "gpu_kinds"), ("cpu_events", "cpu_kinds")):
        for kind, name in c.execute(f"SELECT kind, name FROM {kinds}"):
            ids = [r[0] for r in c.execute(f"SELECT correlation FROM {table} WHERE kind = ? AND correlation IS NOT NULL", (kind,))]
            if ids:
                print(f"  {table} {name}: {stats(ids)}")
    # Kernels in one stream, by start time: do their ids rise with it (launch order = execution order)?
    rows = c.execute("SELECT stream, correlation FROM gpu_events WHERE correlation IS NOT NULL ORDER BY stream, start_ns").fetchall()
    rising = sum(1 for (s1, a), (s2, b) in zip(rows, rows[1:]) if s1 == s2 and b > a)
    same = sum(1 for (s1, _), (s2, _) in zip(rows, rows[1:]) if s1 == s2)
    print(f"  GPU activities of one stream in start order with rising ids: {rising}/{same}")
