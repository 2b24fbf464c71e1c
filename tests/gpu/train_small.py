#!/usr/bin/env python3
"""A small training job of the fixture's kind for the collector's GPU checks: transformers'
Qwen3NextForCausalLM (random init, the Gated DeltaNet torch fallback), bf16, AdamW, padded batches.

usage: train_small.py --mode plain|noop-callback|torch-profiler|torch-profiler-shapes|torch-profiler-cuda [--steps N] [--warmup W]
                      [--trace OUT.json] [--exit normal|sys-exit|exception|wait-signal] [--no-cuda]
                      [--log-steps FILE] [--layers 4|8|...] [--profile-steps A:B] [--cycle OFF:ON]
                      [--lengths N,N,...] [--nvtx] [--config CONFIG.json]
Warm-up steps run unannotated; the measured steps each run inside record_function("train_step").
torch.profiler records all measured steps, or with --profile-steps A:B measured steps A to B
(counting from 1, as `sightline run --steps A:B` counts them), so that the steps around show the
same process's step time without a profiler. With --cycle OFF:ON the measured steps alternate OFF
steps without, ON steps with: torch.profiler through its schedule (wait=OFF, active=ON, repeated),
and in the plain mode the same pattern only marks the steps (the method's own noise); noop-callback
registers a RecordFunction callback that does nothing for the ON steps (bench/noop_callback.cpp, its
library named by SIGHTLINE_NOOP_LIB): PyTorch's own cost per op, the floor of any op recorder.
Prints one JSON line: per-step wall times in ms of the measured steps. --log-steps appends a line
"END_NS MS ON ISSUE_MS" per measured step as it ends (END_NS: CLOCK_REALTIME, the collector's
clock; ON: 1 for a step of an ON phase of --cycle; ISSUE_MS: the CPU's time to issue the step, up to
its closing synchronize: well under MS when the job is GPU-bound).
--config builds the model from a Hugging Face config.json instead (AutoModelForCausalLM, random
init on the GPU; --hidden and --layers are then ignored): the benchmark model,
shared/configs/qwen35-4b-like.json, with --lengths 2048,2048 (the 4,096-token budget at which its
torch fallback fits on an H200).
--nvtx wraps each step's forward, backward and optimizer step in NVTX ranges (torch.cuda.nvtx).
--lengths sets the padded batch's example lengths (default 300,512, the fixture's); the batch is
padded to the longest, so 2048,1500,1100,700 fills the benchmark's 8,192-token rectangle
(shared/configs/README.md): on the H200 a step of about 250 ms, the CPU still busy through most of
it (docs/device-runs/2026-11-30-session8.md, call 1).
"""
import argparse, json, os, sys, time

ap = argparse.ArgumentParser()
ap.add_argument("--mode", default="plain")
ap.add_argument("--steps", type=int, default=4)
ap.add_argument("--warmup", type=int, default=3)
ap.add_argument("--trace", default="torch_trace.json")
ap.add_argument("--exit", default="normal")
ap.add_argument("--no-cuda", action="store_true")
ap.add_argument("--hidden", type=int, default=1024)
ap.add_argument("--layers", type=int, default=4, help="a multiple of 4 (3 linear-attention layers, then 1 full)")
ap.add_argument("--log-steps", default="")
ap.add_argument("--profile-steps", default="")
ap.add_argument("--cycle", default="")
ap.add_argument("--lengths", default="300,512")
ap.add_argument("--nvtx", action="store_true")
ap.add_argument("--config", default="")
a = ap.parse_args()
lengths = [int(n) for n in a.lengths.split(",")]

import torch
from transformers import Qwen3NextConfig, Qwen3NextForCausalLM

