#!/usr/bin/env python3
"""Export benchmark: `sightline export DB -o out.json` on a large trace database, against
`sightline report DB --format json` on the same database in the same run (the baseline: the same
read of the database, op tree, metrics and rules that the export does for its step and finding
markers, without the JSON of the events).

Makes the database first when it is missing: the bundled fixture replicated in memory until it
holds --events CPU and GPU events (sightline_make_large_db, bench/make_large_db.cpp). For each command it records wall time and peak
resident memory (wait4 of the child) and prints the events exported per second, the JSON written
per second, and peak memory against the size of the JSON written: an export that held its JSON in
memory would need more than that size.

usage: export_bench.py [--sightline PATH] [--db PATH] [--events N] [--repeat R] [--keep]
"""
import argparse, os, sqlite3, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

def run(cmd):
    """Runs cmd; returns (wall seconds, peak RSS bytes of the child)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed ({os.waitstatus_to_exitcode(status)}): {' '.join(cmd)}")
    return wall, usage.ru_maxrss * 1024

def make_db(tool, db, events):
    if not os.path.exists(tool):
        sys.exit(f"{tool}: not built (the bench target sightline_make_large_db)")
    subprocess.check_call([tool, os.path.join(ROOT, "tests/fixtures/kineto/qwen3next_fallback_small.json.gz"),
                           db, "--events", str(events)])

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sightline", default=os.path.join(ROOT, "build/release/cli/sightline"))
    ap.add_argument("--db", default=os.path.join(HERE, "out/huge.db"))
    ap.add_argument("--make-db", default=None, help="sightline_make_large_db (default: beside --sightline's build)")
    ap.add_argument("--events", type=int, default=10_000_000, help="CPU and GPU events of the database made")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each command; the best is kept")
    ap.add_argument("--keep", action="store_true", help="keep the exported JSON")
    a = ap.parse_args()
    if not os.path.exists(a.sightline):
        sys.exit(f"{a.sightline}: not built (cmake --preset release && cmake --build --preset release)")
    if not os.path.exists(a.db):
        os.makedirs(os.path.dirname(a.db) or ".", exist_ok=True)
        build = os.path.dirname(os.path.dirname(os.path.abspath(a.sightline)))
        make_db(a.make_db or os.path.join(build, "bench/sightline_make_large_db"), a.db, a.events)
    out = os.path.splitext(a.db)[0] + ".export.json"
    report = os.path.splitext(a.db)[0] + ".report.json"
    base_cmd = [a.sightline, "report", a.db, "--format", "json", "-o", report]
    exp_cmd = [a.sightline, "export", a.db, "-o", out]
    base = min(run(base_cmd) for _ in range(a.repeat))
    exp = min(run(exp_cmd) for _ in range(a.repeat))
    size = os.path.getsize(out)
    with sqlite3.connect(a.db) as db:
        events = sum(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("cpu_events", "gpu_events"))
    print(f"database: {a.db}  {os.path.getsize(a.db) / 1e6:,.0f} MB, {events:,} CPU and GPU events")
    print(f"export: {out}  {size / 1e6:,.0f} MB of JSON")
    print(f"{'command':<34}{'wall s':>9}{'peak MB':>10}{'peak/JSON out':>15}{'events/s':>14}")
    for name, (wall, peak) in (("sightline export", exp), ("sightline report (baseline)", base)):
        print(f"{name:<34}{wall:>9.2f}{peak / 1e6:>10.0f}{peak / size:>15.2f}{events / wall:>14,.0f}")
    print(f"export vs report of the same database: {exp[0] / base[0]:.2f}x the time, "
          f"{exp[1] / base[1]:.2f}x the peak memory; JSON written at {size / 1e6 / exp[0]:,.0f} MB/s")
    if not a.keep:
        os.remove(out)
    return 0

if __name__ == "__main__":
    sys.exit(main())
