#!/usr/bin/env python3
"""The collector's launch hooks' cost per driver call, on the CPU (no GPU needed):
bench/launch_count_cost.cpp calls a driver function of the stand-in libcuda
(tests/programs/mock_cuda_driver.cpp) found through cuGetProcAddress, without the collector, with
it preloaded but outside a window (the wrapper only forwards: a dormant job's cost), and under
`sightline run --activities kernel` with the stand-in CUPTI (every call counted and recorded: a
window's cost). The modes are interleaved over several rounds; prints per mode the median ns per
call and the difference against no collector. (The counted runs make no GPU work, so `sightline
run` keeps no capture of them: the cost measured is that of counting and recording each call.)

usage: launch_count_cost.py [--build build/dev] [--rounds 5] [--calls 200000]"""
import argparse, json, os, statistics, subprocess, sys, tempfile

ap = argparse.ArgumentParser()
ap.add_argument("--build", default="build/dev")
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--calls", type=int, default=200000)
a = ap.parse_args()


def built(sub, name):
    f = os.path.join(a.build, sub, name)
    if not os.path.exists(f):
        sys.exit(f"launch_count_cost: {f} is missing; build the tree with its tests first")
    return f


prog = built("bench", "sightline_launch_count_cost")
driver = built("tests/programs", "libsightline_mock_cuda_driver.so")
cupti = built("tests/programs", "libsightline_mock_cupti.so")
sl = built("cli", "sightline")
collector = built("collector", "libsightline_collector.so")
tmp = tempfile.mkdtemp(prefix="sl-launch-cost-")
run_dir = os.path.join(tmp, "run")
os.makedirs(run_dir, mode=0o700)
args = [prog, driver, str(a.calls), "5"]
modes = {
    "no collector": (args, {}),
    "preloaded, no window": (args, {"LD_PRELOAD": collector, "SIGHTLINE_DORMANT": "1", "SIGHTLINE_OUTPUT": tmp,
                                    "XDG_RUNTIME_DIR": run_dir, "SIGHTLINE_CUPTI_PATH": cupti}),
    "counted and recorded": ([sl, "run", "--no-import", "--activities", "kernel", "-o", os.path.join(tmp, "r"), "--"] + args,
                             {"SIGHTLINE_CUPTI_PATH": cupti}),
}
ns = {m: [] for m in modes}
for r in range(a.rounds):
    for m, (cmd, extra) in modes.items():
        p = subprocess.run(cmd, env=dict(os.environ, **extra), capture_output=True, text=True)
        line = [l for l in p.stdout.splitlines() if l.startswith("{")]
        if p.returncode != 0 or not line:
            sys.exit(f"launch_count_cost: {m} failed: {p.stderr.strip()[-400:]}")
        ns[m].append(json.loads(line[-1])["ns_per_call"])
base = statistics.median(ns["no collector"])
print(f"{'mode':24s} {'ns a call':>10s} {'vs none':>9s}   rounds")
for m, v in ns.items():
    med = statistics.median(v)
    print(f"{m:24s} {med:10.1f} {med - base:+9.1f}   " + " ".join(f"{x:.1f}" for x in v))
