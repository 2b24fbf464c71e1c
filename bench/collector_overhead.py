#!/usr/bin/env python3
"""The collector's cost on the PyTorch op path, measured on the CPU (no GPU needed): the same
libtorch program (bench/op_overhead.cpp: steps of small ops) run without the collector, with it
preloaded but dormant (attach mode), and under `sightline run` without and with shapes. The runs
are interleaved over several rounds; each prints its median step time. Prints per mode the median
over rounds, the overhead against no collector, and the added time per recorded op.

With --device cuda (on a GPU machine) every op launches a kernel, so the recording runs pay for
CUPTI too, and two more modes run: the op ids pushed as CUPTI external correlation ids around each
op (SIGHTLINE_LINK=correlation, the way torch.profiler links kernels), and no kernel tracing at all
(SIGHTLINE_CUDA=0). "no-op op callback" is PyTorch's own cost once any op callback is registered.

With --against DIR (another build tree, say of an earlier commit) two more modes run the recording
with that build's collector and bridge, for an A/B of the op path in the same session.

usage: collector_overhead.py [--build build/release] [--rounds 5] [--steps 30] [--ops 20000] [--device cpu|cuda]
                             [--against DIR]"""
import argparse, json, os, statistics, subprocess, sys, tempfile

ap = argparse.ArgumentParser()
ap.add_argument("--build", default="build/release")
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--steps", type=int, default=30)
ap.add_argument("--ops", type=int, default=20000)
ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
ap.add_argument("--against", default="")
a = ap.parse_args()


def built(sub, name):
    # A build tree (build/release/bench/...) or the flat devbin/ of tests/gpu/make_devbin.sh.
    for f in (os.path.join(a.build, sub, name), os.path.join(a.build, name)):
        if os.path.exists(f):
            return f
    sys.exit(f"collector_overhead: {name} is missing under {a.build}; build the '{os.path.basename(a.build)}' preset first")


prog = built("bench", "sightline_op_overhead")
sl = built("cli", "sightline")
collector = built("collector", "libsightline_collector.so")
bridge = built("collector", "libsightline_torch.so")
noop = built("bench", "libsightline_noop_callback.so")

tmp = tempfile.mkdtemp(prefix="sl-overhead-")
run_dir = os.path.join(tmp, "run")
os.makedirs(run_dir, mode=0o700)
args = [prog, str(a.steps), str(a.ops), a.device]
env = dict(os.environ, SIGHTLINE_TORCH_BRIDGE=bridge)
modes = {
    "no collector": (args, {}),
    "no-op op callback": (args, {"SIGHTLINE_BENCH_NOOP": noop}),
    "dormant (attach mode)": (args, {"LD_PRELOAD": collector, "SIGHTLINE_DORMANT": "1", "SIGHTLINE_OUTPUT": tmp,
                                     "XDG_RUNTIME_DIR": run_dir}),
    "sightline run": ([sl, "run", "--no-import", "-o", os.path.join(tmp, "r"), "--"] + args, {}),
    "sightline run --shapes": ([sl, "run", "--no-import", "--shapes", "-o", os.path.join(tmp, "s"), "--"] + args, {}),
}
if a.against:
    other = {"SIGHTLINE_COLLECTOR": os.path.join(a.against, "collector", "libsightline_collector.so"),
             "SIGHTLINE_TORCH_BRIDGE": os.path.join(a.against, "collector", "libsightline_torch.so")}
    for f in other.values():
        if not os.path.exists(f):
            sys.exit(f"collector_overhead: {f} is missing")
    modes["run, --against build"] = ([sl, "run", "--no-import", "-o", os.path.join(tmp, "ar"), "--"] + args, other)
    modes["run --shapes, --against build"] = ([sl, "run", "--no-import", "--shapes", "-o", os.path.join(tmp, "as"), "--"] + args, other)
if a.device == "cuda":
    modes["run, correlation ids"] = ([sl, "run", "--no-import", "-o", os.path.join(tmp, "c"), "--"] + args, {"SIGHTLINE_LINK": "correlation"})
    modes["run, no kernel tracing"] = ([sl, "run", "--no-import", "-o", os.path.join(tmp, "k"), "--"] + args, {"SIGHTLINE_CUDA": "0"})


def once(cmd, extra):
    p = subprocess.run(cmd, env=dict(env, **extra), capture_output=True, text=True)
    line = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not line:
        sys.exit(f"collector_overhead: {' '.join(cmd)} failed: {p.stderr.strip()[-400:]}")
    return json.loads(line[-1])["median_step_ms"]


times = {m: [] for m in modes}
for r in range(a.rounds):
    for m, (cmd, extra) in modes.items():
        times[m].append(once(cmd, extra))

# Ops recorded per step, from one capture of the recording run.
cap = next(os.path.join(tmp, "r", f) for f in os.listdir(os.path.join(tmp, "r")) if f.endswith(".slcap"))
rep = json.loads(subprocess.run([sl, "report", cap, "--format", "json"], capture_output=True, text=True, check=True).stdout)
ops_per_step = (rep["trace"]["counts"]["cpu_ops"] - rep["trace"]["counts"]["user_annotations"]) / a.steps

base = statistics.median(times["no collector"])
print(f"collector cost on the op path: {a.rounds} interleaved rounds, {a.steps} steps of {ops_per_step:.0f} recorded ops")
print(f"{'mode':30s} {'median step ms':>15s} {'vs none':>9s} {'ns per op':>10s}   rounds")
for m, ts in times.items():
    med = statistics.median(ts)
    print(f"{m:30s} {med:15.3f} {(med / base - 1) * 100:+8.2f}% {(med - base) * 1e6 / ops_per_step:+10.1f}   "
          + " ".join(f"{t:.2f}" for t in ts))

# How each recording linked GPU work to ops (by launch nesting, the default; by correlation ids).
for label, d in (("run (launch nesting)", "r"), ("run, correlation ids", "c")):
    path = os.path.join(tmp, d)
    if a.device != "cuda" or not os.path.isdir(path):
        continue
    cap = next(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".slcap"))
    q = json.loads(subprocess.run([sl, "report", cap, "--format", "json"], capture_output=True, text=True, check=True).stdout)
    dq = q["data_quality"]
    print(f"{label}: {q['trace']['counts']['kernels']} kernels, {dq['gpu_linked_to_op']} GPU activities linked to an op, "
          f"{dq['gpu_without_external_id']} without, {dq['dropped_records']} records dropped")
