#!/usr/bin/env python3
"""A Kineto trace that carries counters, for the importer's check on a real one (hw_checks.sh part
6): a few steps of a bf16 GEMM and an elementwise chain under torch.profiler, once with PyTorch's
CUPTI range profiler (experimental_config.profiler_metrics, one "cuda_profiler_range" event per
kernel) and once with profile_memory=True (the allocator's "[memory]" instants). Writes
DIR/range.json.gz and DIR/memory.json.gz; a variant that PyTorch refuses is reported on stdout and
left out, the other still runs.

usage: kineto_counters_job.py DIR
"""
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

METRICS = ["kineto__tensor_core_insts", "dram__bytes_read.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed"]


def steps(n=3):
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    for i in range(n):
        with torch.profiler.record_function(f"ProfilerStep#{i}"):
            y = a @ a
            for _ in range(4):
                y = torch.nn.functional.gelu(y) * 0.5
        torch.cuda.synchronize()


def record(path, **kwargs):
    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], **kwargs) as prof:
            steps()
        prof.export_chrome_trace(path)
        print(f"{os.path.basename(path)}: written ({os.path.getsize(path)} bytes)")
    except Exception as e:  # a variant this build of PyTorch cannot record: say so, go on
        print(f"{os.path.basename(path)}: not recorded: {type(e).__name__}: {e}")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    steps(1)  # warm-up: cuBLAS handles, allocator
    config = torch._C._profiler._ExperimentalConfig(profiler_metrics=METRICS, profiler_measure_per_kernel=True)
    record(os.path.join(out, "range.json.gz"), experimental_config=config)
    record(os.path.join(out, "memory.json.gz"), profile_memory=True)


if __name__ == "__main__":
    main()
