#!/usr/bin/env python3
"""A data-parallel CPU job of two (or more) ranks over torch.distributed's gloo backend, for the
multi-rank CLI test: each step (a "train_step" range) runs a small forward/backward, all-reduces
the gradients (four all-reduces of 8192, 128, 1024 and 8 float32 elements), and steps SGD; then it
broadcasts 10 int64 elements, all-gathers 5 bf16 elements from each rank and meets at a barrier.
The rank named by --slow-rank sleeps --delay-ms more per step before its all-reduce, so the others
wait for it there: the straggler the analysis must name.

Ranks come from the environment as torchrun sets them (RANK, WORLD_SIZE); the rendezvous is a file
(--store FILE). usage: gloo_job.py --store FILE [--steps 6] [--slow-rank 1] [--delay-ms 30]"""
import argparse, os, time

ap = argparse.ArgumentParser()
ap.add_argument("--store", required=True)
ap.add_argument("--steps", type=int, default=6)
ap.add_argument("--slow-rank", type=int, default=1)
ap.add_argument("--delay-ms", type=float, default=30.0)
a = ap.parse_args()

import torch
import torch.distributed as dist

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", init_method=f"file://{a.store}", rank=rank, world_size=world)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(32, 64)
for step in range(a.steps):
    with torch.profiler.record_function("train_step"):
        loss = model(x).pow(2).mean()
        loss.backward()
        if rank == a.slow_rank:
            time.sleep(a.delay_ms / 1000)
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        opt.zero_grad(set_to_none=True)
# Collectives of known sizes and types, whose metadata the test reads back: 10 int64 broadcast
# from rank 0, 5 bf16 elements gathered from each rank.
ids = torch.arange(10, dtype=torch.int64) if rank == 0 else torch.zeros(10, dtype=torch.int64)
dist.broadcast(ids, src=0)
gathered = [torch.zeros(5, dtype=torch.bfloat16) for _ in range(world)]
dist.all_gather(gathered, torch.full((5,), float(rank), dtype=torch.bfloat16))
assert ids.tolist() == list(range(10)) and [g[0].item() for g in gathered] == list(range(world))
dist.barrier()
dist.destroy_process_group()
print(f"rank {rank}: {a.steps} steps done")
