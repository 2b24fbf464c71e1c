#!/usr/bin/env python3
"""How long the delta rule's state passes take on packed rows, by the order their blocks go out.

A list-scheduling model, not a measurement: a pass has one block a segment, value head and 32-column
tile (32 x 4 at the benchmark's heads), each taking its segment's chunk count in "chunk times"; the
GPU runs SLOTS blocks at once (132 SMs, two blocks each) and starts the next block of the launch
order whenever one ends. Rows are packed greedily to 8,192 tokens from the benchmark data's
lengths (../shared/configs/README.md: log-normal, median 1,100, sigma 0.6, clipped to [64, 8192]).
Prints the mean length of a pass over ROWS rows with the segment varying fastest in the launch
order (the kernels' order before session 28), longest segment first (their order since), and the
bound of the work (the longest segment's chunks, or the chunk times over the slots). The H200
measured the passes 21% shorter a step (docs/device-runs/2026-12-03-session28.md).

    python3 bench/gdn_pass_schedule.py [ROWS]
"""
import heapq
import math
import random
import sys

BUDGET, CHUNK, HEADS, TILES, SLOTS = 8192, 64, 32, 4, 264


def packed_rows(count, seed=0):
    rng = random.Random(seed)
    rows, row, used = [], [], 0
    while len(rows) < count:
        n = min(max(round(rng.lognormvariate(math.log(1100), 0.6)), 64), BUDGET)
        if used + n > BUDGET and row:
            rows.append(row)
            row, used = [], 0
        row.append(n)
        used += n
    return rows


def makespan(blocks):
    """Blocks' durations in launch order, each starting on the first slot free."""
    free = [0.0] * SLOTS
    end = 0.0
    for d in blocks:
        start = heapq.heappop(free)
        heapq.heappush(free, start + d)
        end = max(end, start + d)
    return end


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    before = after = bound = 0.0
    for row in packed_rows(count):
        chunks = [math.ceil(n / CHUNK) for n in row]
        per = HEADS * TILES
        before += makespan([c for _ in range(per) for c in chunks])
        after += makespan([c for c in sorted(chunks, reverse=True) for _ in range(per)])
        bound += max(max(chunks), sum(chunks) * per / SLOTS)
    before, after, bound = before / count, after / count, bound / count
    print(f"{count} packed rows: segment fastest {before:.1f} chunk times, longest segment first {after:.1f} "
          f"({100 * (1 - after / before):.1f}% shorter), bound of the work {bound:.1f}")


if __name__ == "__main__":
    main()
