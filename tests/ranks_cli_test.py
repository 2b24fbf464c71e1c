#!/usr/bin/env python3
"""sightline ranks on a two-rank job written as PyTorch profiler traces: rank 1 computes 4 ms longer
each step, so rank 0 waits 4 ms at every all-reduce. Usage: ranks_cli_test.py SIGHTLINE WORKDIR"""
import json, os, shutil, subprocess, sys

sl, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)

def trace(rank, delay_us, steps=4):
    ev, t, ext = [], 1000.0, 1
    for s in range(steps):
        compute = 10000.0 + delay_us
        arrive_last = t + 10000.0 + 4000.0  # the slow rank's arrival
        end = arrive_last + 2000.0
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 10 + rank, "tid": 1,
                   "ts": t, "dur": end - t, "args": {"External id": ext}})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 10 + rank, "tid": 1, "ts": t + 1, "dur": 20,
                   "args": {"External id": ext + 1}})
        ev.append({"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16bf16_bf16f32", "pid": 0, "tid": 7,
                   "ts": t, "dur": compute, "args": {"External id": ext + 1, "correlation": ext + 1, "device": 0, "stream": 7}})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "nccl:all_reduce", "pid": 10 + rank, "tid": 1, "ts": t + 30, "dur": 20,
                   "args": {"External id": ext + 2}})
        ev.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                   "pid": 0, "tid": 20, "ts": t + compute, "dur": end - (t + compute),
                   "args": {"External id": ext + 2, "correlation": ext + 2, "device": 0, "stream": 20}})
        ext += 3
        t = end + 100
    return {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}, "traceEvents": ev}

for rank, delay in ((0, 0.0), (1, 4000.0)):
    with open(os.path.join(work, f"rank{rank}.json"), "w") as f:
        json.dump(trace(rank, delay), f)

def run(*args):
    return subprocess.run([sl, *args], capture_output=True, text=True)

def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)

r = run("ranks", work)
if r.returncode != 0:
    fail(r.stderr)
# The verdicts come from the rule catalog (straggler-rank, unbalanced-work).
if "(straggler-rank)" not in r.stdout or "Rank 1 reaches the collectives last, 4.00 ms a step" not in r.stdout:
    fail(r.stdout)

r = run("ranks", os.path.join(work, "rank1.json"), os.path.join(work, "rank0.json"), "--format", "json")
j = json.loads(r.stdout)
if j["straggler"] != 1 or abs(j["straggler_delay_ms_per_step"] - 4.0) > 1e-6 or j["matched_collectives"] != 4:
    fail(r.stdout)
rules = {f["rule"]: f for f in j["findings"]}
if set(rules) != {"straggler-rank", "unbalanced-work"} or abs(rules["straggler-rank"]["saving_ms"] - 4.0) > 1e-6:
    fail(r.stdout)
# Rank 1 computes 14 ms a step, rank 0 10: 2 ms above the mean of 12.
if abs(rules["unbalanced-work"]["saving_ms"] - 2.0) > 1e-6 or "Rank 1 computes 16.7% more" not in rules["unbalanced-work"]["message"]:
    fail(r.stdout)
r0 = j["ranks"][0]
if r0["rank"] != 0 or abs(r0["wait_ms"] - 16.0) > 1e-6 or abs(r0["exposed_comm_ms"] - 24.0) > 1e-6:
    fail(r.stdout)

# A balanced job: no straggler, no unbalanced work.
balanced = os.path.join(work, "balanced")
os.makedirs(balanced)
for rank in (0, 1):
    with open(os.path.join(balanced, f"rank{rank}.json"), "w") as f:
        json.dump(trace(rank, 4000.0), f)
r = run("ranks", balanced)
if r.returncode != 0 or "Straggler: none" not in r.stdout or "Findings (0)" not in r.stdout:
    fail(r.stdout + r.stderr)

# One trace, or the same rank twice: one clear line and exit 1.
for args in ((os.path.join(work, "rank0.json"),), (os.path.join(work, "rank0.json"), os.path.join(work, "rank0.json"))):
    r = run("ranks", *args)
    if r.returncode != 1 or r.stdout or len(r.stderr.strip().splitlines()) != 1:
        fail(f"{args}: rc {r.returncode}, {r.stderr!r}")
print("ranks: all checks passed")
