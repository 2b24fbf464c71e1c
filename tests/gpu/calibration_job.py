#!/usr/bin/env python3
"""Before/after pairs for calibrating the advisor's savings (docs/rules.md, "Calibration"), all in
one process: for each pair, one change to one model, the "before" run's steps timed and recorded by
torch.profiler (the advisor predicts the saving from that trace), and both runs' steps timed without
a profiler (the measured saving).

usage: calibration_job.py --out DIR [--pairs a,b,...] [--device cuda|cpu] [--small]

The model: 8 pre-norm transformer blocks (hand-written RMSNorm, causal attention, SwiGLU MLP) of
hidden 1024, 8 heads of 128, MLP 2816, on 4 x 1024 tokens, bf16, fused AdamW, from random inputs.
The pairs (before -> after; the rule that should price it):
  foreach_adamw    AdamW(foreach=True) -> AdamW(fused=True)           non-fused-optimizer
  forloop_adamw    AdamW(foreach=False) -> AdamW(fused=True)          non-fused-optimizer
  fp32             fp32 weights and inputs, TF32 off -> bf16          fp32-gemm
  eager_attention  matmul + masked softmax + matmul -> SDPA (flash)    attention-not-flash
  slow_loader      DataLoader, 30 ms collate, no workers -> 2 workers  dataloader-stall
  host_sync        loss.item() after the forward -> none              host-sync
  padding          MLP-only blocks on 4 rows padded to 1024 (2,425 real tokens) -> one packed row
                                                                      padding-waste
  compile          eager -> torch.compile(model)                       elementwise-storm, launch-bound
Timing: each step between CUDA events (no synchronisation in the loop), 3 warm-up steps, the median
of 10. Profiling: torch.profiler.schedule(wait=0, warmup=1, active=3, repeat=1) over 4 more steps
(ProfilerStep#N), CPU and CUDA activities, exported to DIR/NAME.json.gz.
Writes DIR/pairs.jsonl: one line a run {"pair", "role", "step_ms", "trace"}.
--small shrinks the model (hidden 128, 2 blocks, 2 x 64 tokens) for a check on the CPU.
"""
import argparse
import json
import math
import os
import statistics
import time

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--pairs", default="foreach_adamw,forloop_adamw,fp32,eager_attention,slow_loader,host_sync,padding,compile")
ap.add_argument("--device", default="cuda")
ap.add_argument("--small", action="store_true")
a = ap.parse_args()

import sys

import torch
from torch import nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from step_timer import StepTimer  # noqa: E402

dev = torch.device(a.device)
cuda = dev.type == "cuda"
H, HEADS, FFN, LAYERS, B, L = (128, 2, 352, 2, 2, 64) if a.small else (1024, 8, 2816, 8, 4, 1024)
WARMUP, TIMED = (1, 2) if a.small else (3, 10)
os.makedirs(a.out, exist_ok=True)


