#!/usr/bin/env python3
"""Turns the overhead runs' lines "NAME A:B STEP_MS..." (tests/gpu/device_checks.sh, section 4: the
measured steps of one run, steps A to B inside its profiling window) into a table: per
configuration the median step inside the window against the median of the same run's steps before
it, that ratio's median over the runs, and Sightline's overhead as a share of torch.profiler's
with the same activities. The steps after the window are shown beside, not used as the baseline:
a profiler may leave some of its cost behind it (on the H200, 2026-11-29: after-window steps
slower than before-window ones for both, by up to tens of percent; Sightline has finalised CUPTI
after a window since 2026-11-30, and its after-window steps came back to the before-window level)."""
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
    before, inside, after = ms[:first - 1], ms[first - 1:last], ms[last:]
    runs.setdefault(parts[0], []).append((statistics.median(inside), statistics.median(before),
                                          statistics.median(after) if after else float("nan")))

over = {k: statistics.median(i / b - 1 for i, b, _ in v) for k, v in runs.items()}
print(f"{'configuration':28s} {'before ms':>10s} {'in window':>10s} {'after':>8s} {'overhead':>9s}   per run")
for k, v in runs.items():
    print(f"{k:28s} {statistics.median(b for _, b, _ in v):10.2f} {statistics.median(i for i, _, _ in v):10.2f} "
          f"{statistics.median(a for _, _, a in v):8.2f} {over[k] * 100:+8.2f}%   " + " ".join(f"{(i / b - 1) * 100:+.1f}%" for i, b, _ in v))
for ours, theirs in (("sightline", "torch-profiler"), ("sightline-shapes", "torch-profiler-shapes")):
    if ours in over and theirs in over and over[theirs] > 0:
        print(f"{ours} overhead / {theirs} overhead: {over[ours] / over[theirs]:.2f}")
