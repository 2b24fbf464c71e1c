#!/usr/bin/env python3
"""Aligns tests/gpu/launch_probe.cpp's sequence of counted calls with a Sightline capture's GPU
activities in correlation-id order (both for the same job run) and says how far the n-th counted
call is the activity with the n-th id: kinds (K kernel, M copy, S set) and kernel names compared
position by position from the first activity on, then the first places where they part.
usage: launch_probe_compare.py PROBE_OUT DB"""
import sqlite3, sys

probe_path, db = sys.argv[1], sys.argv[2]
header = [l.rstrip() for l in open(probe_path) if l.startswith("#")]
calls = []
for line in open(probe_path):
    if line.startswith("#"):
        continue
    kind, _, name = line.rstrip("\n").partition(" ")
    calls.append((kind, name))
c = sqlite3.connect(db)
KIND = {"kernel": "K", "memcpy": "M", "memset": "S"}
acts = [(KIND.get(k, "?"), n, corr) for k, n, corr in c.execute(
    "SELECT k.name, s.text, g.correlation FROM gpu_events g JOIN gpu_kinds k ON k.kind = g.kind "
    "JOIN strings s ON s.id = g.name_id WHERE k.name IN ('kernel', 'memcpy', 'memset') ORDER BY g.correlation")]
print("\n".join(header))
print(f"counted calls {len(calls)} (K {sum(k == 'K' for k, _ in calls)}, M {sum(k == 'M' for k, _ in calls)}, "
      f"S {sum(k == 'S' for k, _ in calls)}); GPU activities {len(acts)} (K {sum(a[0] == 'K' for a in acts)}, "
      f"M {sum(a[0] == 'M' for a in acts)}, S {sum(a[0] == 'S' for a in acts)}), ids {acts[0][2]}..{acts[-1][2]}")
dense = sum(1 for a, b in zip(acts, acts[1:]) if b[2] == a[2] + 1)
print(f"activities whose id is the last one's plus one: {dense}/{len(acts) - 1}")
if not calls:
    sys.exit("no call counted")


def same(call, act):
    if call[0] != act[0]:
        return False
    return call[0] != "K" or call[1] == "?" or call[1] == act[1] or act[1].startswith(call[1])


# The probe counts from the job's start, the capture's ids from CUPTI's: try the offsets that
# line the first activities up, keep the best.
best = max(range(0, min(200, len(calls))), key=lambda off: sum(same(calls[off + i], acts[i]) for i in range(min(500, len(acts), len(calls) - off))))
n = min(len(acts), len(calls) - best)
ok = [same(calls[best + i], acts[i]) for i in range(n)]
print(f"offset {best}: the n-th counted call is the n-th activity (kind, and name for kernels) for {sum(ok)}/{n}")
bad = [i for i, v in enumerate(ok) if not v][:8]
for i in bad:
    print(f"  differs at activity {i} (id {acts[i][2]}): call {calls[best + i][0]} {calls[best + i][1][:70]!r} / "
          f"activity {acts[i][0]} {acts[i][1][:70]!r}")
