#!/usr/bin/env python3
"""The trainer's model against the real reference: transformers' Qwen3_5ForCausalLM built from the
same config.json with random weights (the norms perturbed so that their scales matter), saved as
safetensors, loaded by sightline-trainer-forward; on one right-padded batch that crosses the
Gated DeltaNet's 64-token chunks, the loss, the logits of the real tokens and every parameter's
gradient must agree (fp32: relative error under 1e-4 for loss and logits, 1e-3 for gradients).

usage: parity_test.py FORWARD_TOOL CONFIG.json WORKDIR
Exits 77 (skipped) when this Python cannot import torch and transformers (scripts/setup.sh
installs them in third_party/pytorch-venv)."""
import json, os, shutil, subprocess, sys

tool, config_path, work = sys.argv[1:4]
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
cfg = {k: v for k, v in cfg.items() if k not in ("architectures", "model_type")}
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

out = model(input_ids=ids, attention_mask=mask, labels=labels)
out.loss.backward()

p = subprocess.run([tool, config_path, os.path.join(work, "hf", "model.safetensors"), os.path.join(work, "batch.safetensors"),
                    os.path.join(work, "ours.safetensors")], capture_output=True, text=True)
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
if loss_err > 1e-4:
    failures.append("loss")
if logit_err > 1e-4:
    failures.append("logits")
worst, worst_name, n = 0.0, "", 0
for name, param in model.named_parameters():
    g = ours.get("grad." + name)
    if name == "lm_head.weight" and g is None:
        continue  # tied to the embeddings: its gradient is theirs
    if g is None:
        failures.append(f"no gradient for {name}")
        continue
    e = rel(g, param.grad)
    n += 1
    if e > worst:
        worst, worst_name = e, name
    if e > 1e-3:
        failures.append(f"gradient of {name}: relative error {e:.2e}")
print(f"gradients of {n} parameters: largest relative error {worst:.2e} ({worst_name})")

# A checkpoint the trainer writes loads in transformers and computes the same logits there.
trainer = os.path.join(os.path.dirname(tool), "sightline-trainer")
ckpt = os.path.join(work, "trained")
p = subprocess.run([trainer, "--config", config_path, "--synthetic", "8", "--median-len", "64", "--max-len", "128",
                    "--budget", "512", "--steps", "2", "--save", ckpt], capture_output=True, text=True)
if p.returncode != 0:
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
