#!/usr/bin/env python3
"""Sets beside each phase of a phase-clock table (gdn_phase_clock.h's lines on stderr) the source
that wrote it: the text at that line number of every kernel header whose line calls phase( or a
held pass's clk.note( (gdn_held_warp.h's HeldClock); the same for the sums by line (index "all"),
which hold the phases of the passes' loops too.
The instrument notes only the line, not the file; where two headers qualify both are shown, and
the phases' order tells them apart.

    phase_clock_lines.py TABLE KERNELS_DIR
"""
import pathlib
import re
import sys

ROW = re.compile(r"^phase clock: (\S+)\s+(\d+) line\s+(\d+)\s+(\d+) cycles\s+([\d.]+)%")
BY_LINE = re.compile(r"^phase clock: (\S+) by line\s+(\d+)\s+(\d+) cycles\s+([\d.]+)%")


def phase_lines(folder):
    """{line number: [(file name, text)]} of the lines that call phase( or clk.note( in the folder's headers."""
    found = {}
    for path in sorted(pathlib.Path(folder).glob("gdn*.h")):
        lines = path.read_text().splitlines()
        for number, text in enumerate(lines, 1):
            if "phase(" in text:
                found.setdefault(number, []).append((path.name, text.strip()))
            elif "clk.note(" in text: # a note times the code before it: that line's text
                before = next((t for t in reversed(lines[:number - 1]) if t.strip() and "clk.note(" not in t), "")
                found.setdefault(number, []).append((path.name, "after " + before.strip()))
    return found


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    sources = phase_lines(argv[2])
    for line in pathlib.Path(argv[1]).read_text().splitlines():
        match = ROW.match(line)
        by_line = BY_LINE.match(line)
        if by_line:
            kernel, number, cycles, share = by_line.groups()
            index = "all"
        elif match:
            kernel, index, number, cycles, share = match.groups()
        else:
            print(line)
            continue
        where = "; ".join(f"{f}: {t[:70]}" for f, t in sources.get(int(number), [])) or "?"
        print(f"{kernel:28} {index:>3} {int(cycles):9} {float(share):5.1f}%  {number:>4} {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
