#!/usr/bin/env python3
"""The table of tests/gpu/overhead_alternating.sh. For each configuration in DIR (NAME.log: the
job's measured steps, "END_NS MS ON"; for attach runs NAME.windows: each window's extent as
`sightline attach` printed it) every window of profiled steps is compared with the unprofiled steps
just before it (at most as many as the window has); a step straddling a window's edge belongs to
neither. Prints per configuration the number of windows, the median ratio's overhead with the
quartiles, the step time before the first window, inside the windows and between later windows,
and Sightline's overhead as a share of torch.profiler's, by both baselines.""" 
import os, re, statistics, sys

d = sys.argv[1]
EXTENT = re.compile(r"window of [0-9.]+ s \(([0-9.]+) to ([0-9.]+), seconds since the epoch\)")


def steps(name):  # [(begin_s, end_s, ms, marked_on)]
    out = []
    for line in open(os.path.join(d, name + ".log")):
        f = line.split()
        end, ms = int(f[0]) / 1e9, float(f[1])
        out.append((end - ms / 1e3, end, ms, len(f) > 2 and f[2] == "1"))
    return out


def issue_ms(name):  # the steps' CPU issue times (the log's 4th column), where the job wrote them
    return [float(f[3]) for f in (line.split() for line in open(os.path.join(d, name + ".log"))) if len(f) > 3]


SLACK_S = 0.02  # the job times a step a little outside the step range that bounds a window


def phases(rows, windows):
    """Per step: 1 profiled, 0 not, None straddling a window's edge."""
    if windows is None:
        return [1 if on else 0 for *_, on in rows]
    state = []
    for b, e, _, _ in rows:
        inside = any(wb - SLACK_S <= b and e <= we + SLACK_S for wb, we in windows)
        overlap = any(b < we - SLACK_S and e > wb + SLACK_S for wb, we in windows)
        state.append(1 if inside else (None if overlap else 0))
    return state


def ratios(rows, state):
    out, i = [], 0
    while i < len(rows):
        if state[i] != 1:
            i += 1
            continue
        j = i
        while j < len(rows) and state[j] == 1:
            j += 1
        window = [r[2] for r in rows[i:j]]
        before, k = [], i - 1
        while k >= 0 and state[k] != 1 and len(before) < len(window):
            if state[k] == 0:
                before.append(rows[k][2])
            k -= 1
        if before:
            out.append(statistics.median(window) / statistics.median(before))
        i = j
    return out


def levels(rows, state):
    """Median ms of the unprofiled steps before the first window, of the profiled steps, and of
    the unprofiled steps after the first window: a profiler that leaves cost behind between its
    windows raises the last, which is the baseline of every window but the first."""
    first = state.index(1)
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    return (med([r[2] for r, s in zip(rows[:first], state[:first]) if s == 0]), med([r[2] for r, s in zip(rows, state) if s == 1]),
            med([r[2] for r, s in zip(rows[first:], state[first:]) if s == 0]))


over, level = {}, {}
print(f"{'configuration':30s} {'windows':>7s} {'overhead':>9s}  {'quartiles':>17s}  {'ms: first off':>13s} {'on':>6s} "
      f"{'later off':>9s}   per window")
for name in ("plain", "noop-callback", "sightline", "sightline-shapes", "torch-profiler", "torch-profiler-shapes",
             "torch-profiler-cuda", "sightline-cupti-only", "sightline-ops-only", "sightline-cupti-no-sync-nvtx",
             "sightline-cupti-kernels-copies", "sightline-cupti-kernels", "sightline-cupti-api", "sightline-cupti-none",
             "sightline-cupti-runtime", "sightline-cupti-driver", "sightline-cupti-api-nomute", "sightline-cupti-only-nomute",
             "sightline-counted", "sightline-no-api"):
    if not os.path.exists(os.path.join(d, name + ".log")):
        continue
    rows = steps(name)
    wpath = os.path.join(d, name + ".windows")
    windows = [(float(m.group(1)), float(m.group(2))) for m in EXTENT.finditer(open(wpath).read())] if os.path.exists(wpath) else None
    state = phases(rows, windows)
    r = ratios(rows, state)
    if not r:
        print(f"{name:30s} no window with steps before it")
        continue
    q = statistics.quantiles(r, n=4) if len(r) > 1 else [r[0], r[0], r[0]]
    over[name] = statistics.median(r) - 1
    level[name] = levels(rows, state)
    print(f"{name:30s} {len(r):7d} {over[name] * 100:+8.2f}%  [{(q[0] - 1) * 100:+6.1f}%, {(q[2] - 1) * 100:+6.1f}%]  "
          f"{level[name][0]:13.1f} {level[name][1]:6.1f} {level[name][2]:9.1f}   " + " ".join(f"{(x - 1) * 100:+.0f}%" for x in r))
    issue = issue_ms(name)
    if len(issue) == len(rows):  # is the job GPU-bound? its CPU's issue time against the step's, off and on
        med = lambda xs: statistics.median(xs) if xs else float("nan")
        part = lambda want: (med([i for i, s in zip(issue, state) if s == want]), med([r[2] for r, s in zip(rows, state) if s == want]))
        (io, so), (i1, s1) = part(0), part(1)
        print(f"{'':30s} CPU issue time of a step: {io:.1f} of {so:.1f} ms off, {i1:.1f} of {s1:.1f} ms on")
for ours, theirs in (("sightline", "torch-profiler"), ("sightline-shapes", "torch-profiler-shapes"),
                     ("sightline-counted", "torch-profiler")):
    if ours in over and theirs in over:
        if over[theirs] > 0.02:
            print(f"{ours} overhead / {theirs} overhead: {over[ours] / over[theirs]:.2f}")
        else:
            print(f"{ours} overhead / {theirs} overhead: none ({theirs} under +2%)")
        # The same against each job's steps before its first window (no residue in that baseline,
        # but the machine's drift over the run is in it: see plain's first-off and later-off levels).
        mine, other = level[ours][1] / level[ours][0] - 1, level[theirs][1] / level[theirs][0] - 1
        if other > 0.02:
            print(f"  against the steps before the first window: {mine * 100:+.1f}% / {other * 100:+.1f}% = {mine / other:.2f}")
