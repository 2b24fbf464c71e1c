#!/usr/bin/env python3
"""The trainer's model against the real reference: transformers' Qwen3_5ForCausalLM built from the
same config.json with random weights (the norms perturbed so that their scales matter), saved as
safetensors, loaded by sightline-trainer-forward; on one right-padded batch that crosses the
Gated DeltaNet's 64-token chunks, the loss, the logits of the real tokens and every parameter's
gradient must agree (fp32: relative error under 1e-4 for loss and logits, 1e-3 for gradients).

usage: parity_test.py FORWARD_TOOL CONFIG.json WORKDIR [--device cuda] [--bf16] [--layers N]
--device runs both models there (fp32 without TF32); --bf16 runs both in bf16 and compares them
against each other within 1e-2 (loss, logits) and, for gradients, within twice transformers' own
bf16 error against its fp32 gradients (at least 2e-2); --layers N keeps the config's first N
layers (the benchmark config's shapes at a size a check can afford). The checkpoint check
(trained by sightline-trainer, loaded by transformers) runs on the CPU in fp32 only.
Exits 77 (skipped) when this Python cannot import torch and transformers (scripts/setup.sh
installs them in third_party/pytorch-venv)."""
import json, os, shutil, subprocess, sys

import argparse

ap = argparse.ArgumentParser()
ap.add_argument("tool")
ap.add_argument("config")
ap.add_argument("work")
ap.add_argument("--device", default="cpu")
ap.add_argument("--bf16", action="store_true")
ap.add_argument("--layers", type=int, default=0)
args = ap.parse_args()
tool, config_path, work = args.tool, args.config, args.work
try:
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
except Exception as e:  # noqa: BLE001 - any import failure means the reference is not installed
    print(f"skipped: no torch/transformers here ({e})")
    sys.exit(77)

shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
cfg = json.load(open(config_path))
if args.layers:
    cfg["num_hidden_layers"] = args.layers
    cfg["layer_types"] = cfg["layer_types"][:args.layers]
    config_path = os.path.join(work, "config.json")
    json.dump(cfg, open(config_path, "w"))
cfg = {k: v for k, v in cfg.items() if k not in ("architectures", "model_type")}
device = torch.device(args.device)
torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 on the GPU too (the trainer's forward tool does the same)
torch.backends.cudnn.allow_tf32 = False
torch.manual_seed(0)
model = Qwen3_5ForCausalLM(Qwen3_5TextConfig(**cfg)).float()
with torch.no_grad():  # norms start at their neutral values: move them so that they count
    for name, p in model.named_parameters():
        if name.endswith("norm.weight") or name.endswith("dt_bias"):
            p.add_(0.3 * torch.randn_like(p))
model.save_pretrained(os.path.join(work, "hf"))

lengths, T = [150, 97], 150
ids = torch.randint(0, cfg["vocab_size"], (len(lengths), T))
mask = torch.zeros(len(lengths), T, dtype=torch.long)
for i, n in enumerate(lengths):
    mask[i, :n] = 1
labels = ids.masked_fill(mask == 0, -100)
save_file({"input_ids": ids, "attention_mask": mask, "labels": labels}, os.path.join(work, "batch.safetensors"))


def reference(dtype):
    """transformers' loss, logits (fp32, on the CPU) and gradients by name, in `dtype` on the device."""
    m = model.to(device=device, dtype=dtype)
    m.zero_grad(set_to_none=True)
    o = m(input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device))
    o.loss.backward()
    grads = {n: p.grad.float().cpu() for n, p in m.named_parameters() if p.grad is not None}
    return o.loss.float().cpu(), o.logits.detach().float().cpu(), grads


class Out:
    def __init__(self, loss, logits):
        self.loss, self.logits = loss, logits


fp32_loss, fp32_logits, fp32_grads = reference(torch.float32)
if args.bf16:
    bf_loss, bf_logits, grads = reference(torch.bfloat16)
    out = Out(bf_loss, bf_logits)
else:
    out, grads = Out(fp32_loss, fp32_logits), fp32_grads
