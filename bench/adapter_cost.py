#!/usr/bin/env python3
"""The Python adapter's cost per batch on the host (docs/adapter.md), on the CPU: a small model
(an embedding and a linear layer) takes 8,192-token batches, padded (4 x 2,048 with
attention_mask and labels) or packed (one row with position_ids, cu_seq_lens_q/k, seq_idx and
labels), forward only, on one thread; the job runs with the adapter (its directory on PYTHONPATH,
SIGHTLINE_OUTPUT set, no collector) and without, interleaved over several rounds. Prints per
batching the median step time of each and the difference: the adapter's cost per batch when
the batch's tensors are on the host.

usage: adapter_cost.py [--build build/dev] [--python scripts/torch-python] [--rounds 5] [--steps 300]"""
import argparse, os, statistics, subprocess, sys, tempfile

JOB = r'''
import sys, time, torch
kind, steps = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(1)  # on a shared 2-core machine a parallel op waits for a descheduled thread: tens of ms
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Embedding(1000, 32), torch.nn.Linear(32, 8))
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = model
    def forward(self, input_ids, labels=None, **kwargs):
        return self.body(input_ids).sum()
m = Model()
lengths = [2048, 1500, 900, 1700]
if kind == "padded":
    ids = torch.randint(0, 1000, (4, 2048))
    mask = torch.zeros(4, 2048, dtype=torch.long)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
    batch = dict(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100))
else:
    row = lengths + [8192 - sum(lengths)]
    pos = torch.cat([torch.arange(n) for n in row]).view(1, -1)
    cu = torch.tensor([0] + row).cumsum(0).to(torch.int32)
    seq = torch.cat([torch.full((n,), i, dtype=torch.int32) for i, n in enumerate(row)]).view(1, -1)
    ids = torch.randint(0, 1000, (1, 8192))
    batch = dict(input_ids=ids, position_ids=pos, cu_seq_lens_q=cu, cu_seq_lens_k=cu, seq_idx=seq, labels=ids)
times = []
for _ in range(steps):
    t = time.perf_counter()
    m(**batch)
    times.append(time.perf_counter() - t)
times.sort()
print(times[len(times) // 2] * 1e6)
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build/dev")
    ap.add_argument("--python", default="scripts/torch-python")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=300)
    a = ap.parse_args()
    adapter = os.path.join(a.build, "collector", "python")
    if not os.path.exists(os.path.join(adapter, "sitecustomize.py")):
        sys.exit(f"adapter_cost: no adapter in {adapter}; build the tree first")
    tmp = tempfile.mkdtemp(prefix="sl-adapter-cost-")
    job = os.path.join(tmp, "job.py")
    with open(job, "w") as f:
        f.write(JOB)
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SIGHTLINE_OUTPUT")}
    modes = {"without": base, "with the adapter": dict(base, PYTHONPATH=os.path.abspath(adapter), SIGHTLINE_OUTPUT=tmp)}
    for kind in ("padded", "packed"):
        us = {m: [] for m in modes}
        for _ in range(a.rounds):
            for m, env in modes.items():
                p = subprocess.run([a.python, job, kind, str(a.steps)], capture_output=True, text=True, env=env)
                if p.returncode != 0:
                    sys.exit(f"adapter_cost: the job failed: {p.stderr[-800:]}")
                us[m].append(float(p.stdout.split()[-1]))
        w, o = statistics.median(us["with the adapter"]), statistics.median(us["without"])
        print(f"{kind}: step {o:.1f} us without, {w:.1f} us with the adapter: {w - o:+.1f} us a batch "
              f"(rounds: {', '.join(f'{x:.0f}' for x in us['without'])} / {', '.join(f'{x:.0f}' for x in us['with the adapter'])})")


main()
