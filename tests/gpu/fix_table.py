#!/usr/bin/env python3
"""Each fix's saving as the advisor predicted it against what the fix measurably saved.

The prediction: the findings of the report on the baseline row's recorded steps (report-BASE.json,
from fused_trainer_checks.sh's FIXES section), each finding's saving_pct of that step. The
measurement: the same data with one fix applied (a row the trainer ran with --fix, or packed
batches). Where the fix keeps the batches (every --fix row: the same real tokens each step), step k
of the fix's row is paired with step k of the baseline's and the saving is 1 - the median of their
time ratios over the timed steps (robust to a step that one process spends growing its memory);
packing changes the batches, so its saving is that of the time per real token over the timed steps.
A fix that cures several findings is set against their summed prediction.

usage: fix_table.py WORK BASE FIX=ROW...   (e.g. gdn=bench-naive-padded-4096-gdn)
(gdn+packing: the fallback's fix on packed batches, against its prediction followed by packing's
once the chunk loop is gone)
"""
import json
import statistics
import sys

from bench_rows import all_steps, recorded, row, timed_steps

# The findings each fix cures (rules/catalog), by the fix's name on the command line.
CURES = {
    "gdn": ["gdn-torch-fallback", "causal-conv1d-missing"],
    "elementwise": ["elementwise-storm"],
    "optimizer": ["non-fused-optimizer"],
    "packing": ["padding-waste"],
    "all": ["launch-bound"],
    "attention": ["shape-replan"],
}


def predicted(findings, rules, combined=None):
    """The findings a fix cures, and their saving; for several fixes at once, where the baseline's
    report replayed them together (sightline report --combine, the report's "combined"), that."""
    if combined and combined.get("rules") and combined.get("saving_pct") is not None:
        rest = [f"{f['rule']} {f['saving_pct']:.1f}%" for f in findings if f["rule"] in rules]
        text = "together: " + " + ".join(combined["rules"]) + " (replayed at once)" + ("; alone " + ", ".join(rest) if rest else "")
        return combined["saving_pct"], text
    hits = [f for f in findings if f["rule"] in rules]
    if not hits:
        return 0.0, "not reported"
    text = ", ".join(f"{f['rule']} {f['saving_pct']:.1f}%{' (minor)' if f.get('minor') else ''}" for f in hits)
    return sum(f["saving_pct"] for f in hits), text


def simulated_packing(metrics):
    """The batching simulator's own figure for packed rows, a real token's time saved in percent
    (negative where packing costs, which a finding's saving, never below zero, does not show), or
    None where the report has no prediction."""
    now, packed = metrics.get("tokens.per_s"), metrics.get("padding.packed_tokens_per_s")
    if not now or not packed:
        return None
    return 100 * (1 - now / packed)


def predicted_gdn_packing(findings, metrics):
    """Packing after the delta rule's fallback is replaced (the padding-waste finding's advice where
    the steps run its chunk loop): the fallback's fixes' saving, then packing's once the loop is
    gone (padding.packed_after_loop_pct) on what is left."""
    gdn, text = predicted(findings, CURES["gdn"])
    after = metrics.get("padding.packed_after_loop_pct")
    if after is None:
        return gdn, f"{text}; packing after it: not predicted (no chunk loop)"
    return 100 * (1 - (1 - gdn / 100) * (1 - after / 100)), f"{text}, then packing {after:.1f}% a real token"


def step_trace(work, name):
    """The row's timed steps as a line: each step's seconds and, where the trainer logged its caching
    allocator, the device allocations, frees and cache-flushing retries the step made."""
    steps = all_steps(work, name)
    timed = {s["step"] for s in timed_steps(work, name)}
    parts = []
    for before, s in zip([None] + steps, steps):
        if s["step"] not in timed:
            continue
        text = f"{s['step']}: {s['seconds']:.2f} s"
        if before and "device_allocs" in s and "device_allocs" in before:
            delta = {k: s[k] - before[k] for k in ("device_allocs", "device_frees", "alloc_retries")}
            text += f" ({delta['device_allocs']} mallocs, {delta['device_frees']} frees, {delta['alloc_retries']} retries," \
                f" {s['peak_reserved_bytes'] / 2**30:.0f} GiB reserved)"
        parts.append(text)
    return f"{name} steps " + "; ".join(parts)


