#!/usr/bin/env python3
"""A two-process CPU job over gloo, each rank under `sightline run` as torchrun would start it
(RANK, WORLD_SIZE): one capture per rank, named by rank, that `sightline ranks` merges; rank 1
sleeps 100 ms a step before its all-reduces (well above a busy machine's scheduling delays), so it
must be named the straggler with about that delay, and every all-reduce must be matched across the
ranks. Run with --shapes, each capture must hold the job's collectives with the sizes, dtypes and
group it issued, read back from the report's communication table. (Run alone: with other jobs
starving one rank's process, that rank is the straggler; a missed timing check runs the job once
more before it fails, as does a rank that gloo's teardown aborts after it finished.)

usage: gloo_ranks_test.py SIGHTLINE TORCH_PYTHON WORKDIR
Exits 77 (skipped) when TORCH_PYTHON cannot import torch with gloo (scripts/setup.sh installs it)."""
import json, os, shutil, subprocess, sys

sl, py, work = sys.argv[1], sys.argv[2], sys.argv[3]
here = os.path.dirname(os.path.abspath(__file__))
probe = subprocess.run([py, "-c", "import torch.distributed as d; assert d.is_gloo_available()"], capture_output=True, text=True)
if probe.returncode != 0:
    print(f"skipped: {py} cannot run torch with gloo: {probe.stderr.strip()[-300:]}")
    sys.exit(77)


def fail(why):
    print("FAIL:", why)
    sys.exit(1)


steps, delay_ms = 6, 100.0


class RankFailed(Exception):
    def __init__(self, rank, code, out):
        super().__init__(f"rank {rank} failed ({code}): {out[-800:]}")
        # gloo's teardown can abort a rank that has finished its work ("terminate called without
        # an active exception" after its last line), as PyTorch's issues report for gloo's worker
        # threads at exit; seen once here, on a machine loaded by a compiler beside the tests
        self.teardown = code in (134, -6) and f"rank {rank}: {steps} steps done" in out and "terminate called without an active exception" in out


def run_job(work):
    """Both ranks under `sightline run`, then `sightline ranks`: (capture dir, names, merged db, its JSON, stdout)."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    caps = os.path.join(work, "caps")
    jobs = []
    for rank in (0, 1):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank))
        cmd = [sl, "run", "--no-import", "--shapes", "-o", caps, "--", py, os.path.join(here, "gloo_job.py"), "--store",
               os.path.join(work, "store"), "--steps", str(steps), "--slow-rank", "1", "--delay-ms", str(delay_ms)]
        jobs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = []
    for rank, job in enumerate(jobs):  # both ranks waited for before either is judged
        try:
            outs.append(job.communicate(timeout=240)[0])
        except subprocess.TimeoutExpired:
            for j in jobs:
                j.kill()
            fail(f"rank {rank} did not finish in 240 s")
    for rank, (job, out) in enumerate(zip(jobs, outs)):
        if job.returncode != 0 or f"rank {rank}: {steps} steps done" not in out:
            raise RankFailed(rank, job.returncode, out)
    names = sorted(os.listdir(caps))
    if len(names) != 2 or not names[0].endswith("-rank0.slcap") and not names[1].endswith("-rank0.slcap"):
        fail(f"expected one capture per rank, named by rank: {names}")
    if not any(n.endswith("-rank1.slcap") for n in names):
        fail(f"no rank 1 capture: {names}")
    merged = os.path.join(work, "merged.db")
    p = subprocess.run([sl, "ranks", caps, "--format", "json", "--merged", merged], capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"sightline ranks: {p.stderr}")
    return caps, names, merged, json.loads(p.stdout), p.stdout


def timing_error(r, stdout):
    """What the merged timing says against rank 1's sleep, or None where it agrees."""
    if r.get("straggler") != 1:
        return f"straggler {r.get('straggler')}, expected rank 1: {stdout}"
    delay = r["straggler_delay_ms_per_step"]
    if not 0.6 * delay_ms <= delay <= 2.5 * delay_ms:
        return f"straggler delay {delay:.1f} ms a step, expected about {delay_ms} ms"
    waited = {x["rank"]: x["wait_ms"] for x in r["ranks"]}
    if waited[0] < 0.6 * delay_ms * steps or waited[0] < 2 * waited[1]:
        return f"rank 0 should wait for rank 1: {waited}"
    return None


def job_once_more(why):
    """The job again, after a miss the machine can cause (below); any failure of it fails."""
    print(f"{why.splitlines()[0]}; running the job once more")
    try:
        return run_job(work)
    except RankFailed as again:
        fail(str(again))


# A rank that gloo's teardown aborted after it finished, or a missed timing check, runs the job
# once more, and fails on a second miss. The timing checks assume the two ranks get the CPU alike;
# on a 2-core machine a neighbour can starve one rank's process for longer than the 100 ms sleep
# (seen once in four CI runs).
try:
    caps, names, merged, r, stdout = run_job(work)
