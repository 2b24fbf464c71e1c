#!/usr/bin/env python3
"""Summarises an Nsight Compute source page (--page source --csv --print-source sass) of one
kernel: instructions executed and warp-stall samples by opcode, the stall reasons' totals, and
with --phases the instructions and samples of each stretch of code between two barriers (a block
body's phases, in the order of the code) with a few telling opcodes. UNITS divides the counts
(for instance blocks x warps x chunk steps, for figures a warp a step).
Usage: gdn_sass_mix.py SASS.csv [UNITS] [--phases]"""
import argparse
import csv
import signal
from collections import Counter

TELLING = ("HMMA", "LDS", "STS", "LDG", "STG", "LDGSTS", "MUFU.RCP", "IABS")


def number(x):
    try:
        return int(x)
    except ValueError:
        return 0


def opcode(source):
    words = source.split()
    if not words:
        return ""
    return (words[1] if words[0].startswith("@") and len(words) > 1 else words[0]).split(".")[0]


# The page's first table (ncu prints the kernel's table again after it, header and all).
def read(path):
    rows = list(csv.reader(open(path)))
    head = rows[1]
    table = []
    for r in rows[2:]:
        if r == head:
            break
        if len(r) == len(head):
            table.append(r)
    return head, table


def mix(head, data, units):
    samples, executed, source = head.index("# Samples"), head.index("Instructions Executed"), head.index("Source")
    total_s = sum(number(r[samples]) for r in data) or 1
    total_e = sum(number(r[executed]) for r in data) or 1
    print(f"instructions executed (warp level) {total_e:,}, stall samples {total_s:,}")
    print(f"per unit of work: {total_e / units:,.0f}")
    by_e, by_s = Counter(), Counter()
    for r in data:
        by_e[opcode(r[source])] += number(r[executed])
        by_s[opcode(r[source])] += number(r[samples])
    for op, n in by_e.most_common(20):
        print(f"{op:10s} {n:14,d} {100 * n / total_e:5.1f}%   stall samples {100 * by_s[op] / total_s:5.1f}%")
    for k in [h for h in head if h.startswith("stall_") and "Not Issued" not in h]:
        n = sum(number(r[head.index(k)]) for r in data)
        if n:
            print(f"{k:28s} {100 * n / total_s:5.1f}%")


def phases(head, data, units):
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
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet when read through head
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("units", nargs="?", type=float, default=1.0)
    parser.add_argument("--phases", action="store_true")
    args = parser.parse_args()
    head, data = read(args.csv)
    mix(head, data, args.units)
    if args.phases:
        phases(head, data, args.units)


if __name__ == "__main__":
    main()
