#!/usr/bin/env python3
"""Writes a large Kineto trace by replicating a real one: every event of the source is repeated
COPIES times, each copy shifted in time by the source's span (plus a gap) and with its ids
(External id, correlation, flow id) offset so that links stay unique. The output keeps Kineto's
layout (one event object per block, a line break between events).

usage: make_large_trace.py SOURCE.json[.gz] OUTPUT.json --events N
"""
import argparse, gzip, json, math, sys

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("source")
    ap.add_argument("output")
    ap.add_argument("--events", type=int, default=5_000_000, help="at least this many events")
    a = ap.parse_args()
    opener = gzip.open if a.source.endswith(".gz") else open
    with opener(a.source, "rt") as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), (int, float)) and e.get("ph") != "M"]
    meta = [e for e in events if e.get("ph") == "M"]
    t0 = min(e["ts"] for e in timed)
    t1 = max(e["ts"] + e.get("dur", 0) for e in timed)
    span = (t1 - t0) + 1000.0
    max_id = 1
    for e in timed:
        args = e.get("args", {})
        for k in ("External id", "correlation"):
            if isinstance(args.get(k), int):
                max_id = max(max_id, args[k])
        if isinstance(e.get("id"), int):
            max_id = max(max_id, e["id"])
    copies = max(1, math.ceil((a.events - len(meta)) / len(timed)))
    header = {k: v for k, v in doc.items() if k != "traceEvents"}
    with open(a.output, "w") as out:
        head = json.dumps(header, indent=2)[:-2]  # drop the closing brace
        out.write(head + ',\n  "traceEvents": [\n')
        first = True
        def write(e):
            nonlocal first
            out.write(("  " if first else ",\n  ") + json.dumps(e))
            first = False
        for e in meta:
            write(e)
        for c in range(copies):
            shift, off = c * span, c * (max_id + 1)
            for e in timed:
                e2 = dict(e)
                e2["ts"] = round(e["ts"] + shift, 3)
                if "args" in e:
                    args = dict(e["args"])
                    for k in ("External id", "correlation"):
                        if isinstance(args.get(k), int) and args[k] > 0:
                            args[k] += off
                    e2["args"] = args
                if isinstance(e.get("id"), int):
                    e2["id"] = e["id"] + off
                write(e2)
        out.write("\n  ]\n}\n")
    print(f"wrote {a.output}: {len(meta) + copies * len(timed)} events ({copies} copies of {len(timed)})")

if __name__ == "__main__":
    sys.exit(main())
