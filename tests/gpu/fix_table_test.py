#!/usr/bin/env python3
"""fix_table.py on made-up rows (no GPU): the prediction read from the baseline's report (several
fixes at once: its combined replay), a --fix
row paired step by step with the baseline (the median ratio), the baseline's steady steps (those
within twice its fastest), packing priced a real token, and a row that did not run."""
import io
import json
import os
import sys
import tempfile
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fix_table  # noqa: E402

# Nine steps a row: steps 3-8 timed, step 9 the recorded one.
BASE = [5.0, 1.0, 4.0, 4.0, 1.0, 1.5, 4.0, 1.0, 2.0]
FIXED = [1.0, 0.5, 0.8, 0.9, 0.8, 1.2, 0.9, 0.8, 1.0]
REAL = [1000, 1100, 1200, 1300, 1400, 1500, 1600, 1700, 1800]


def write_row(work, name, seconds, real, padded):
    with open(f"{work}/logs/{name}.jsonl", "w") as f:
        for i, (s, r, p) in enumerate(zip(seconds, real, padded)):
            f.write(json.dumps({"step": i + 1, "seconds": s, "real_tokens": r, "padded_tokens": p, "peak_bytes": 1 << 30}) + "\n")
    open(f"{work}/logs/{name}.log", "w").write("summary: {}\n")


def check(cond, what):
    if not cond:
        raise SystemExit(f"FAIL {what}")
    print(f"ok   {what}")


def main():
    with tempfile.TemporaryDirectory() as work:
        os.makedirs(f"{work}/logs")
        padded = [2 * r for r in REAL]
        write_row(work, "base", BASE, REAL, padded)
        write_row(work, "fixed", FIXED, REAL, padded)
        write_row(work, "packed", [1.0] * 9, [2 * r for r in REAL], [2 * r for r in REAL])
        findings = [{"rule": "non-fused-optimizer", "saving_pct": 2.5, "minor": False},
                    {"rule": "padding-waste", "saving_pct": 0.1, "minor": True}]
        json.dump({"findings": findings}, open(f"{work}/report-base.json", "w"))

        saving, how = fix_table.measured_saving(work, "base", "fixed")
        ratios = sorted(f / b for f, b in zip(FIXED[2:8], BASE[2:8]))  # 6 timed steps
        check(abs(saving - 100 * (1 - (ratios[2] + ratios[3]) / 2)) < 1e-9 and how == "paired, 6 steps", "paired median ratio over the timed steps")
        saving, how = fix_table.measured_saving(work, "base", "fixed", steady=True)  # steps 5, 6, 8 (within 2 x 1.0 s)
        check(abs(saving - 100 * (1 - 0.8)) < 1e-9 and how == "paired, 3 steps", "steady steps: those within twice the fastest")
        saving, how = fix_table.measured_saving(work, "base", "fixed", steady=True, every=True)  # steps 2, 5, 6, 8, 9 of 2-9
        ratios = sorted(f / b for f, b in zip(FIXED, BASE) if b <= 2.0)[:5]
        check(len(ratios) == 5 and abs(saving - 100 * (1 - ratios[2])) < 1e-9 and how == "paired, 5 steps",
              "every step but the first (the recorded one too), the baseline's steady ones")
        saving, how = fix_table.measured_saving(work, "base", "packed")
        base_cost = sum(BASE[2:8]) / sum(REAL[2:8])
        packed_cost = 6.0 / sum(2 * r for r in REAL[2:8])
        check(abs(saving - 100 * (1 - packed_cost / base_cost)) < 1e-9 and how == "per real token", "other batches: a real token's time")
        check(fix_table.simulated_packing({"tokens.per_s": 2166, "padding.packed_tokens_per_s": 1635}) < -32
              and fix_table.simulated_packing({"tokens.per_s": None}) is None,
              "packing: the simulator's own figure, negative where packing costs")
        gdn_findings = [{"rule": "gdn-torch-fallback", "saving_pct": 50.0}]
        pct, text = fix_table.predicted_gdn_packing(gdn_findings, {"padding.packed_after_loop_pct": 20.0})
        check(abs(pct - 60.0) < 1e-9 and "then packing 20.0%" in text, "packing after the fallback's fix: the two savings compounded")
        pct, text = fix_table.predicted_gdn_packing(gdn_findings, {})
        check(pct == 50.0 and "not predicted" in text, "packing after the fallback's fix without a chunk loop: the fallback's alone")
        pct, text = fix_table.predicted(findings, fix_table.CURES["optimizer"])
        check(pct == 2.5 and "non-fused-optimizer 2.5%" in text, "the prediction from the baseline's findings")
        check(fix_table.predicted(findings, fix_table.CURES["gdn"]) == (0.0, "not reported"), "a fix whose findings did not fire")
        combined = {"rules": ["gdn-torch-fallback", "non-fused-optimizer"], "left_out": [], "saving_ms": 50.0, "saving_pct": 57.4}
        pct, text = fix_table.predicted(findings, fix_table.CURES["all"], combined)
        check(pct == 57.4 and "together: gdn-torch-fallback + non-fused-optimizer" in text, "several fixes: the report's combined replay")
        check(fix_table.predicted(findings, fix_table.CURES["all"], {"rules": [], "saving_pct": None}) == (0.0, "not reported"),
              "no combined replay: the findings the fix cures")

        out = io.StringIO()
        sys.argv = ["fix_table.py", work, "base", "optimizer=fixed", "packing=packed", "gdn=missing"]
        with redirect_stdout(out):
            fix_table.main()
        lines = out.getvalue().splitlines()
        check(any(l.startswith("| optimizer | fixed |") and "| 2.5% |" in l for l in lines), "the table's row of a fix")
        check(any(l.startswith("| gdn | missing |") and "did not run" in l for l in lines), "a row that did not run says so")
        check_allocator_trace(work)


def check_allocator_trace(work):
    """A row whose last three steps were recorded, with the allocator's counts: the timed steps
    leave all three out, and each timed step's line gives its own allocations (the difference)."""
    with open(f"{work}/logs/alloc.jsonl", "w") as f:
        for i in range(8):
            f.write(json.dumps({"step": i + 1, "seconds": 1.0 + i, "real_tokens": 10, "padded_tokens": 10, "peak_bytes": 1 << 30,
                                "peak_reserved_bytes": 2 << 30, "device_allocs": 10 * i, "device_frees": i * i, "alloc_retries": i // 4}) + "\n")
    open(f"{work}/logs/alloc.recorded", "w").write("3\n")
    check([s["step"] for s in fix_table.timed_steps(work, "alloc")] == [3, 4, 5], "the recorded steps are not timed")
    line = fix_table.step_trace(work, "alloc")
    check("3: 3.00 s (10 mallocs, 3 frees, 0 retries, 2 GiB reserved)" in line and "5: 5.00 s (10 mallocs, 7 frees, 1 retries" in line
          and "6:" not in line, "each timed step's own allocator counts")


if __name__ == "__main__":
    main()