model = model.float().cpu()
extra = ["--device", args.device] + (["--bf16"] if args.bf16 else [])
p = subprocess.run([tool, config_path, os.path.join(work, "hf", "model.safetensors"), os.path.join(work, "batch.safetensors"),
                    os.path.join(work, "ours.safetensors"), *extra], capture_output=True, text=True)
if p.returncode != 0:
    print("FAIL: the trainer's forward:", p.stderr.strip())
    sys.exit(1)
ours = load_file(os.path.join(work, "ours.safetensors"))


def rel(a, b):
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


failures = []
loss_err = abs(ours["loss"].item() - out.loss.item()) / abs(out.loss.item())
real = mask.bool()
logit_err = rel(ours["logits"][real], out.logits.detach().float()[real])
print(f"loss: transformers {out.loss.item():.6f}, trainer {ours['loss'].item():.6f}, relative error {loss_err:.2e}")
print(f"logits of the {int(real.sum())} real tokens: relative error {logit_err:.2e}")
tol = 1e-2 if args.bf16 else 1e-4
if loss_err > tol:
    failures.append(f"loss: relative error {loss_err:.2e}")
if logit_err > tol:
    failures.append(f"logits: relative error {logit_err:.2e}")
worst, worst_name, worst_own, n = 0.0, "", 0.0, 0
for name, _ in model.named_parameters():
    g = ours.get("grad." + name)
    if name == "lm_head.weight" and g is None:
        continue  # tied to the embeddings: its gradient is theirs
    if g is None:
        failures.append(f"no gradient for {name}")
        continue
    e = rel(g.float(), grads[name])
    # bf16: transformers' own bf16 gradient against its fp32 one sets what bf16 can hold here
    own = rel(grads[name], fp32_grads[name]) if args.bf16 else 0.0
    limit = max(2e-2, 2 * own) if args.bf16 else 1e-3
    n += 1
    if e > worst:
        worst, worst_name, worst_own = e, name, own
    if e > limit:
        failures.append(f"gradient of {name}: relative error {e:.2e} (limit {limit:.2e})")
print(f"gradients of {n} parameters: largest relative error {worst:.2e} ({worst_name}" +
      (f"; transformers' own bf16 error there {worst_own:.2e})" if args.bf16 else ")"))

# A checkpoint the trainer writes loads in transformers and computes the same logits there.
trainer = os.path.join(os.path.dirname(tool), "sightline-trainer")
ckpt = os.path.join(work, "trained")
if args.device != "cpu" or args.bf16:
    p = None
else:
    p = subprocess.run([trainer, "--config", config_path, "--synthetic", "8", "--median-len", "64", "--max-len", "128",
                    "--budget", "512", "--steps", "2", "--save", ckpt], capture_output=True, text=True)
if p is None:
    pass
elif p.returncode != 0:
    failures.append(f"sightline-trainer: {p.stderr.strip()}")
else:
    reloaded = Qwen3_5ForCausalLM.from_pretrained(ckpt).float()
    p = subprocess.run([tool, config_path, os.path.join(ckpt, "model.safetensors"), os.path.join(work, "batch.safetensors"),
                        os.path.join(work, "trained_out.safetensors")], capture_output=True, text=True)
    if p.returncode != 0:
        print("FAIL: the trainer's forward on its own checkpoint:", p.stderr.strip())
        sys.exit(1)
    theirs = reloaded(input_ids=ids, attention_mask=mask).logits.detach().float()
    e = rel(load_file(os.path.join(work, "trained_out.safetensors"))["logits"][real], theirs[real])
    print(f"a trained checkpoint loaded by transformers: logits relative error {e:.2e}")
    if e > 1e-4:
        failures.append(f"the trained checkpoint in transformers: logits relative error {e:.2e}")
if failures:
    print("FAIL:", "; ".join(failures[:6]) + (f"; and {len(failures) - 6} more" if len(failures) > 6 else ""))
    sys.exit(1)
print("parity with transformers: loss, logits and gradients agree")
