#!/usr/bin/env python3
"""A CUDA job with forked DataLoader workers, for the collector's multi-process check: the workers
(forked) must write nothing; the parent's capture holds its own steps."""
import torch
from torch.utils.data import DataLoader, TensorDataset

ds = TensorDataset(torch.randn(512, 256), torch.randn(512, 1))
loader = DataLoader(ds, batch_size=64, num_workers=2)
model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1)).cuda()
opt = torch.optim.AdamW(model.parameters(), fused=True)
for x, y in loader:
    with torch.profiler.record_function("train_step"):
        loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
        loss.backward()
        opt.step()
        opt.zero_grad()
torch.cuda.synchronize()
print("steps", len(loader))
