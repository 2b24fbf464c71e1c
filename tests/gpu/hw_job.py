#!/usr/bin/env python3
"""Microbenchmarks for hardware sampling (tests/gpu/hw_checks.sh), each a few "train_step" ranges
of one kind of GPU work, so that `sightline run --hw` shows per step and per kernel class what the
counters say about it:

  bf16-gemm   8192^3 bf16 matmuls (tensor pipes busy)
  fp32-gemm   8192^3 fp32 matmuls with TF32 off (CUDA cores: tensor pipes idle)
  one-block   torch.cuda._sleep: one thread of one block spinning (the GPU "busy", one SM active)
  copy        4 GiB device-to-device copies (DRAM near its ceiling)
  mixed       a GEMM and a chain of elementwise ops (the job whose cost --hw adds is measured)

Prints one line: the mode, steps, and the wall time of the measured steps (after warm-up, with the
GPU synchronised), which hw_checks.sh compares across runs with and without --hw.

usage: hw_job.py MODE [--steps N] [--warmup N]
"""
import argparse, time

import torch


def work(mode):
    if mode in ("bf16-gemm", "fp32-gemm"):
        dtype = torch.bfloat16 if mode == "bf16-gemm" else torch.float32
        a = torch.randn(8192, 8192, device="cuda", dtype=dtype)
        b = torch.randn(8192, 8192, device="cuda", dtype=dtype)
        return lambda: [torch.matmul(a, b) for _ in range(20 if mode == "bf16-gemm" else 2)]
    if mode == "one-block":
        khz = getattr(torch.cuda.get_device_properties(0), "clock_rate", 1_980_000)  # H200: 1.98 GHz
        cycles = int(khz * 1000 * 0.05)  # about 50 ms
        return lambda: torch.cuda._sleep(cycles)
    if mode == "copy":
        src = torch.empty(4 << 30, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        return lambda: [dst.copy_(src) for _ in range(5)]
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)

    def mixed():
        y = torch.matmul(a, x)
        for _ in range(50):
            y = torch.nn.functional.silu(y * 1.01 + 0.5)
        return y
    return mixed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["bf16-gemm", "fp32-gemm", "one-block", "copy", "mixed"])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    step = work(a.mode)
    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        with torch.autograd.profiler.record_function("train_step"):
            step()
            torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    print(f"{a.mode}: {a.steps} steps in {wall * 1e3:.1f} ms ({wall * 1e3 / a.steps:.2f} ms a step)", flush=True)


if __name__ == "__main__":
    main()
