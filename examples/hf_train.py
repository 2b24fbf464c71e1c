#!/usr/bin/env python3
"""The same training run as sightline-trainer, on transformers' Qwen3_5ForCausalLM: the baseline
that the reference trainer's speed is measured against (docs/trainer.md).

It reads the same config.json and the same JSONL examples (`sightline-trainer --write-data` writes
the synthetic ones), batches them the same way (greedy, in order: an example joins a padded
rectangle while rows x longest stays within the budget; longer examples are cut to the budget),
and trains with the same recipe: AdamW (betas 0.9/0.95, weight decay 0.1), gradient clipping,
linear warm-up then cosine decay to a tenth, the loss of each micro-batch divided by the
accumulation count. It prints the trainer's progress line and summary line and writes the same
JSON lines (--log-jsonl), so the two logs compare step by step.

usage: hf_train.py --config CONFIG.json --data FILE.jsonl [--budget N] [--steps N] [--device cuda]
                   [--bf16] [--init DIR|FILE.safetensors] [--save-init DIR] [--peak-tflops T] ...
Exit status 3: out of device memory at this budget."""
import argparse, json, math, statistics, sys, time


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--budget", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--accumulate", type=int, default=1)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--init", help="start from these weights (a save_pretrained directory)")
    ap.add_argument("--save-init", help="save the initial weights here (save_pretrained), for the other trainer's --init")
    ap.add_argument("--peak-tflops", type=float, default=0.0)
    ap.add_argument("--log-jsonl")
    return ap.parse_args()


def load_examples(path):
    out = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            e = json.loads(line)
            ids = e["input_ids"]
            labels = e.get("labels")
            if labels is None and "loss_mask" in e:
                labels = [t if m else -100 for t, m in zip(ids, e["loss_mask"])]
            out.append((ids, labels if labels is not None else list(ids)))
    if not out:
        sys.exit(f"hf_train.py: {path}: no examples")
    return out


def pad_batches(examples, budget):
    """Greedy, in order, as sightline-trainer's padBatches: lists of (ids, labels) cut to the budget."""
    batches, current, longest = [], [], 0
    for ids, labels in examples:
        n = min(len(ids), budget)
        if current and max(longest, n) * (len(current) + 1) > budget:
            batches.append(current)
            current, longest = [], 0
        current.append((ids[:n], labels[:n]))
        longest = max(longest, n)
    if current:
        batches.append(current)
    return batches


def to_tensors(torch, batch, device):
    cols = max(len(ids) for ids, _ in batch)
    ids = torch.zeros(len(batch), cols, dtype=torch.long)
    labels = torch.full((len(batch), cols), -100, dtype=torch.long)
    mask = torch.zeros(len(batch), cols, dtype=torch.long)
    for r, (i, l) in enumerate(batch):
        ids[r, :len(i)] = torch.tensor(i)
        labels[r, :len(l)] = torch.tensor(l)
        mask[r, :len(i)] = 1
    return ids.to(device), labels.to(device), mask.to(device)


def learning_rate(a, step):
    if a.warmup > 0 and step <= a.warmup:
        return a.lr * step / a.warmup
    progress = min(1.0, (step - a.warmup) / max(1, a.steps - a.warmup))
    low = a.lr * 0.1
    return low + 0.5 * (a.lr - low) * (1 + math.cos(math.pi * progress))


def flops_per_token(cfg, params, seq_len):
    """As the trainer's flopsPerToken: 6 x parameters (an untied input embedding left out: a lookup),
    plus the attention layers' 12 x heads x head_dim x length."""
    matmul_params = params - (0 if cfg.tie_word_embeddings else cfg.vocab_size * cfg.hidden_size)
    attn_layers = sum(1 for t in cfg.layer_types if t == "full_attention")
    return 6.0 * matmul_params + 12.0 * attn_layers * cfg.num_attention_heads * cfg.head_dim * seq_len


