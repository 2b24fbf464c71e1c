#!/usr/bin/env python3
"""Turns the overhead runs' lines "NAME A:B STEP_MS..." (tests/gpu/device_checks.sh, section 4: the
measured steps of one run, steps A to B inside its profiling window) into a table: per
configuration the median step inside the window against the median of the same run's steps outside
it, that ratio's median over the runs, and Sightline's overhead as a share of torch.profiler's
with the same activities. The first step after the window is left out of the baseline (a profiler's
stop and its buffers' processing may spill into it)."""
import collections, statistics, sys

runs = collections.OrderedDict()
for line in open(sys.argv[1]):
    parts = line.split()
    try:
        first, last = (int(x) for x in parts[1].split(":"))
        ms = [float(x) for x in parts[2:]]
    except (IndexError, ValueError):
        print(line.rstrip())  # a failed run's message
        continue
    inside = ms[first - 1:last]
    outside = ms[:first - 1] + ms[last + 1:]
    runs.setdefault(parts[0], []).append((statistics.median(inside), statistics.median(outside)))

over = {k: statistics.median(i / o - 1 for i, o in v) for k, v in runs.items()}
print(f"{'configuration':28s} {'in window ms':>12s} {'around ms':>10s} {'overhead':>9s}   per run")
for k, v in runs.items():
    print(f"{k:28s} {statistics.median(i for i, _ in v):12.2f} {statistics.median(o for _, o in v):10.2f} {over[k] * 100:+8.2f}%   "
          + " ".join(f"{(i / o - 1) * 100:+.1f}%" for i, o in v))
for ours, theirs in (("sightline", "torch-profiler"), ("sightline-shapes", "torch-profiler-shapes")):
    if ours in over and theirs in over and over[theirs] > 0:
        print(f"{ours} overhead / {theirs} overhead: {over[ours] / over[theirs]:.2f}")
