#!/usr/bin/env python3
"""Compares a `sightline report --format json` of a mlp_job.py run with the job's own timer
(tests/gpu/advisor_checks.sh): each step's time against the job's CUDA-event step time, GPU busy,
and the findings; ends with PASS or FAIL lines for what the advisor must get right.

usage: advisor_compare.py NAME REPORT.json TIMER.json gpu-bound|launch-bound
"""
import json
import sys

name, report_path, timer_path, kind = sys.argv[1:5]
report = json.load(open(report_path))
timer = json.loads(open(timer_path).read().strip().splitlines()[-1])
steps = [s for s in report["steps"] if s["name"].startswith("sightline.step")]
print(f"== {name}: {len(steps)} steps found ({len(timer['step_ms'])} in the job)")
print(f"{'step':<18}{'report ms':>11}{'job ms':>10}{'diff':>8}{'busy':>8}{'host ahead ms':>15}  steady")
worst = 0.0
for s, job_ms in zip(steps, timer["step_ms"]):
    diff = (s["time_ms"] - job_ms) / job_ms * 100
    busy = s["gpu_busy_ms"] / s["time_ms"] * 100 if s["time_ms"] else 0
    if s["steady"]:
        worst = max(worst, abs(diff))
    print(f"{s['name']:<18}{s['time_ms']:>11.2f}{job_ms:>10.2f}{diff:>7.1f}%{busy:>7.1f}%{s.get('host_ahead_ms', 0):>15.2f}  {s['steady']}")
m = report["metrics"]
print(f"steady: step {m['step.time_ms']:.2f} ms, GPU busy {m['gpu.busy_pct']:.1f}%, idle waiting for launches "
      f"{m['idle.launch_ms']:.2f} ms, host ahead {m['host.ahead_ms']:.2f} ms")
for c in report.get("caveats", []):
    print("caveat:", c)
for f in report["findings"]:
    extra = " (minor)" if f.get("minor") else ""
    print(f"finding: [{f['severity']}] {f['rule']}: {f['saving_ms']:.2f} ms ({f['saving_pct']:.1f}%){extra}")
rules = {f["rule"] for f in report["findings"] if not f.get("minor")}
checks = []
if kind == "gpu-bound":
    checks += [("steady step times within 2% of the job's timer", worst <= 2.0),
               ("GPU busy above 95%", m["gpu.busy_pct"] > 95),
               ("no launch-bound finding", "launch-bound" not in rules)]
else:
    checks += [("a launch-bound finding", "launch-bound" in rules)]
for what, ok in checks:
    print(f"{'PASS' if ok else 'FAIL'} {name}: {what}")