torch.manual_seed(0)
device = "cpu" if a.no_cuda else "cuda"
cfg = Qwen3NextConfig(vocab_size=32000, hidden_size=a.hidden, intermediate_size=3 * a.hidden, num_hidden_layers=a.layers,
                      num_attention_heads=8, num_key_value_heads=2, head_dim=128, linear_num_key_heads=8,
                      linear_num_value_heads=16, linear_key_head_dim=128, linear_value_head_dim=128,
                      linear_conv_kernel_dim=4, num_experts=0, layer_types=(["linear_attention"] * 3 + ["full_attention"]) * (a.layers // 4),
                      max_position_embeddings=max(4096, *lengths))
dtype = torch.bfloat16 if device == "cuda" else torch.float32
if a.config:
    from transformers import AutoConfig, AutoModelForCausalLM
    cfg = AutoConfig.for_model(**json.load(open(a.config)))
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
else:
    model = Qwen3NextForCausalLM(cfg).to(device=device, dtype=dtype)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
T = max(lengths)
ids = torch.randint(0, cfg.vocab_size, (len(lengths), T), device=device)
mask = torch.zeros_like(ids)
for i, n in enumerate(lengths):
    mask[i, :n] = 1
labels = ids.masked_fill(mask == 0, -100)

issue_ms = 0.0  # the last step's CPU time up to its synchronize


class nvtx_range:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        if a.nvtx:
            torch.cuda.nvtx.range_push(self.name)

    def __exit__(self, *exc):
        if a.nvtx:
            torch.cuda.nvtx.range_pop()


def step():
    global issue_ms
    t0 = time.perf_counter()
    with nvtx_range("forward"):
        out = model(input_ids=ids, attention_mask=mask, labels=labels)
    with nvtx_range("backward"):
        out.loss.backward()
    with nvtx_range("optimizer"):
        opt.step()
        opt.zero_grad(set_to_none=True)
    issue_ms = (time.perf_counter() - t0) * 1e3
    if device == "cuda":
        torch.cuda.synchronize()

for _ in range(a.warmup):
    step()
if a.exit == "wait-signal":
    print("READY", flush=True)
    while True:
        step()

times = []
log = open(a.log_steps, "a", buffering=1) if a.log_steps else None
prof = None
first, last = (int(x) for x in a.profile_steps.split(":")) if a.profile_steps else (1, a.steps)
off, on = (int(x) for x in a.cycle.split(":")) if a.cycle else (0, 0)
in_on_phase = lambda i: on > 0 and (i - 1) % (off + on) >= off  # measured step i, from 1


def start_profiler(**schedule):
    """torch.profiler with the mode's activities and shapes, entered (torch-profiler-cuda: CUDA only,
    no CPU ops: what CUPTI costs under Kineto)."""
    cpu = [] if a.mode.endswith("cuda") else [torch.profiler.ProfilerActivity.CPU]
    acts = cpu + ([torch.profiler.ProfilerActivity.CUDA] if device == "cuda" else [])
    p = torch.profiler.profile(activities=acts, record_shapes=a.mode.endswith("shapes"), **schedule)
    p.__enter__()
    return p


noop = None
if a.mode == "noop-callback":
    import ctypes
    noop = ctypes.CDLL(os.environ["SIGHTLINE_NOOP_LIB"]).sightline_bench_noop
if on and a.mode.startswith("torch-profiler"):
    prof = start_profiler(schedule=torch.profiler.schedule(wait=off, warmup=0, active=on), on_trace_ready=lambda p: None)
for i in range(1, a.steps + 1):
    if i == first and a.mode.startswith("torch-profiler") and not on:
        prof = start_profiler()
    if noop:
        noop(int(in_on_phase(i)))
    t0 = time.perf_counter()
    with torch.profiler.record_function("train_step"):
        step()
    times.append((time.perf_counter() - t0) * 1e3)
    if log:
        log.write(f"{time.time_ns()} {times[-1]:.4f} {int(in_on_phase(i))} {issue_ms:.4f}\n")
    if on and prof is not None:
        prof.step()  # between steps, outside their times: a phase's end processes its trace here
        continue
    if i == last and prof is not None:
        prof.__exit__(None, None, None)
        trace_prof, prof = prof, None
if on and prof is not None:
    prof.__exit__(None, None, None)
elif a.mode.startswith("torch-profiler"):
    trace_prof.export_chrome_trace(a.trace)
print(json.dumps({"mode": a.mode, "step_ms": times}), flush=True)
if a.exit == "sys-exit":
    sys.exit(3)
if a.exit == "exception":
    raise RuntimeError("deliberate failure after the steps")
