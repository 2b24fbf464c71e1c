#!/usr/bin/env python3
"""Import benchmark: `sightline report` on a large Kineto trace against Python's bare json.load of
the same file, in one run, side by side.

Makes the trace first when it is missing (make_large_trace.py: the bundled fixture replicated to
--events events, default 5 million). For each command it records wall time and peak resident
memory (getrusage of the child) and prints events per second, peak memory as a multiple of the
JSON size, and the ratio of the two wall times. Targets: >= 1e6 events/s end to end,
peak memory <= 1.5x the JSON, and sightline faster than json.load.

usage: import_bench.py [--sightline PATH] [--trace PATH] [--events N] [--repeat R]
"""
import argparse, json, os, resource, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

def run(cmd):
    """Runs cmd; returns (wall seconds, peak RSS bytes of the child)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed ({os.waitstatus_to_exitcode(status)}): {' '.join(cmd)}")
    return wall, usage.ru_maxrss * 1024

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sightline", default=os.path.join(ROOT, "build/release/cli/sightline"))
    ap.add_argument("--trace", default=os.path.join(HERE, "out/large.json"))
    ap.add_argument("--events", type=int, default=5_000_000)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each command; the best is kept")
    a = ap.parse_args()
    if not os.path.exists(a.sightline):
        sys.exit(f"{a.sightline}: not built (cmake --preset release && cmake --build --preset release)")
    if not os.path.exists(a.trace):
        os.makedirs(os.path.dirname(a.trace), exist_ok=True)
        subprocess.check_call([sys.executable, os.path.join(HERE, "make_large_trace.py"),
                               os.path.join(ROOT, "tests/fixtures/kineto/qwen3next_fallback_small.json.gz"),
                               a.trace, "--events", str(a.events)])
    size = os.path.getsize(a.trace)
    report = a.trace + ".report.json"
    # Warm the page cache so that both tools read from memory.
    with open(a.trace, "rb") as f:
        while f.read(1 << 24):
            pass
    sl_cmd = [a.sightline, "report", a.trace, "--format", "json", "-o", report]
    py_cmd = [sys.executable, "-c", f"import json; json.load(open({a.trace!r}))"]
    sl = min(run(sl_cmd) for _ in range(a.repeat))
    py = min(run(py_cmd) for _ in range(max(1, a.repeat - 1)))
    events = json.load(open(report))["data_quality"]["events_read"]
    print(f"trace: {a.trace}  {size / 1e6:.1f} MB, {events:,} events")
    print(f"{'command':<34}{'wall s':>9}{'peak MB':>10}{'peak/JSON':>11}{'events/s':>14}")
    for name, (wall, peak) in (("sightline report --format json", sl), ("python3 json.load (baseline)", py)):
        print(f"{name:<34}{wall:>9.2f}{peak / 1e6:>10.0f}{peak / size:>11.2f}{events / wall:>14,.0f}")
    print(f"sightline report vs json.load: {py[0] / sl[0]:.1f}x faster "
          f"({sl[0]:.2f} s vs {py[0]:.2f} s); target >= 1.0x")
    print(f"events per second: {events / sl[0]:,.0f}; target >= 1,000,000")
    print(f"peak memory: {sl[1] / size:.2f}x the JSON size; target <= 1.50x")
    ok = events / sl[0] >= 1e6 and sl[1] <= 1.5 * size and sl[0] < py[0]
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1

if __name__ == "__main__":
    sys.exit(main())
