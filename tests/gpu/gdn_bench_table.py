#!/usr/bin/env python3
"""The per-layer delta rule benchmark of gdn_kernel_checks.sh as one table.

Reads the `gdn-bench` lines of `sightline-trainer-checks --only gdn-bench` (the trainer's kernels and
the libtorch chunk-parallel rule), then, when flash-linear-attention imports, times its
chunk_gated_delta_rule on identical shapes and lengths (q, k [1, T, 16, 128], v [1, T, 32, 128] bf16,
g fp32, beta bf16, cu_seqlens, L2 norm in the kernel; FLA forced past its Hopper refusal on
Triton < 3.7.1, so speed only: its backward's gradients are not trusted there). TFLOP/s from the
same nominal FLOP count as the C++ side (per 64-token chunk and value head 2 (3 C^2 dk + 2 C^2 dv +
3 C dk dv), forward+backward three times the forward).

With --fla-calls N (no OURS.txt) it only runs FLA's forward+backward N times on each case named by
--case (all by default), each call a step, after five warm-up calls of each case: a job for
`sightline run --steps 1:N*cases` to profile, FLA's kernels by name beside ours
(tests/gpu/gdn_by_kernel.sh).

usage: gdn_bench_table.py OURS.txt
       gdn_bench_table.py --fla-calls N [--case NAME ...]
"""
import argparse
import math
import re
import sys

CASES = {"1x8192": [8192], "8x1024": [1024] * 8, "mixed": [3001, 1500, 1199, 900, 700, 500, 300, 92]}
HK, HV, D = 16, 32, 128


def nominal_flops(lengths):
    chunks = sum(math.ceil(n / 64) for n in lengths)
    c = 64
    return chunks * HV * 2.0 * (3 * c * c * D + 2 * c * c * D + 3 * c * D * D)


def ours(path):
    rows = {}
    for line in open(path):
        m = re.match(r"gdn-bench case=(\S+) tokens=\d+ segments=\d+ impl=(\S+) fwd_ms=(\S+) fwdbwd_ms=(\S+)", line)
        if m:
            rows[(m.group(1), m.group(2))] = (float(m.group(3)), float(m.group(4)))
    return rows


def time_ms(torch, fn, label, rounds=3, reps=10):
    """The median of `rounds` rounds of `reps` calls after five warm-up calls, as the C++ side times
    (gdn_bench.cpp); the rounds printed under `label`."""
    for _ in range(5):
        fn()
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / reps)
    print(f"FLA {label} rounds ms: {' / '.join(f'{t:.3f}' for t in times)}")
    return sorted(times)[len(times) // 2]


def fla_import():
    """(torch, chunk_gated_delta_rule), or None where FLA does not import."""
    try:
        import torch
        import fla.ops.common.chunk_o as chunk_o
        chunk_o.TRITON_ABOVE_3_7_1 = True  # speed only (see above)
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    except Exception as e:  # noqa: BLE001 - any import failure means no FLA row
        print(f"FLA not importable ({type(e).__name__}: {e}); no FLA rows")
        return None
    return torch, chunk_gated_delta_rule


def fla_case(torch, rule, lengths):
    """(forward, forward+backward) calls of FLA on one case's inputs, made here."""
    t = sum(lengths)
    dev = "cuda"
    q = torch.randn(1, t, HK, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(1, t, HK, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(1, t, HV, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
    g = (-torch.rand(1, t, HV, device=dev) * 0.5).requires_grad_()
    beta = torch.rand(1, t, HV, device=dev, dtype=torch.bfloat16).requires_grad_()
    cu = torch.tensor([0] + [sum(lengths[: i + 1]) for i in range(len(lengths))], device=dev, dtype=torch.long)
    dy = torch.randn(1, t, HV, D, device=dev, dtype=torch.bfloat16)

    def run():
        # transformers repeats the key heads to the value heads before calling FLA; do the same
        qq, kk = (x.repeat_interleave(HV // HK, dim=2) for x in (q, k))
        return rule(qq, kk, v, g=g, beta=beta, cu_seqlens=cu, use_qk_l2norm_in_kernel=True)[0]

    def fwd():
        with torch.no_grad():
            run()

    def both():
        for x in (q, k, v, g, beta):
            x.grad = None
        run().backward(dy)

    return fwd, both


def fla_rows():
    found = fla_import()
    if not found:
        return {}
    torch, rule = found
    rows = {}
    torch.manual_seed(3)
    for name, lengths in CASES.items():
        fwd, both = fla_case(torch, rule, lengths)
        try:
            rows[(name, "fla")] = (time_ms(torch, fwd, f"{name} fwd"), time_ms(torch, both, f"{name} fwd+bwd"))
        except Exception as e:  # noqa: BLE001
            print(f"FLA {name}: {type(e).__name__}: {e}")
    return rows


def fla_calls(calls, cases):
    """FLA's forward+backward `calls` times on each case, each call inside a `sightline.step` range
    (docs/metrics.md's step convention), after five warm-up calls of every case outside any range,
    so that `sightline run --steps 1:N` records none of Triton's compiling and autotuning: 0, or 1
    where FLA does not import."""
    found = fla_import()
    if not found:
        return 1
    torch, rule = found
    torch.manual_seed(3)
    runs = {name: fla_case(torch, rule, CASES[name])[1] for name in cases}
    for both in runs.values():
        for _ in range(5):
            both()
    torch.cuda.synchronize()
    for name, both in runs.items():
        for _ in range(calls):
            with torch.profiler.record_function("sightline.step"):
                both()
        torch.cuda.synchronize()
        print(f"FLA {name}: {calls} calls of forward+backward, each a step, after 5 warm-up calls")
    return 0


def main():
    ap = argparse.ArgumentParser(description="the per-layer delta rule benchmark as one table")
    ap.add_argument("ours", nargs="?", help="sightline-trainer-checks --only gdn-bench's output")
    ap.add_argument("--fla-calls", type=int, help="only run FLA's forward+backward this many times a case")
    ap.add_argument("--case", action="append", choices=list(CASES), help="with --fla-calls: the cases (all by default)")
    a = ap.parse_args()
    if a.fla_calls is not None:
        if a.fla_calls < 1:
            ap.error("--fla-calls must be at least 1")
        return fla_calls(a.fla_calls, a.case or list(CASES))
    if not a.ours:
        ap.error("OURS.txt or --fla-calls is needed")
    rows = ours(a.ours)
    rows.update(fla_rows())
    print("| case | impl | fwd ms | fwd TFLOP/s | fwd+bwd ms | fwd+bwd TFLOP/s | fwd+bwd time / kernels' |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, lengths in CASES.items():
        flops = nominal_flops(lengths)
        base = rows.get((name, "kernels"))
        for impl in ("kernels", "kernels-plain", "libtorch", "fla"):
            if (name, impl) not in rows:
                continue
            fwd, both = rows[(name, impl)]
            ratio = f"{both / base[1]:.2f}" if base else "-"
            print(f"| {name} | {impl} | {fwd:.3f} | {flops / fwd * 1e-9:.1f} | {both:.3f} | {3 * flops / both * 1e-9:.1f} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