def main():
    a = parse_args()
    import torch
    from torch.profiler import record_function
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    raw = json.load(open(a.config))
    cfg = Qwen3_5TextConfig(**{k: v for k, v in raw.items() if k not in ("architectures", "model_type")})
    torch.manual_seed(a.seed)
    dtype = torch.bfloat16 if a.bf16 else torch.float32
    device = torch.device(a.device)
    if a.init:
        model = Qwen3_5ForCausalLM.from_pretrained(a.init, dtype=torch.float32)
    else:
        with device:
            model = Qwen3_5ForCausalLM(cfg)
    if a.save_init:
        model.save_pretrained(a.save_init)
    model = model.to(device=device, dtype=dtype)
    model.train()
    params = sum(p.numel() for p in model.parameters())
    batches = pad_batches(load_examples(a.data), a.budget)
    print(f"model: {params / 1e6:.3f} M parameters, {cfg.num_hidden_layers} layers; {len(batches)} batches", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    log = open(a.log_jsonl, "a") if a.log_jsonl else None
    steps, nxt = [], 0
    for step in range(1, a.steps + 1):
        t0 = time.perf_counter()
        lr = learning_rate(a, step)
        for g in opt.param_groups:
            g["lr"] = lr
        real = padded = 0
        flops = loss_sum = 0.0
        with record_function("train_step"):  # the step and batch ranges the trainer writes (docs/metrics.md)
            for _ in range(a.accumulate):
                batch = batches[nxt]
                nxt = (nxt + 1) % len(batches)
                n_real, n_padded = sum(len(i) for i, _ in batch), len(batch) * max(len(i) for i, _ in batch)
                with record_function(f"sightline.batch real_tokens={n_real} padded_tokens={n_padded} sequences={len(batch)}"):
                    ids, labels, mask = to_tensors(torch, batch, device)
                    loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss / a.accumulate
                    loss.backward()
                    loss_sum += loss.item()
                real += n_real
                padded += n_padded
                flops += sum(flops_per_token(cfg, params, len(i)) * len(i) for i, _ in batch)
            grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip))
            opt.step()
            opt.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        secs = time.perf_counter() - t0
        peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0
        mfu = flops / secs / (a.peak_tflops * 1e12) if a.peak_tflops > 0 else float("nan")
        steps.append({"step": step, "loss": loss_sum, "lr": lr, "grad_norm": grad_norm, "seconds": secs,
                      "real_tokens": real, "padded_tokens": padded, "peak_bytes": peak, "mfu": mfu})
        mem = f"  peak memory {peak / 2**30:.1f} GiB" if peak else ""
        print(f"step {step}/{a.steps}  loss {loss_sum:.4f}  lr {lr:.2e}  |g| {grad_norm:.3f}  tokens/s {real / secs:.0f} real, "
              f"{padded / secs:.0f} padded  padding efficiency {100 * real / padded:.1f}%  "
              f"MFU {'n/a' if math.isnan(mfu) else f'{100 * mfu:.1f}%'}{mem}", flush=True)
        if log:
            log.write(json.dumps({k: v for k, v in steps[-1].items() if k != "mfu"}) + "\n")
            log.flush()
    skip = 2 if len(steps) > 3 else 0  # as the trainer's summary: totals over the steady steps
    steady = steps[skip:]
    total_s = sum(s["seconds"] for s in steady)
    summary = {"steps_measured": len(steady), "budget": a.budget,
               "median_step_s": statistics.median(s["seconds"] for s in steady),
               "real_tokens_per_s": sum(s["real_tokens"] for s in steady) / total_s,
               "padded_tokens_per_s": sum(s["padded_tokens"] for s in steady) / total_s,
               "padding_efficiency": sum(s["real_tokens"] for s in steady) / sum(s["padded_tokens"] for s in steady),
               "peak_memory_gib": max(s["peak_bytes"] for s in steps) / 2**30}
    if a.peak_tflops > 0:
        summary["mfu"] = sum(s["mfu"] * s["seconds"] for s in steady) / total_s
    print("summary: " + json.dumps(summary, sort_keys=True), flush=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - out-of-memory gets its own status, the rest one line
        if type(e).__name__ == "OutOfMemoryError":
            print(f"hf_train.py: out of device memory at a budget of {parse_args().budget} tokens a micro-batch: "
                  f"{str(e).split('.')[0]}", file=sys.stderr)
            sys.exit(3)
        raise
