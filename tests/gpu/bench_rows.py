#!/usr/bin/env python3
"""The benchmark rows of fused_trainer_checks.sh as one Markdown table.

Each row ran STEPS timed steps and one or more recorded by `sightline run --steps L:M` (L = STEPS +
1; WORK/logs/NAME.recorded holds how many when more than one). Its figures come from the trainer's
per-step log over steps 3..STEPS (the first two warm up the allocator and the kernels; the recorded
steps are left out): real tokens/s, padded tokens/s, padding efficiency, 6N-MFU (the trainer's summary gives 6N/peak as mfu_6n over real tokens/s), peak memory,
median step; kernels and launches a step from the report of the recorded steps.

usage: bench_rows.py WORK NAME...   (WORK/logs/NAME.jsonl, WORK/logs/NAME.log, WORK/report-NAME.json)
"""
import json
import os
import statistics
import sys


def recorded(work, name):
    """How many last steps of the row `sightline run` recorded (WORK/logs/NAME.recorded; 1 without it)."""
    try:
        return max(1, int(open(f"{work}/logs/{name}.recorded").read()))
    except (OSError, ValueError):
        return 1


def all_steps(work, name):
    """The row's per-step log (WORK/logs/NAME.jsonl), every step."""
    return [json.loads(l) for l in open(f"{work}/logs/{name}.jsonl")]


def timed_steps(work, name):
    """The row's per-step log without its two warm-up steps and its recorded ones."""
    steps = all_steps(work, name)
    rec = recorded(work, name)
    return steps[2:-rec] or steps[:-rec]


def row(work, name):
    summary = next((json.loads(l.split("summary:", 1)[1]) for l in open(f"{work}/logs/{name}.log") if l.startswith("summary:")), None)
    timed = timed_steps(work, name)
    seconds = sum(s["seconds"] for s in timed)
    real = sum(s["real_tokens"] for s in timed)
    padded = sum(s["padded_tokens"] for s in timed)
    out = {
        "name": name,
        "steps": f"{timed[0]['step']}-{timed[-1]['step']}",
        "real_tps": real / seconds,
        "padded_tps": padded / seconds,
        "efficiency": real / padded,
        "step_s": statistics.median(s["seconds"] for s in timed),
        "peak_gib": max(s["peak_bytes"] for s in timed) / 2**30,
        "mfu_6n": float("nan"),
        "kernels": float("nan"),
        "launches": float("nan"),
    }
    if summary and summary.get("mfu_6n") and summary.get("real_tokens_per_s"):
        out["mfu_6n"] = 100 * summary["mfu_6n"] / summary["real_tokens_per_s"] * out["real_tps"]
    report = f"{work}/report-{name}.json"
    if os.path.exists(report):
        metrics = json.load(open(report)).get("metrics", {})
        out["kernels"] = metrics.get("kernels.count") or float("nan")
        out["launches"] = metrics.get("launches.count") or float("nan")
    return out


def main():
    work, names = sys.argv[1], sys.argv[2:]
    print("| row | steps | real tok/s | padded tok/s | padding eff. | 6N-MFU | median step s | peak GiB | kernels/step | launches/step |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in names:
        try:
            r = row(work, name)
        except (OSError, ValueError, KeyError, IndexError, ZeroDivisionError) as e:
            print(f"| {name} | did not run: {type(e).__name__} {e} |")
            continue
        print(f"| {r['name']} | {r['steps']} | {r['real_tps']:,.0f} | {r['padded_tps']:,.0f} | {r['efficiency']:.3f} | {r['mfu_6n']:.1f}% | "
              f"{r['step_s']:.3f} | {r['peak_gib']:.1f} | {r['kernels']:,.0f} | {r['launches']:,.0f} |")


if __name__ == "__main__":
    main()