except RankFailed as e:
    if not e.teardown:
        fail(str(e))
    caps, names, merged, r, stdout = job_once_more(f"a rank aborted in its teardown after finishing ({e})")
error = timing_error(r, stdout)
if error:
    caps, names, merged, r, stdout = job_once_more(f"timing check missed ({error})")
    error = timing_error(r, stdout)
    if error:
        fail(error)
ranks = sorted(x["rank"] for x in r["ranks"])
if ranks != [0, 1]:
    fail(f"ranks merged: {ranks}")
# Four parameters all-reduced a step, then a broadcast, an all-gather and a barrier.
collectives = 4 * steps + 3
if r["matched_collectives"] != collectives:
    fail(f"matched collectives {r['matched_collectives']}, expected {collectives}")
for x in r["ranks"]:
    if x["steps"] != steps or x["collectives"] != collectives or x["compute_ms"] <= 0:
        fail(f"rank {x['rank']}: {x}")
delay = r["straggler_delay_ms_per_step"]
waited = {x["rank"]: x["wait_ms"] for x in r["ranks"]}


def report(path):
    q = subprocess.run([sl, "report", path, "--format", "json"], capture_output=True, text=True, check=True)
    return json.loads(q.stdout)


# What the job issued, per call: (collective, dtype, element size, in elements, out elements) -> calls.
issued = {("allreduce", "Float", 4, n, n): steps for n in (64 * 128, 128, 128 * 8, 8)}
issued[("broadcast", "Long", 8, 10, 10)] = 1
issued[("allgather", "BFloat16", 2, 5, 10)] = 1
issued[("barrier", "Byte", 1, 1, 1)] = 1


def check_comms(doc, where, ranks=1):
    got = {}
    for c in doc["communication"]:
        key = (c["collective"], c["dtype"], c["element_size"], c["in_elements"], c["out_elements"])
        got[key] = got.get(key, 0) + c["calls"]
        if c["group"] != "0" or c["group_desc"] != "default_pg" or c["group_size"] != 2:
            fail(f"{where}: process group {c['group']} ({c['group_desc']}) of {c['group_size']} ranks, expected 0 (default_pg) of 2: {c}")
        if c["bytes"] != max(c["in_elements"], c["out_elements"]) * c["element_size"]:
            fail(f"{where}: {c['bytes']} bytes for {c}")
        if c["timing"] != "backend_range" or c["total_us"] <= 0:
            fail(f"{where}: a gloo collective should be timed on gloo's own range: {c}")
        if c["collective"] == "barrier":
            if c["algbw_gbps"] is not None:
                fail(f"{where}: a barrier has no bandwidth: {c}")
            continue
        algbw = c["bytes"] * c["calls"] / (c["total_us"] * 1e3)
        factor = {"allreduce": 1.0, "broadcast": 1.0, "allgather": 0.5}[c["collective"]]  # NCCL's, for 2 ranks
        if abs(c["algbw_gbps"] - algbw) > 1e-9 * algbw or abs(c["busbw_gbps"] - factor * algbw) > 1e-9 * algbw:
            fail(f"{where}: bandwidth {c['algbw_gbps']} / {c['busbw_gbps']} GB/s, expected {algbw} / {factor * algbw}: {c}")
    expected = {k: v * ranks for k, v in issued.items()}
    if got != expected:
        fail(f"{where}: collectives {sorted(got.items())}, the job issued {sorted(expected.items())}")


docs = [report(os.path.join(caps, n)) for n in names]
for n, doc in zip(names, docs):
    check_comms(doc, n)
merged_doc = report(merged)
check_comms(merged_doc, "merged", ranks=2)
# The merged file holds both ranks' events, each rank's threads named by it.
each, together = sum(d["trace"]["counts"]["cpu_ops"] for d in docs), merged_doc["trace"]["counts"]["cpu_ops"]
if together != each:
    fail(f"merged file holds {together} CPU events, the ranks {each}")
import sqlite3
threads = [r[0] for r in sqlite3.connect(merged).execute("SELECT s.text FROM threads t JOIN strings s ON s.id = t.name_id")]
if not any(t.startswith("rank 0 · ") for t in threads) or not any(t.startswith("rank 1 · ") for t in threads):
    fail(f"merged threads are not named by rank: {threads}")
print(f"gloo ranks: 2 captures merged, {r['matched_collectives']} collectives matched, straggler rank 1 "
      f"at {delay:.1f} ms a step (slept {delay_ms} ms), rank 0 waited {waited[0]:.1f} ms; "
      f"{sum(issued.values())} collectives a rank read back with the sizes, dtypes and group issued")
