#!/usr/bin/env python3
"""The reference trainer profiled by Sightline on the CPU, its annotations read back:
1. `sightline run -- sightline-trainer ...`: the capture holds every train_step; the steady-state
   real and padded tokens per step equal the trainer's own log (its sightline.batch ranges); the
   rules flag the padding and the Gated DeltaNet torch fallback the trainer runs on purpose.
2. `sightline attach PID --steps 3` on the trainer started dormant: the window holds exactly 3
   train_step steps with their tokens, and the trainer runs on to its end.

usage: profile_test.py SIGHTLINE SIGHTLINE_TRAINER COLLECTOR CONFIG.json WORKDIR"""
import json, os, shutil, subprocess, sys, time

sl, trainer, collector, config, work = sys.argv[1:6]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(os.path.join(work, "run"), mode=0o700)


def fail(why):
    print("FAIL:", why)
    sys.exit(1)


def report(path):
    p = subprocess.run([sl, "report", path, "--format", "json"], capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"report {path}: {p.stderr}")
    return json.loads(p.stdout)


data = ["--config", config, "--synthetic", "32", "--median-len", "96", "--max-len", "256", "--budget", "1024"]
log = os.path.join(work, "log.jsonl")
p = subprocess.run([sl, "run", "--no-import", "-o", os.path.join(work, "caps"), "--", trainer, *data, "--steps", "6",
                    "--log-jsonl", log], capture_output=True, text=True)
if p.returncode != 0:
    fail(p.stdout + p.stderr)
caps = [f for f in os.listdir(os.path.join(work, "caps")) if f.endswith(".slcap")]
if len(caps) != 1:
    fail(f"captures: {caps}")
r = report(os.path.join(work, "caps", caps[0]))
steps = r["steps"]
if [s["name"] for s in steps] != ["train_step"] * 6:
    fail(f"steps: {[s['name'] for s in steps]}")
logged = [json.loads(l) for l in open(log)]
steady = [logged[i] for i, s in enumerate(steps) if s["steady"]]
m = r["metrics"]
real = sum(s["real_tokens"] for s in steady) / len(steady)
padded = sum(s["padded_tokens"] for s in steady) / len(steady)
if abs(m["tokens.real"] - real) > 1e-6 or abs(m["tokens.padded"] - padded) > 1e-6:
    fail(f"tokens: report {m['tokens.real']}/{m['tokens.padded']}, trainer {real}/{padded}")
# The optimizer step is a range named as PyTorch names it (the name the optimizer metrics and rule
# look for), recorded once a step (JSON reports hold every op row).
optimizer = [o for o in r["ops"] if o["name"] == "Optimizer.step#AdamW.step"]
if [o["calls"] for o in optimizer] != [6]:
    fail(f"optimizer step ranges: {optimizer}")
rules = {f["rule"] for f in r["findings"]}
if not {"padding-waste", "gdn-torch-fallback"} <= rules:
    fail(f"findings: {sorted(rules)}")
print(f"run: 6 steps; steady real/padded tokens a step {real:.0f}/{padded:.0f} as the trainer logged; "
      f"padding efficiency {m['padding.efficiency']:.3f}; findings {sorted(rules)}")

env = dict(os.environ, SIGHTLINE_DORMANT="1", SIGHTLINE_OUTPUT=os.path.join(work, "attach"), LD_PRELOAD=collector,
           XDG_RUNTIME_DIR=os.path.join(work, "run"))
job = subprocess.Popen([trainer, *data, "--steps", "60"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
sock = os.path.join(work, "run", "sightline", f"{job.pid}.sock")
for _ in range(200):
    if os.path.exists(sock):
        break
    time.sleep(0.05)
else:
    job.kill()
    fail("the dormant trainer has no control socket")
a = subprocess.run([sl, "attach", str(job.pid), "--steps", "3", "-o", os.path.join(work, "window.db")],
                   capture_output=True, text=True, timeout=120, env=dict(os.environ, XDG_RUNTIME_DIR=os.path.join(work, "run")))
out, _ = job.communicate(timeout=240)
if a.returncode != 0:
    fail(f"attach: {a.stderr}")
if job.returncode != 0 or "step 60/60" not in out:
    fail(f"the trainer did not run to its end ({job.returncode}): {out[-500:]}")
w = report(os.path.join(work, "window.db"))
if [s["name"] for s in w["steps"]] != ["train_step"] * 3:
    fail(f"window steps: {[s['name'] for s in w['steps']]}")
if not w["metrics"].get("tokens.real", 0) > 0:
    fail("the window has no token annotations")
print(f"attach: a window of 3 train_step steps, {w['metrics']['tokens.real']:.0f} real tokens a step; the trainer ran on to step 60")
