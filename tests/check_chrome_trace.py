#!/usr/bin/env python3
"""Browser-free check of a Chrome trace-event JSON file (what `sightline export` writes): strict
JSON (no NaN, valid UTF-8), every event with its fields, every duration non-negative, every flow
with exactly one start and one end, each end bound to a slice on its track (a start inside a slice
of its thread, an end with "bp": "e" inside a slice of its track), counters numeric, instants scoped.

With --same-report SOURCE.json EXPORT.json (two `sightline report --format json` outputs, of the
source trace and of its export) it also checks that the report's tables, steps, metrics and
findings are the same.

usage: check_chrome_trace.py TRACE.json[.gz] [--same-report A.json B.json]
Exit status 0 when every check passes; 1 with the failures listed otherwise.
"""
import argparse, bisect, gzip, json, math, sys
from collections import defaultdict

def reject_constant(name):
    raise ValueError(f"non-standard JSON constant {name}")

def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        text = f.read().decode("utf-8")  # strict: invalid UTF-8 raises
    return json.loads(text, parse_constant=reject_constant)

def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

class Tracks:
    """Per (pid, tid): slice starts sorted, with the running maximum of their ends."""
    def __init__(self, slices):
        self.by_track = {}
        for key, items in slices.items():
            items.sort()
            starts, reach, top = [], [], -math.inf
            for start, end in items:
                top = max(top, end)
                starts.append(start)
                reach.append(top)
            self.by_track[key] = (starts, reach)

    def inside(self, key, ts):
        if key not in self.by_track:
            return False
        starts, reach = self.by_track[key]
        i = bisect.bisect_right(starts, ts) - 1
        return i >= 0 and reach[i] >= ts

def check_events(events, errors):
    counts = defaultdict(int)
    slices, flows = defaultdict(list), defaultdict(list)
    for n, e in enumerate(events):
        if not isinstance(e, dict) or not isinstance(e.get("ph"), str):
            errors.append(f"event {n}: not an object with a phase")
            continue
        ph = e["ph"]
        counts[ph] += 1
        if ph == "M":
            continue
        if not is_num(e.get("ts")) or "pid" not in e or "tid" not in e:
            errors.append(f"event {n} ({ph}): ts, pid or tid missing")
            continue
        key = (str(e["pid"]), str(e["tid"]))
        if ph == "X":
            if not is_num(e.get("dur")) or e["dur"] < 0 or not isinstance(e.get("name"), str):
                errors.append(f"event {n}: a slice without a name or with a negative duration: {e.get('dur')}")
            else:
                slices[key].append((e["ts"], e["ts"] + e["dur"]))
        elif ph in "stf":
            flows[(e.get("cat"), e.get("id"))].append((ph, key, e["ts"], e.get("bp")))
        elif ph == "C":
            args = e.get("args")
            if not isinstance(args, dict) or not args or not all(is_num(v) for v in args.values()):
                errors.append(f"event {n}: a counter without numeric values")
        elif ph in "iI" and e.get("s", "t") not in ("g", "p", "t"):
            errors.append(f"event {n}: an instant with scope {e.get('s')!r}")
    return counts, Tracks(slices), flows

def check_flows(flows, tracks, errors):
    for (cat, fid), points in flows.items():
        phases = sorted(p[0] for p in points)
        if phases != ["f", "s"]:
            errors.append(f"flow {cat} {fid}: ends {phases}, want one start and one end")
            continue
        for ph, key, ts, bp in points:
            if ph == "f" and bp != "e":
                errors.append(f"flow {cat} {fid}: its end does not bind to the enclosing slice")
            elif not tracks.inside(key, ts):
                errors.append(f"flow {cat} {fid}: its {'start' if ph == 's' else 'end'} at {ts} is in no slice of track {key}")
    return len(flows)

def same_report(a_path, b_path, errors):
    a, b = (json.load(open(p)) for p in (a_path, b_path))
    keyed = {"ops": ("name", "kind"), "kernel_classes": ("class",), "kernels": ("name", "kind")}
    for section in ("ops", "kernel_classes", "kernels", "totals", "steps", "metrics", "findings", "communication"):
        x, y = a.get(section), b.get(section)
        if section in keyed:
            order = lambda rows: sorted(rows, key=lambda r: tuple(str(r[k]) for k in keyed[section]))
            x, y = order(x or []), order(y or [])
        if x != y:
            errors.append(f"report section '{section}' differs between {a_path} and {b_path}")

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--same-report", nargs=2, metavar=("SOURCE_REPORT", "EXPORT_REPORT"))
    a = ap.parse_args()
    errors = []
    try:
        doc = load(a.trace)
    except (ValueError, UnicodeDecodeError, OSError) as e:
        print(f"{a.trace}: not valid JSON: {e}")
        return 1
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        print(f"{a.trace}: no traceEvents list")
        return 1
    counts, tracks, flows = check_events(events, errors)
    n_flows = check_flows(flows, tracks, errors)
    if a.same_report:
        same_report(*a.same_report, errors)
    print(f"{a.trace}: {len(events)} events ({counts['X']} slices, {n_flows} flows, {counts['C']} counter values, "
          f"{counts['i']} instants, {counts['M']} metadata)")
    for e in errors[:20]:
        print("  " + e)
    if errors:
        print(f"FAILED: {len(errors)} problem(s)")
        return 1
    print("chrome trace OK" + (", same report" if a.same_report else ""))
    return 0

if __name__ == "__main__":
    sys.exit(main())
