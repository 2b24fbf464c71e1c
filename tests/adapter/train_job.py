#!/usr/bin/env python3
"""A tiny transformers training job with no annotation of its own, for the Python adapter's CPU
tests (adapter_test.py runs it under `sightline run`). Transformers' Qwen3_5ForCausalLM from
examples/configs/tiny.json (random init, fp32, AdamW), 5 steps of one batch each.

usage: train_job.py CONFIG.json MODE
MODE: padded       right-padded rows with attention_mask, labels -100 at the pads
      packed       one row per step, position_ids restarting at each example, labels -100 at
                   each example's first token (what DataCollatorWithFlattening gives)
      packed-eos   one row of examples joined by the end-of-sequence token, nothing else
                   (concatenate-and-chunk packing: no boundaries)
      dataloader   padded batches from a DataLoader whose dataset takes 30 ms an example
      trainer      padded batches through transformers' Trainer (needs accelerate)
The job prints its own count of each batch ("BATCH {json}") and each step's loss ("LOSS x").
BREAK=1 breaks the adapter from inside the job (its batch reader raises) to show that the job's
output and exit status stay the same; EXIT_CODE sets the job's exit status (default 0); REPEAT=N
runs the five steps N times."""
import json, os, sys

import torch

config_path, mode = sys.argv[1], sys.argv[2]
EOS = 1
STEPS = [[150, 97], [64, 120, 30], [40, 180], [90, 90, 40], [33, 170]]  # sequence lengths of each step's batch
STEPS = STEPS * int(os.environ.get("REPEAT", "1"))

if os.environ.get("BREAK") == "1":
    facts = sys.modules.get("sightline_adapter._facts")
    if facts is None:  # the adapter loads its reader once torch is imported (above)
        print("no adapter to break", file=sys.stderr)
        sys.exit(2)

    def broken(*args, **kwargs):
        raise RuntimeError("the batch reader is broken on purpose")
    facts.read_batch = broken

from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig  # noqa: E402

cfg = {k: v for k, v in json.load(open(config_path)).items() if k not in ("architectures", "model_type")}
cfg["eos_token_id"] = EOS
torch.manual_seed(0)
model = Qwen3_5ForCausalLM(Qwen3_5TextConfig(**cfg)).float()
model.train()
vocab = cfg["vocab_size"]


def example(n, eos_end=False):
    ids = torch.randint(2, vocab, (n,))
    if eos_end:
        ids[-1] = EOS
    return ids


def padded(examples):
    rows, width = len(examples), max(len(e) for e in examples)
    ids = torch.zeros(rows, width, dtype=torch.long)
    mask = torch.zeros(rows, width, dtype=torch.long)
    for i, e in enumerate(examples):
        ids[i, :len(e)] = e
        mask[i, :len(e)] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


def packed(examples, positions=True):
    ids = torch.cat(examples).view(1, -1)
    labels = ids.clone()
    starts = torch.tensor([0] + [len(e) for e in examples[:-1]]).cumsum(0)
    labels[0, starts] = -100
    batch = {"input_ids": ids, "labels": labels}
    if positions:
        batch["position_ids"] = torch.cat([torch.arange(len(e)) for e in examples]).view(1, -1)
    return batch


def own_count(batch, lengths, is_packed):
    real = sum(lengths)
    ignored = int((batch["labels"] == -100).sum()) - (0 if is_packed else batch["input_ids"].numel() - real)
    print("BATCH " + json.dumps({"real": real, "padded": batch["input_ids"].numel(), "sequences": len(lengths),
                                 "ignored": ignored, "lengths": lengths}), flush=True)


def loop(batches):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for batch in batches:
        loss = model(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"LOSS {loss.item():.6f}", flush=True)


def data_loader_batches():
    class Slow(torch.utils.data.Dataset):
        def __init__(self):
            self.examples = [example(n) for lengths in STEPS for n in lengths]

        def __len__(self):
            return len(self.examples)

        def __getitem__(self, i):
            import time
            time.sleep(0.03)
            return self.examples[i]

    def collate(examples):
        batch = padded(examples)
        own_count(batch, [len(e) for e in examples], False)
        return batch
    return torch.utils.data.DataLoader(Slow(), batch_size=2, collate_fn=collate)


def trainer():
    from transformers import Trainer, TrainingArguments

    data = [{"input_ids": example(n)} for lengths in STEPS for n in lengths]

    def collate(examples):
        ex = [e["input_ids"] for e in examples]
        batch = padded(ex)
        own_count(batch, [len(e) for e in ex], False)
        return batch
    args = TrainingArguments(output_dir=os.path.join(os.environ.get("TMPDIR", "/tmp"), "sl-adapter-trainer"), max_steps=5,
                             per_device_train_batch_size=2, learning_rate=1e-3, report_to=[], save_strategy="no",
                             logging_strategy="no", use_cpu=True, dataloader_num_workers=0, remove_unused_columns=False)
    Trainer(model=model, args=args, train_dataset=data, data_collator=collate).train()


if mode == "padded":
    batches = []
    for lengths in STEPS:
        b = padded([example(n) for n in lengths])
        own_count(b, lengths, False)
        batches.append(b)
    loop(batches)
elif mode in ("packed", "packed-eos"):
    batches = []
    for lengths in STEPS:
        b = packed([example(n, eos_end=mode == "packed-eos") for n in lengths], positions=mode == "packed")
        own_count(b, lengths, True)
        batches.append(b)
    loop(batches)
elif mode == "dataloader":
    loop(data_loader_batches())
elif mode == "trainer":
    trainer()
else:
    sys.exit(f"unknown mode {mode}")
sys.exit(int(os.environ.get("EXIT_CODE", "0")))
