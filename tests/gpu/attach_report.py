#!/usr/bin/env python3
"""Summarises tests/gpu/attach_checks.sh: dormant cost from alternated runs, and for the job that
was attached to, the steps of each window (from its report JSON) and the job's step times before,
during, between and after the windows (from the job's --log-steps file and each window's extent as
`sightline attach` printed it). Exits 1 if a window's capture lacks its steps or its kernel links."""
import argparse, json, re, statistics, sys

ap = argparse.ArgumentParser()
ap.add_argument("--plain", nargs="+", required=True)
ap.add_argument("--dormant", nargs="+", required=True)
ap.add_argument("--job", required=True)
ap.add_argument("--window", nargs=3, action="append", metavar=("ERR", "REPORT_JSON", "STEPS"), required=True)
ap.add_argument("--cut", type=float, required=True, help="epoch seconds after which steps are left out")
a = ap.parse_args()


def steps(path):  # [(begin_s, end_s, ms)]
    out = []
    for line in open(path):
        end_ns, ms = line.split()[:2]
        end = int(end_ns) / 1e9
        out.append((end - float(ms) / 1e3, end, float(ms)))
    return out


def med(xs):
    return statistics.median(xs) if xs else float("nan")


ok = True
print("dormant cost: median step ms of each run (alternated)")
plain = [med([s[2] for s in steps(p)]) for p in a.plain]
dormant = [med([s[2] for s in steps(p)]) for p in a.dormant]
print("  no collector:      " + "  ".join(f"{m:.2f}" for m in plain))
print("  collector dormant: " + "  ".join(f"{m:.2f}" for m in dormant))
spread = (max(plain) - min(plain)) / min(plain) * 100
print(f"  dormant vs none: {(statistics.mean(dormant) / statistics.mean(plain) - 1) * 100:+.2f}% "
      f"(run-to-run spread without the collector: {spread:.2f}%)")

windows = []
for err, report, want in a.window:
    m = re.search(r"window of ([\d.]+) s \(([\d.]+) to ([\d.]+), seconds since the epoch\) recorded (\d+) ops", open(err).read())
    if not m:
        print(f"FAIL: no window line in {err}")
        sys.exit(1)
    begin, end = float(m.group(2)), float(m.group(3))
    d = json.load(open(report))
    st, c, q = d["steps"], d["trace"]["counts"], d["data_quality"]
    gpu = c["kernels"] + c["memcpy"] + c["memset"]
    linked = q["gpu_linked_to_op"]
    names = sorted({s["name"] for s in st})
    good = len(st) == int(want) and names == ["train_step"] and c["kernels"] > 0 and linked >= 0.999 * gpu
    ok &= good
    print(f"window {len(windows) + 1}: {end - begin:.3f} s, {len(st)} steps {names} (asked {want}), ops {c['cpu_ops']}, "
          f"kernels {c['kernels']}, GPU activities linked to ops {linked}/{gpu} -> {'ok' if good else 'FAIL'}")
    windows.append((begin, end))

job = [s for s in steps(a.job) if s[1] < a.cut]
phase = {"before": [], "window 1 (ops+kernels)": [], "between": [], "window 2 (+shapes)": [], "after": []}
(b1, e1), (b2, e2) = windows[0], windows[1]
for b, e, ms in job:
    if e <= b1: phase["before"].append(ms)
    elif b >= b1 and e <= e1: phase["window 1 (ops+kernels)"].append(ms)
    elif b >= e1 and e <= b2: phase["between"].append(ms)
    elif b >= b2 and e <= e2: phase["window 2 (+shapes)"].append(ms)
    elif b >= e2: phase["after"].append(ms)
base = med(phase["before"] + phase["between"] + phase["after"])
print("job step time by phase (steps straddling a window edge left out):")
for k, v in phase.items():
    print(f"  {k:24s} {len(v):3d} steps  median {med(v):8.2f} ms  ({(med(v) / base - 1) * 100:+.2f}% vs dormant median {base:.2f})")
print("all window checks passed" if ok else "FAIL: a window check failed")
sys.exit(0 if ok else 1)
