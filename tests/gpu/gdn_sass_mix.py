#!/usr/bin/env python3
"""Summarises an Nsight Compute source page (--page source --csv --print-source sass) of one
kernel: instructions executed and warp-stall samples by opcode, the stall reasons' totals, and
with --phases the instructions and samples of each stretch of code between two barriers (a block
body's phases, in the order of the code), with a few telling opcodes.
Usage: gdn_sass_mix.py SASS.csv [warps_times_units] [--phases]"""
import csv
import sys
from collections import Counter


def number(x):
    try:
        return int(x)
    except ValueError:
        return 0


TELLING = ("HMMA", "LDS", "STS", "LDG", "STG", "LDGSTS", "MUFU.RCP", "IABS")


def phases(data, head, units):
    executed, samples, source = head.index("Instructions Executed"), head.index("# Samples"), head.index("Source")
    start, n, s, ops = 0, 0, 0, Counter()
    for i, r in enumerate(data):
        n += number(r[executed])
        s += number(r[samples])
        for op in TELLING:
            if op in r[source]:
                ops[op] += number(r[executed])
        if "BAR.SYNC" in r[source] or i == len(data) - 1:
            if n / units >= 20:
                shown = " ".join(f"{op}={v / units:.0f}" for op, v in ops.items())
                print(f"lines {start:5d}-{i:5d}: {n / units:7.0f} instr/unit, {s:7d} samples  {shown}")
            start, n, s, ops = i + 1, 0, 0, Counter()


def main():
    args = [a for a in sys.argv[1:] if a != "--phases"]
    sys.argv = [sys.argv[0]] + args + (["--phases"] if len(args) + 1 < len(sys.argv) else [])
    rows = list(csv.reader(open(sys.argv[1])))
    head = rows[1]
    data = [r for r in rows[2:] if len(r) == len(head)]
    samples, executed, source = head.index("# Samples"), head.index("Instructions Executed"), head.index("Source")
    total_s = sum(number(r[samples]) for r in data) or 1
    total_e = sum(number(r[executed]) for r in data) or 1
    print(f"instructions executed (warp level) {total_e:,}, stall samples {total_s:,}")
    units = float(args[1]) if len(args) > 1 else 1.0
    print(f"per unit of work: {total_e / units:,.0f}")
    by_e, by_s = Counter(), Counter()
    for r in data:
        words = r[source].split()
        if not words:
            continue
        op = (words[1] if words[0].startswith("@") else words[0]).split(".")[0]
        by_e[op] += number(r[executed])
        by_s[op] += number(r[samples])
    for op, n in by_e.most_common(20):
        print(f"{op:10s} {n:14,d} {100 * n / total_e:5.1f}%   stall samples {100 * by_s[op] / total_s:5.1f}%")
    for k in [h for h in head if h.startswith("stall_") and "Not Issued" not in h]:
        n = sum(number(r[head.index(k)]) for r in data)
        if n:
            print(f"{k:28s} {100 * n / total_s:5.1f}%")
    if "--phases" in sys.argv:
        phases(data, head, units)


if __name__ == "__main__":
    main()
