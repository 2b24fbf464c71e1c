#!/usr/bin/env python3
"""A job whose kernels come from Triton (torch.compile, inductor): for checking that the collector's
default light mode counts the launches Triton's launcher makes (it finds cuLaunchKernelEx with
dlsym) and links those kernels to their ops.
usage: triton_job.py [--steps N] [--device cuda|cpu]
Prints one JSON line: the measured steps' times in ms."""
import argparse, json, time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=5)
ap.add_argument("--device", default="cuda")
a = ap.parse_args()

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.LayerNorm(2048),
                            torch.nn.Linear(2048, 512)).to(a.device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
step_fn = torch.compile(lambda x: model(x).square().mean())
x = torch.randn(64, 512, device=a.device)
for _ in range(2):  # compiles (forward and backward) before the measured steps
    step_fn(x).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
times = []
for _ in range(a.steps):
    t0 = time.perf_counter()
    with torch.profiler.record_function("train_step"):
        step_fn(x).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    if a.device == "cuda":
        torch.cuda.synchronize()
    times.append((time.perf_counter() - t0) * 1e3)
print(json.dumps({"step_ms": times}), flush=True)
