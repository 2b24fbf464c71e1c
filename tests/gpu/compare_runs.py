#!/usr/bin/env python3
"""Compares two trace databases of the same training steps (torch.profiler's and sightline's):
ops and call counts, kernels and their counts, and the kernels each op launched, all within the
"train_step" ranges.

usage: compare_runs.py TORCH.db SIGHTLINE.db
"""
import sqlite3, sys
from collections import Counter

IN_STEP = """EXISTS (SELECT 1 FROM steps s WHERE {t}.start_ns >= s.start_ns AND {t}.start_ns < s.end_ns)"""

def load(path):
    db = sqlite3.connect(path)
    db.execute("""CREATE TEMP TABLE steps AS SELECT e.start_ns, e.end_ns FROM cpu_events e JOIN strings s ON s.id = e.name_id
                  WHERE s.text = 'train_step' AND e.kind = 1""")
    ops = Counter(dict(db.execute(f"SELECT name, count(*) FROM ops o WHERE kind IN ('op','user_annotation') AND counted = 1 AND {IN_STEP.format(t='o')} GROUP BY name")))
    # Kernels launched by ops inside the steps (by their launching op, so GPU lag does not matter).
    kernels = Counter(dict(db.execute(f"""SELECT k.name, count(*) FROM kernels k JOIN ops o ON o.external_id = k.external_id AND k.external_id != 0
        AND o.kind IN ('op','user_annotation') WHERE k.kind != 'gpu_user_annotation' AND {IN_STEP.format(t='o')} GROUP BY k.name""")))
    links = Counter(dict(db.execute(f"""SELECT o.name || ' -> ' || k.name, count(*) FROM kernels k JOIN ops o ON o.external_id = k.external_id AND k.external_id != 0
        AND o.kind IN ('op','user_annotation') WHERE k.kind != 'gpu_user_annotation' AND {IN_STEP.format(t='o')} GROUP BY o.name, k.name""")))
    return ops, kernels, links

t_ops, t_k, t_links = load(sys.argv[1])
s_ops, s_k, s_links = load(sys.argv[2])
ok = True
for what, a, b in (("ops", t_ops, s_ops), ("kernels", t_k, s_k), ("op->kernel links", t_links, s_links)):
    names = set(a) | set(b)
    same = [n for n in names if a.get(n, 0) == b.get(n, 0)]
    diff = sorted((n for n in names if a.get(n, 0) != b.get(n, 0)), key=lambda n: -abs(a.get(n, 0) - b.get(n, 0)))
    print(f"{what}: {len(same)} of {len(names)} names with equal counts; torch.profiler total {sum(a.values())}, sightline total {sum(b.values())}")
    for n in diff[:12]:
        print(f"   {a.get(n, 0):>6} vs {b.get(n, 0):>6}  {n[:150]}")
    ok &= not diff
print("MATCH" if ok else "DIFFERENCES")
