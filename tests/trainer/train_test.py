#!/usr/bin/env python3
"""The tiny model trains on the CPU: on a learnable JSONL set (each example counts up from a random
start by a step of 1, 2 or 3, modulo the vocabulary) its loss must fall to under 85% of where it
started within 30 steps; a run resumed from the checkpoint continues at step 31 with the loss where
it was, not where it began; and a missing data file or a bad config gets one line and exit 1.

usage: train_test.py SIGHTLINE_TRAINER CONFIG.json WORKDIR"""
import json, os, random, shutil, subprocess, sys

trainer, config, work = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
vocab = json.load(open(config))["vocab_size"]
rng = random.Random(0)
with open(os.path.join(work, "data.jsonl"), "w") as f:
    for _ in range(48):
        start, stride, n = rng.randrange(vocab), rng.choice((1, 2, 3)), rng.randrange(40, 121)
        f.write(json.dumps({"input_ids": [(start + i * stride) % vocab for i in range(n)]}) + "\n")


def fail(why):
    print("FAIL:", why)
    sys.exit(1)


def run(*extra):
    args = [trainer, "--config", config, "--data", os.path.join(work, "data.jsonl"), "--budget", "1024", "--lr", "1e-2",
            "--warmup", "3", "--save", os.path.join(work, "ckpt"), "--log-jsonl", os.path.join(work, "log.jsonl"), *extra]
    return subprocess.run(args, capture_output=True, text=True)


p = run("--steps", "30")
if p.returncode != 0:
    fail(p.stderr)
log = [json.loads(l) for l in open(os.path.join(work, "log.jsonl"))]
if [s["step"] for s in log] != list(range(1, 31)):
    fail(f"steps logged: {[s['step'] for s in log]}")
first, last = sum(s["loss"] for s in log[:3]) / 3, sum(s["loss"] for s in log[-5:]) / 5
print(f"loss: first 3 steps {first:.3f}, last 5 steps {last:.3f}")
if not last < 0.85 * first:
    fail(f"the loss did not fall enough: {first:.3f} -> {last:.3f}")
if any(s["real_tokens"] > s["padded_tokens"] or s["padded_tokens"] > 1024 for s in log):
    fail("a batch broke the token budget")

p = run("--steps", "34", "--resume")
if p.returncode != 0:
    fail(p.stderr)
log = [json.loads(l) for l in open(os.path.join(work, "log.jsonl"))]
resumed = log[30:]
if [s["step"] for s in resumed] != [31, 32, 33, 34]:
    fail(f"resumed steps: {[s['step'] for s in resumed]}")
if not resumed[0]["loss"] < 0.9 * first:
    fail(f"the resumed run starts over: loss {resumed[0]['loss']:.3f}")
print(f"resumed at step 31 with loss {resumed[0]['loss']:.3f}")

for args in (["--config", config, "--data", os.path.join(work, "missing.jsonl")],
             ["--config", os.path.join(work, "data.jsonl"), "--synthetic", "4"]):
    p = subprocess.run([trainer, *args], capture_output=True, text=True)
    if p.returncode != 1 or len(p.stderr.strip().splitlines()) != 1:
        fail(f"{args}: rc {p.returncode}, stderr {p.stderr!r}")
print("trainer: all checks passed")
