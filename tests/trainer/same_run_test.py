#!/usr/bin/env python3
"""sightline-trainer and transformers run the same training: examples/hf_train.py trains
transformers' Qwen3_5ForCausalLM on the examples sightline-trainer writes (--write-data), from
the same initial weights (saved by hf_train.py, loaded by the trainer's --init), with the same
budget, schedule and optimizer settings. Step by step the two logs must hold the same real and
padded token counts (the same batches), and in fp32 the same loss (relative error under 1e-4) and
gradient norm (under 1e-3): the whole loop (batching, loss, clipping, warm-up and cosine, AdamW)
matches PyTorch's. This is what makes the speed comparison on the GPU like for like.

usage: same_run_test.py SIGHTLINE_TRAINER HF_TRAIN_PY CONFIG.json WORKDIR
Exits 77 (skipped) when this Python cannot import torch and transformers."""
import json, os, shutil, subprocess, sys

trainer, hf_train, config, work = sys.argv[1:5]
try:
    import torch, transformers  # noqa: F401
except Exception as e:  # noqa: BLE001
    print(f"skipped: no torch/transformers here ({e})")
    sys.exit(77)
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
j = lambda *p: os.path.join(work, *p)  # noqa: E731


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print("FAIL:", " ".join(cmd[:2]), "exited", p.returncode, p.stderr.strip()[-800:])
        sys.exit(1)


run([trainer, "--config", config, "--synthetic", "40", "--median-len", "80", "--max-len", "200", "--write-data", j("data.jsonl")])
common = ["--config", config, "--data", j("data.jsonl"), "--budget", "512", "--steps", "8", "--warmup", "3", "--lr", "1e-2"]
run([sys.executable, hf_train, *common, "--save-init", j("init"), "--log-jsonl", j("hf.jsonl")])
run([trainer, *common, "--init", j("init", "model.safetensors"), "--log-jsonl", j("ours.jsonl")])
hf = [json.loads(l) for l in open(j("hf.jsonl"))]
ours = [json.loads(l) for l in open(j("ours.jsonl"))]
failures = []
if len(hf) != 8 or len(ours) != 8:
    failures.append(f"steps logged: transformers {len(hf)}, trainer {len(ours)}")
worst_loss = worst_norm = 0.0
for a, b in zip(hf, ours):
    if (a["real_tokens"], a["padded_tokens"]) != (b["real_tokens"], b["padded_tokens"]):
        failures.append(f"step {a['step']}: tokens {a['real_tokens']}/{a['padded_tokens']} vs {b['real_tokens']}/{b['padded_tokens']}")
    worst_loss = max(worst_loss, abs(a["loss"] - b["loss"]) / abs(a["loss"]))
    worst_norm = max(worst_norm, abs(a["grad_norm"] - b["grad_norm"]) / abs(a["grad_norm"]))
print(f"{len(ours)} steps, same batches: {not failures}; loss relative error at most {worst_loss:.2e}, "
      f"gradient norm at most {worst_norm:.2e}; last loss {ours[-1]['loss']:.5f} (transformers {hf[-1]['loss']:.5f})")
if worst_loss > 1e-4:
    failures.append(f"loss differs by {worst_loss:.2e}")
if worst_norm > 1e-3:
    failures.append(f"gradient norm differs by {worst_norm:.2e}")
if failures:
    print("FAIL:", "; ".join(failures[:5]))
    sys.exit(1)
print("the same run: batches, losses and gradient norms agree")
