#!/usr/bin/env python3
"""A GPU-bound training job whose host runs ahead of the GPU, with its own per-step timer, for the
advisor's checks (tests/gpu/advisor_checks.sh).

usage: mlp_job.py [--steps N] [--blocks B] [--hidden H] [--ffn F] [--batch B] [--seq L]
                  [--torch-profile TRACE.json.gz] [--timer OUT.json] [--device cuda|cpu]

B blocks of Linear(H, F) -> GELU -> Linear(F, H) with residuals, bf16, on a [batch, seq, H] input,
fused AdamW; the defaults are 8 blocks of 4096/16384 on 16 x 1024 tokens: about 2.2 TFLOP a GEMM, 48
GEMMs a step, GPU-bound (the host queues a step's few hundred kernels in a few milliseconds). With
--hidden 256 --ffn 1024 --batch 2 --seq 64 the same job is launch-bound (tiny kernels).

No synchronisation inside the loop: each step runs inside record_function("sightline.step N")
(torch.profiler and Sightline's op bridge both record it), and the job's own timer is a CUDA event
recorded at each step boundary, read once after the loop (the GPU's clock: what each step took on
the GPU, back to back). With --torch-profile the whole loop runs under torch.profiler
(activities CPU and CUDA) and the trace is written there. Prints one JSON line, and writes it to
--timer: {"step_ms": [...], "host_ms": [...], "total_s": ...}: step_ms from the events, host_ms
the host's own time between step starts (shorter than step_ms when the host runs ahead).
"""
import argparse
import json
import os
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=6)
ap.add_argument("--blocks", type=int, default=8)
ap.add_argument("--hidden", type=int, default=4096)
ap.add_argument("--ffn", type=int, default=16384)
ap.add_argument("--batch", type=int, default=16)
ap.add_argument("--seq", type=int, default=1024)
ap.add_argument("--torch-profile", default="")
ap.add_argument("--timer", default="")
ap.add_argument("--device", default="cuda")
a = ap.parse_args()

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from step_timer import StepTimer  # noqa: E402

torch.manual_seed(0)
dev = torch.device(a.device)
dtype = torch.bfloat16


class Block(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.up = nn.Linear(h, f, bias=False)
        self.down = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(x)))


model = nn.Sequential(*[Block(a.hidden, a.ffn) for _ in range(a.blocks)]).to(dev, dtype)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")
x = torch.randn(a.batch, a.seq, a.hidden, device=dev, dtype=dtype)
cuda = dev.type == "cuda"


def run(steps):
    timer, host = StepTimer(cuda), [time.perf_counter()]
    timer.mark()
    losses = []
    for i in range(steps):
        with torch.profiler.record_function(f"sightline.step {i + 1}"):
            loss = model(x).float().pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses.append(loss.detach())
        timer.mark()
        host.append(time.perf_counter())
    return timer.step_ms(), [(host[i + 1] - host[i]) * 1e3 for i in range(steps)], [float(l) for l in losses]


start = time.perf_counter()
if a.torch_profile:
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
    with torch.profiler.profile(activities=acts) as prof:
        step_ms, host_ms, losses = run(a.steps)
    prof.export_chrome_trace(a.torch_profile)
else:
    step_ms, host_ms, losses = run(a.steps)
result = {"step_ms": step_ms, "host_ms": host_ms, "total_s": time.perf_counter() - start, "loss": losses[-1]}
line = json.dumps(result)
print(line, flush=True)
if a.timer:
    with open(a.timer, "w") as f:
        f.write(line + "\n")
