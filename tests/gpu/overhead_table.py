#!/usr/bin/env python3
"""Turns the overhead runs' "NAME MEDIAN_MS" lines (tests/gpu/device_checks.sh, section 4) into a
table: per configuration the median over its runs, the overhead against no profiler, and Sightline's
overhead as a share of torch.profiler's with the same activities."""
import collections, statistics, sys

runs = collections.OrderedDict()
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) == 2:
        try:
            ms = float(parts[1])
            runs.setdefault(parts[0], []).append(ms)
            continue
        except ValueError:
            pass
    print(line.rstrip())  # a failed run's message
med = {k: statistics.median(v) for k, v in runs.items()}
base = med.get("plain")
print(f"{'configuration':26s} {'median step ms':>15s} {'overhead':>9s}   runs")
for k, v in runs.items():
    over = f"{(med[k] / base - 1) * 100:+8.2f}%" if base else "        -"
    print(f"{k:26s} {med[k]:15.2f} {over}   " + " ".join(f"{x:.2f}" for x in v))
for ours, theirs in (("sightline", "torch-profiler"), ("sightline-shapes", "torch-profiler-shapes")):
    if base and ours in med and theirs in med and med[theirs] > base:
        print(f"{ours} overhead / {theirs} overhead: {(med[ours] - base) / (med[theirs] - base):.2f}")
