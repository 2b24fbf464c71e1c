#!/usr/bin/env python3
"""The op-recording cost in a Python job: steps of small autograd ops (8,000 ops a step), run
without a profiler, with a no-op RecordFunction callback (PyTorch's own cost, the floor), under
`sightline run` (ops only) and under torch.profiler (CPU), interleaved over rounds; prints the
median step time of each. Needs torch importable by this Python (the torch==2.11.0 wheel).

usage: py_op_overhead.py [--build build/release] [--rounds 2]
       py_op_overhead.py --job MODE   (one run; what the driver starts)"""
import argparse, json, os, statistics, subprocess, sys, tempfile, time

ap = argparse.ArgumentParser()
ap.add_argument("--build", default="build/release")
ap.add_argument("--rounds", type=int, default=2)
ap.add_argument("--job", default="")
a = ap.parse_args()

if a.job:
    import torch
    if a.job == "noop":
        import ctypes
        ctypes.CDLL(os.path.join(a.build, "bench", "libsightline_noop_callback.so")).sightline_bench_noop(1)
    w = torch.randn(16, 16, requires_grad=True)
    x = torch.randn(4, 16)
    prof = None
    if a.job == "torch.profiler":
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        prof.__enter__()
    times = []
    for _ in range(30):
        t = time.perf_counter()
        with torch.profiler.record_function("train_step"):
            h = x
            for _ in range(200):
                h = torch.nn.functional.silu(h @ w) * 0.5 + h
            h.sum().backward()
            w.grad = None
        times.append((time.perf_counter() - t) * 1e3)
    if prof:
        prof.__exit__(None, None, None)
    print(json.dumps({"median_ms": statistics.median(times[5:])}))
    sys.exit(0)

sl = os.path.join(a.build, "cli", "sightline")
tmp = tempfile.mkdtemp(prefix="sl-pyops-")
me = [sys.executable, os.path.abspath(__file__), "--build", a.build, "--job"]
env = dict(os.environ, SIGHTLINE_TORCH_BRIDGE=os.path.join(a.build, "collector", "libsightline_torch.so"), SIGHTLINE_CUDA="0")
modes = {"no profiler": me + ["plain"], "no-op callback": me + ["noop"],
         "sightline run": [sl, "run", "--no-import", "-o", tmp, "--"] + me + ["sightline"],
         "torch.profiler (CPU)": me + ["torch.profiler"]}
times = {m: [] for m in modes}
for _ in range(a.rounds):
    for m, cmd in modes.items():
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        line = [l for l in p.stdout.splitlines() if l.startswith("{")]
        if p.returncode != 0 or not line:
            sys.exit(f"py_op_overhead: {m} failed: {p.stderr.strip()[-400:]}")
        times[m].append(json.loads(line[-1])["median_ms"])
base = statistics.median(times["no profiler"])
for m, ts in times.items():
    med = statistics.median(ts)
    print(f"{m:22s} {med:8.2f} ms  {(med / base - 1) * 100:+7.1f}%  {(med - base) * 1e6 / 8000:+6.0f} ns/op   "
          + " ".join(f"{t:.2f}" for t in ts))