def compared_steps(work, base, name, every=False):
    """The two rows' steps to compare: their timed ones; or (every) all but the first, the recorded
    ones too, where both rows recorded as many (the collector then weighs on both alike)."""
    if every and recorded(work, base) == recorded(work, name):
        return all_steps(work, base)[1:], all_steps(work, name)[1:]
    return timed_steps(work, base), timed_steps(work, name)


def measured_saving(work, base, name, steady=False, every=False):
    """(saving in percent, how it was measured). steady: only the baseline's steps that ran within
    twice its fastest (leaving out the steps it spent far slower, for reasons of its own); every:
    over all steps but the first (compared_steps)."""
    a, b = compared_steps(work, base, name, every)
    paired = [s["real_tokens"] for s in a] == [s["real_tokens"] for s in b]
    if steady:  # other batches (packing) keep all their steps
        fastest = min(s["seconds"] for s in a)
        kept = [i for i, s in enumerate(a) if s["seconds"] <= 2 * fastest]
        a, b = [a[i] for i in kept], [b[i] for i in kept] if paired else b
    if paired:
        ratios = [y["seconds"] / x["seconds"] for x, y in zip(a, b)]
        return 100 * (1 - statistics.median(ratios)), f"paired, {len(ratios)} steps"
    cost = lambda steps: sum(s["seconds"] for s in steps) / sum(s["real_tokens"] for s in steps)
    return 100 * (1 - cost(b) / cost(a)), "per real token"


def main():
    work, base, pairs = sys.argv[1], sys.argv[2], sys.argv[3:]
    report = json.load(open(f"{work}/report-{base}.json"))
    findings = report.get("findings", [])
    base_row = row(work, base)
    print(f"baseline {base}: {base_row['real_tps']:,.0f} real tok/s, median step {base_row['step_s']:.3f} s")
    print("| fix | row | findings it cures (predicted saving) | predicted | measured | how | measured, baseline's steady steps | how |"
          " measured, every step but the first, baseline's steady ones | how | median step s |")
    print("|---|---|---|---:|---:|---|---:|---|---:|---|---:|")
    for pair in pairs:
        fix, name = pair.split("=", 1)
        pct, text = predicted(findings, CURES.get(fix, []), report.get("combined") if fix == "all" else None)
        if fix == "gdn+packing":
            pct, text = predicted_gdn_packing(findings, report.get("metrics", {}))
        sim = simulated_packing(report.get("metrics", {})) if fix == "packing" else None
        if sim is not None and sim < pct:
            pct, text = sim, f"{text}; the batching simulator: {sim:.1f}% a real token"
        try:
            r = row(work, name)
            measured, how = measured_saving(work, base, name)
            steady, steady_how = measured_saving(work, base, name, steady=True)
            every, every_how = measured_saving(work, base, name, steady=True, every=True)
        except (OSError, ValueError, KeyError, IndexError, ZeroDivisionError) as e:
            print(f"| {fix} | {name} | {text} | {pct:.1f}% | did not run: {type(e).__name__} | - | - | - | - | - | - |")
            continue
        print(f"| {fix} | {name} | {text} | {pct:.1f}% | {measured:.1f}% | {how} | {steady:.1f}% | {steady_how} | {every:.1f}% |"
              f" {every_how} | {r['step_s']:.3f} |")
    for name in [base] + [p.split("=", 1)[1] for p in pairs]:
        try:
            print(step_trace(work, name))
        except (OSError, ValueError, KeyError):
            pass


if __name__ == "__main__":
    main()
