#!/usr/bin/env python3
"""A data-parallel GPU job over NCCL for the multi-GPU checks (tests/gpu/multi_gpu_checks.sh):
PyTorch's DistributedDataParallel on a stack of linear layers, one process per GPU as torchrun
starts them. Each step (a "train_step" range) runs forward, backward (DDP all-reduces the gradient
buckets while backward runs) and SGD. The rank named by --slow-rank sleeps --delay-ms before each
step's forward, so the others wait for it in their all-reduce: the straggler the analysis must name.

usage: torchrun --nproc-per-node 2 ddp_job.py [--steps 12] [--slow-rank 1] [--delay-ms 40]"""
import argparse, os, time

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=12)
ap.add_argument("--slow-rank", type=int, default=1)
ap.add_argument("--delay-ms", type=float, default=40.0)
ap.add_argument("--hidden", type=int, default=4096)
ap.add_argument("--layers", type=int, default=8)
a = ap.parse_args()

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

local = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
dist.init_process_group("nccl")
rank = dist.get_rank()
torch.manual_seed(0)
layers = []
for _ in range(a.layers):
    layers += [torch.nn.Linear(a.hidden, a.hidden), torch.nn.GELU()]
model = DistributedDataParallel(torch.nn.Sequential(*layers).cuda(), device_ids=[local])
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(2048, a.hidden, device="cuda")
for step in range(a.steps):
    with torch.profiler.record_function("train_step"):
        if rank == a.slow_rank:
            time.sleep(a.delay_ms / 1000)
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
dist.barrier()
print(f"rank {rank}: {a.steps} steps done", flush=True)
dist.destroy_process_group()
