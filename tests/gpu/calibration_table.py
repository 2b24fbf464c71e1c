#!/usr/bin/env python3
"""The calibration table of docs/rules.md from a calibration_job.py run: for each pair, the saving
the advisor predicted from the "before" trace (`sightline report --format json`) against the saving
measured by the job's own timer (median step time, before and after, both without a profiler).

usage: calibration_table.py SIGHTLINE DIR   (DIR holds pairs.jsonl and the traces)
"""
import json
import os
import subprocess
import sys

RULES = {"foreach_adamw": ["non-fused-optimizer"], "forloop_adamw": ["non-fused-optimizer"], "fp32": ["fp32-gemm"],
         "eager_attention": ["attention-not-flash"], "slow_loader": ["dataloader-stall"], "host_sync": ["host-sync"],
         "padding": ["padding-waste"], "compile": ["elementwise-storm", "launch-bound"]}
sightline, folder = sys.argv[1:3]
runs = {}
for line in open(os.path.join(folder, "pairs.jsonl")):
    r = json.loads(line)
    runs[(r["pair"], r["role"])] = r
print("| pair | rule | predicted saving (range) | measured saving | predicted / measured | within 25% | range holds it | uncertainty stated |")
print("|---|---|---:|---:|---:|:---:|:---:|:---:|")
for pair, rules in RULES.items():
    before, after = runs.get((pair, "before")), runs.get((pair, "after"))
    if not before or not after:
        print(f"| {pair} | | run missing | | | | | |")
        continue
    measured = (before["step_ms"] - after["step_ms"]) / before["step_ms"] * 100
    trace = before["trace"]
    if not os.path.exists(trace):  # the traces read back elsewhere (calibration-traces.tgz unpacked beside pairs.jsonl)
        trace = os.path.join(folder, os.path.basename(trace))
    report = json.loads(subprocess.run([sightline, "report", trace, "--format", "json"], check=True,
                                       capture_output=True, text=True).stdout)
    step = report["metrics"]["step.time_ms"]
    for rule in rules:
        f = next((x for x in report["findings"] if x["rule"] == rule), None)
        if f is None:
            print(f"| {pair} | {rule} | did not fire | {measured:.1f}% ({before['step_ms']:.1f} -> {after['step_ms']:.1f} ms) | | | | |")
            continue
        rng, held = "", "no range"
        if f.get("saving_low_ms") is not None:
            low, high = f["saving_low_ms"] / step * 100, f["saving_high_ms"] / step * 100
            rng = f" ({low:.1f} to {high:.1f}%)"
            held = "yes" if low <= measured <= high else "no"
        ratio = f["saving_pct"] / measured if measured > 0 else float("nan")
        within = "yes" if abs(ratio - 1) <= 0.25 else "no"
        stated = "yes" if f.get("uncertainty") else "no"
        print(f"| {pair} | {rule} | {f['saving_pct']:.1f}%{rng} | {measured:.1f}% ({before['step_ms']:.1f} -> {after['step_ms']:.1f} ms) "
              f"| {ratio:.2f} | {within} | {held} | {stated} |")