class RMSNorm(nn.Module):  # unfused, as transformers writes it
    def __init__(self, h):
        super().__init__()
        self.w = nn.Parameter(torch.ones(h))

    def forward(self, x):
        v = x.float()
        return (v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * self.w


class Block(nn.Module):
    def __init__(self, eager, mlp_only):
        super().__init__()
        self.eager, self.mlp_only = eager, mlp_only
        self.n1, self.n2 = RMSNorm(H), RMSNorm(H)
        self.qkv, self.o = nn.Linear(H, 3 * H, bias=False), nn.Linear(H, H, bias=False)
        self.gate, self.up, self.down = nn.Linear(H, FFN, bias=False), nn.Linear(H, FFN, bias=False), nn.Linear(FFN, H, bias=False)

    def attention(self, x):
        b, l, _ = x.shape
        q, k, v = self.qkv(x).view(b, l, 3, HEADS, H // HEADS).permute(2, 0, 3, 1, 4)
        if self.eager:
            s = (q @ k.transpose(-1, -2)) / math.sqrt(H // HEADS)
            s = s.masked_fill(torch.ones(l, l, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
            y = s.softmax(-1) @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(b, l, H))

    def forward(self, x):
        if not self.mlp_only:
            x = x + self.attention(self.n1(x))
        h = self.n2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class SlowData(torch.utils.data.Dataset):  # a batch a step; the collate sleeps like a tokenizer
    def __len__(self):
        return 10_000

    def __getitem__(self, i):
        return torch.randn(L, H)


def slowCollate(items):
    time.sleep(0.03)
    return torch.stack(items)


def config(pair, role):
    c = dict(opt="fused", dtype=torch.bfloat16, eager=False, loader="none", sync=False, mlp_only=False, packed=False, compile=False)
    before = role == "before"
    if pair == "foreach_adamw" and before: c["opt"] = "foreach"
    if pair == "forloop_adamw" and before: c["opt"] = "forloop"
    if pair == "fp32" and before: c["dtype"] = torch.float32
    if pair == "eager_attention" and before: c["eager"] = True
    if pair == "slow_loader": c["loader"] = "slow" if before else "workers"
    if pair == "host_sync" and before: c["sync"] = True
    if pair == "padding": c.update(mlp_only=True, packed=not before)
    if pair == "compile" and not before: c["compile"] = True
    return c


def build(c):
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    model = nn.Sequential(*[Block(c["eager"], c["mlp_only"]) for _ in range(LAYERS)]).to(dev, c["dtype"])
    kw = {"fused": True} if c["opt"] == "fused" and cuda else {"foreach": c["opt"] == "foreach"}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **kw)
    return (torch.compile(model) if c["compile"] else model), opt


def batches(c):
    if c["loader"] == "none":
        x = torch.randn(B, L, H, device=dev, dtype=c["dtype"])
        while True:
            yield x
    workers = 2 if c["loader"] == "workers" else 0
    dl = torch.utils.data.DataLoader(SlowData(), batch_size=B, collate_fn=slowCollate, num_workers=workers,
                                     pin_memory=cuda, persistent_workers=workers > 0, prefetch_factor=2 if workers else None)
    for x in dl:
        yield x.to(dev, c["dtype"], non_blocking=True)


# Padding: the rows' real lengths (2,425 of 4,096 tokens, efficiency 0.59).
LENGTHS = [int(L * f) for f in (1, 0.7, 0.4, 0.27)][:B]


def step(model, opt, x, c):
    if c["mlp_only"]:
        real = sum(LENGTHS)
        if c["packed"]:
            x = x.reshape(1, B * L, H)[:, :real]
        with torch.profiler.record_function(f"sightline.batch real_tokens={real} padded_tokens={x.shape[0] * x.shape[1]}"):
            pass
    y = model(x)
    loss = y.float().pow(2).mean()
    if c["sync"]:
        loss.item()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def timed(model, opt, data, c, steps, prof=None):
    timer = StepTimer(cuda)
    timer.mark()
    for _ in range(steps):
        step(model, opt, next(data), c)
        timer.mark()
        if prof is not None:
            prof.step()
    return timer.step_ms()


def run(pair, role, log):
    c = config(pair, role)
    model, opt = build(c)
    data = batches(c)
    timed(model, opt, data, c, WARMUP)
    step_ms = statistics.median(timed(model, opt, data, c, TIMED))
    trace = None
    if role == "before":
        trace = os.path.join(a.out, f"{pair}.json.gz")
        acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
        with torch.profiler.profile(activities=acts, schedule=torch.profiler.schedule(wait=0, warmup=1, active=3, repeat=1),
                                    on_trace_ready=lambda p: p.export_chrome_trace(trace)) as prof:
            timed(model, opt, data, c, 4, prof)
    line = json.dumps({"pair": pair, "role": role, "step_ms": step_ms, "trace": trace})
    print(line, flush=True)
    log.write(line + "\n")
    log.flush()


with open(os.path.join(a.out, "pairs.jsonl"), "w") as log:
    for pair in a.pairs.split(","):
        for role in ("before", "after"):
            try:
                run(pair, role, log)
            except Exception as e:  # one pair failing (a compile error) must not lose the others
                print(json.dumps({"pair": pair, "role": role, "error": repr(e)[:300]}), flush=True)
