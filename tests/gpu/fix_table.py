#!/usr/bin/env python3
"""Each fix's saving as the advisor predicted it against what the fix measurably saved.

The prediction: the findings of the report on the baseline row's recorded step (report-BASE.json,
from fused_trainer_checks.sh's BENCH section), each finding's saving_pct of that step. The
measurement: the same data and batches with one fix applied (a row the trainer ran with --fix, or
packed batches), time per real token over the timed steps against the baseline's (bench_rows.py
reads the rows). A fix that cures several findings is set against their summed prediction.

usage: fix_table.py WORK BASE FIX=ROW...   (e.g. gdn=bench-naive-padded-4096-gdn)
"""
import json
import sys

from bench_rows import row

# The findings each fix cures (rules/catalog), by the fix's name on the command line.
CURES = {
    "gdn": ["gdn-torch-fallback", "causal-conv1d-missing"],
    "elementwise": ["elementwise-storm"],
    "optimizer": ["non-fused-optimizer"],
    "packing": ["padding-waste"],
    "all": ["launch-bound"],
}


def predicted(findings, rules):
    hits = [f for f in findings if f["rule"] in rules]
    if not hits:
        return 0.0, "not reported"
    text = ", ".join(f"{f['rule']} {f['saving_pct']:.1f}%{' (minor)' if f.get('minor') else ''}" for f in hits)
    return sum(f["saving_pct"] for f in hits), text


def main():
    work, base, pairs = sys.argv[1], sys.argv[2], sys.argv[3:]
    findings = json.load(open(f"{work}/report-{base}.json")).get("findings", [])
    base_row = row(work, base)
    base_cost = 1.0 / base_row["real_tps"]
    print(f"baseline {base}: {base_row['real_tps']:,.0f} real tok/s, median step {base_row['step_s']:.3f} s")
    print("| fix | row | findings it cures (predicted saving) | predicted | measured | real tok/s |")
    print("|---|---|---|---:|---:|---:|")
    for pair in pairs:
        fix, name = pair.split("=", 1)
        pct, text = predicted(findings, CURES.get(fix, []))
        try:
            r = row(work, name)
        except (OSError, ValueError, KeyError, IndexError, ZeroDivisionError) as e:
            print(f"| {fix} | {name} | {text} | {pct:.1f}% | did not run: {type(e).__name__} | - |")
            continue
        measured = 100 * (1 - (1.0 / r["real_tps"]) / base_cost)
        print(f"| {fix} | {name} | {text} | {pct:.1f}% | {measured:.1f}% | {r['real_tps']:,.0f} |")


if __name__ == "__main__":
    main()
