#!/usr/bin/env python3
"""gdn_sass_mix.py on a made-up Nsight Compute source page (no GPU): opcodes counted under their
predicates and suffixes, shares of the instructions and of the stall samples, the stall reasons'
totals, figures divided by the units, the phases cut at each barrier, and the page's repeated
table read once."""
import io
import os
import sys
import tempfile
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gdn_sass_mix  # noqa: E402

HEAD = ["Address", "Source", "# Samples", "Instructions Executed", "stall_wait", "stall_barrier", "stall_wait (Not Issued)"]
ROWS = [  # source, samples, executed, stall_wait, stall_barrier
    ("LDS R1, [R2]", 10, 400, 6, 0),
    ("@P0 HMMA.1688.F32.TF32 R4, R8, R12, R4", 20, 200, 10, 0),
    ("BAR.SYNC.DEFER_BLOCKING 0x0", 30, 100, 0, 30),
    ("IMAD R1, R2, R3, RZ", 40, 1000, 20, 0),
    ("EXIT", 0, 300, 0, 0),
]


def check(cond, what):
    if not cond:
        raise SystemExit(f"FAIL {what}")


def run(path, units, with_phases):
    head, data = gdn_sass_mix.read(path)
    out = io.StringIO()
    with redirect_stdout(out):
        gdn_sass_mix.mix(head, data, units)
        if with_phases:
            gdn_sass_mix.phases(head, data, units)
    return out.getvalue()


def main():
    with tempfile.TemporaryDirectory() as work:
        path = f"{work}/sass.csv"
        with open(path, "w") as f:
            f.write('"Kernel Name","k(Params)",\n')
            f.write(",".join(f'"{h}"' for h in HEAD) + "\n")
            for i, (src, s, e, w, b) in enumerate(ROWS):
                f.write(f'"0x{i:x}","{src}","{s}","{e}","{w}","{b}","0"\n')
            f.write('"0x99","short row"\n')  # rows of another width are not instructions
            f.write(",".join(f'"{h}"' for h in HEAD) + "\n")  # the table again: not counted twice
            f.write('"0x0","IMAD R1, R2, R3, RZ","5","5000","0","0","0"\n')
        out = run(path, 10.0, True)
        lines = out.splitlines()
        check("instructions executed (warp level) 2,000, stall samples 100" in lines[0], f"totals: {lines[0]}")
        check("per unit of work: 200" in lines[1], f"per unit: {lines[1]}")
        imad = next(l for l in lines if l.startswith("IMAD "))
        check("50.0%" in imad and "stall samples  40.0%" in imad, f"IMAD's shares: {imad}")
        check(any(l.startswith("HMMA ") and "10.0%" in l for l in lines), "the predicated HMMA counted as HMMA")
        check(any(l.startswith("stall_wait ") and "36.0%" in l for l in lines), "stall_wait's share of the samples")
        check(not any("Not Issued" in l for l in lines), "the not-issued columns are left out")
        cuts = [l for l in lines if l.startswith("lines")]
        check(len(cuts) == 2, f"two phases (cut at the barrier): {cuts}")
        check("lines     0-    2:      70 instr/unit,      60 samples" in cuts[0], f"first phase: {cuts[0]}")
        check("HMMA=20" in cuts[0] and "LDS=40" in cuts[0], f"first phase's telling opcodes: {cuts[0]}")
        check("lines     3-    4:     130 instr/unit" in cuts[1], f"second phase: {cuts[1]}")
        check("lines" not in run(path, 10.0, False), "no phases without --phases")
    print("gdn_sass_mix: ok")


if __name__ == "__main__":
    main()
