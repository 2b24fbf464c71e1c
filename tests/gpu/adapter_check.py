#!/usr/bin/env python3
"""Reads back what tests/gpu/adapter_checks.sh recorded and prints the figures it is for.

  adapter_check.py peer SIGHTLINE WORK KERNELS BUDGET WARM STEPS
      WORK holds the peer's runs: pad (padded, adapter), noadapter (padded, --no-python-adapter),
      pack (packed, adapter), each NAME.out (the peer's RESULT line) and NAME/ (its capture and
      trace database). Every batch the adapter recorded is compared with the peer's own batching
      (the same lengths and greedy batching as peer_stack.py, recomputed here); the padding
      efficiency of the peer's timed steps with its own figure; step time with and without the
      adapter; the padded run's padding-waste saving with the packed run's measured gain.
  adapter_check.py trainer SIGHTLINE WORK
      WORK holds trainer-pad and trainer-pack (if run): the report's tokens against the trainer's
      log (log-NAME.jsonl), and the padded run's predicted saving against the packed run's gain.
Prints CHECK lines (PASS or FAIL) and exits 1 when any failed."""
import glob, json, math, os, random, subprocess, sys

failed = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        failed.append(what)


def db(work, name):
    found = sorted(glob.glob(os.path.join(work, name, "*.db")), key=os.path.getsize)
    return found[-1] if found else None


def sl_json(sl, *args):
    p = subprocess.run([sl, *args, "--format", "json"], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        print(f"sightline {' '.join(args)}: {p.stderr.strip()}")
        return None
    return json.loads(p.stdout)


def result(work, name):
    path = os.path.join(work, name + ".out")
    for line in open(path) if os.path.exists(path) else []:
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return None


def peer_batches(batch, budget):
    """peer_stack.py's batches: lognormal chat lengths (median 1100, sigma 0.6, [64, 8192], seed 0), greedy."""
    random.seed(0)
    lens = [max(64, min(8192, int(random.lognormvariate(math.log(1100), 0.6)))) for _ in range(4000)]
    batches, cur = [], []
    for l in lens:
        full = cur and ((len(cur) + 1) * max(max(cur), l) > budget if batch == "padded" else sum(cur) + l > budget)
        if full:
            batches.append(cur)
            cur = []
        if l <= budget:
            cur.append(l)
    return batches


def compare_batches(name, recorded, expected, packed):
    n = len(recorded)
    bad = [i for i, (r, e) in enumerate(zip(recorded, expected))
           if r["lengths"] != e or r["real_tokens"] != sum(e) or r["sequences"] != len(e)
           or r["padded_tokens"] != (sum(e) if packed else len(e) * max(e)) or r["packed"] != (packed and len(e) > 1)]
    check(n == len(expected) and not bad, f"{name}: {n} batches recorded by the adapter, {len(expected)} made by the job; "
                                          f"{n - len(bad)} equal in real and padded tokens, sequences and lengths"
                                          + (f" (first difference at batch {bad[0] + 1}: {recorded[bad[0]]} vs {expected[bad[0]]})" if bad else ""))


def peer(sl, work, kernels, budget, warm, steps):
    budget, warm, steps = int(budget), int(warm), int(steps)
    runs = {}
    for name, batch in (("pad", "padded"), ("pack", "packed")):
        d, res = db(work, name), result(work, name)
        if not d or not res or "real_tok_s" not in res:
            print(f"{name}: no trace or no RESULT ({res})")
            continue
        sim = sl_json(sl, "padding", d)
        rep = sl_json(sl, "report", d)
        if not sim or not rep:
            continue
        expected = peer_batches(batch, budget)[:warm + steps]
        rec = sim["recorded_batches"]
        compare_batches(f"peer {kernels} {batch}", rec, expected, batch == "packed")
        timed = rec[warm:warm + steps]
        real, padded = sum(b["real_tokens"] for b in timed), sum(b["padded_tokens"] for b in timed)
        eff = real / padded if padded else float("nan")
        check(abs(eff - res["padding_eff"]) <= 0.005 * res["padding_eff"],
              f"peer {batch}: padding efficiency of its {steps} timed steps from the trace {eff:.4f}, the job's own {res['padding_eff']:.3f} "
              f"(steady state of the report {rep['metrics']['padding.efficiency']:.4f})")
        runs[batch] = (res, rep, sim)
        m = rep["metrics"]
        print(f"peer {batch}: {res['s_per_step']} s a step, {res['real_tok_s']} real tokens/s (the job's own); trace: "
              f"{m['tokens.per_s']:.0f} real tokens/s, packed {m['batch.packed']}, boundaries {m['batch.boundaries']}, "
              f"cu_seqlens {m['batch.cu_seqlens']}; findings {[f['rule'] for f in rep['findings']]}")
    base = result(work, "noadapter")
    if "padded" in runs and base and "s_per_step" in base:
        with_adapter = runs["padded"][0]["s_per_step"]
        print(f"step time, padded: {with_adapter} s with the adapter, {base['s_per_step']} s without "
              f"({100 * (with_adapter / base['s_per_step'] - 1):+.1f}%)")
        d = db(work, "noadapter")
        off = sl_json(sl, "report", d) if d else None
        if off:
            on, offm = runs["padded"][1]["metrics"], off["metrics"]
            check(on["sync.calls"] == offm["sync.calls"],
                  f"peer padded: host synchronisations a step {on['sync.calls']} with the adapter, {offm['sync.calls']} without; "
                  f"device-to-host copies {on['memcpy.dtoh_count']} and {offm['memcpy.dtoh_count']} (the adapter's are asynchronous)")
    if "padded" in runs and "packed" in runs:
        pad_res, pad_rep, _ = runs["padded"]
        pw = next((f for f in pad_rep["findings"] if f["rule"] == "padding-waste"), None)
        m = pad_rep["metrics"]
        check(pw is not None, "peer padded: padding-waste fires" + (f", saving {pw['saving_ms']:.1f} ms a step ({pw['saving_pct']:.1f}%)" if pw else ""))
        predicted = m["padding.packed_tokens_per_s"] / m["tokens.per_s"]
        measured = runs["packed"][0]["real_tok_s"] / pad_res["real_tok_s"]
        print(f"packing gain: predicted {predicted:.2f}x from the padded trace ({m['padding.packed_tokens_per_s']:.0f} against "
              f"{m['tokens.per_s']:.0f} real tokens/s; {m['padding.token_cost_us']:.3f} us a token, {m['padding.batch_cost_ms']:.2f} ms a batch), "
              f"measured {measured:.2f}x ({runs['packed'][0]['real_tok_s']} against {pad_res['real_tok_s']} real tokens/s, the job's own)")


def trainer(sl, work):
    runs = {}
    for name in ("trainer-pad", "trainer-pack"):
        d, log = db(work, name), os.path.join(work, f"log-{name}.jsonl")
        if not d or not os.path.exists(log):
            continue
        rep = sl_json(sl, "report", d)
        if not rep:
            continue
        logged = [json.loads(l) for l in open(log)]
        steady = [logged[i] for i, s in enumerate(rep["steps"]) if s["steady"] and i < len(logged)]
        m = rep["metrics"]
        real = sum(s["real_tokens"] for s in steady) / max(1, len(steady))
        padded = sum(s["padded_tokens"] for s in steady) / max(1, len(steady))
        check(len(rep["steps"]) == len(logged) and abs(m["tokens.real"] - real) < 1e-6 and abs(m["tokens.padded"] - padded) < 1e-6,
              f"{name}: steady-state tokens a step {m['tokens.real']:.1f} real / {m['tokens.padded']:.1f} padded, the trainer's log "
              f"{real:.1f} / {padded:.1f} ({len(rep['steps'])} steps, {len(logged)} logged)")
        eff = real / padded
        check(abs(m["padding.efficiency"] - eff) <= 0.005 * eff, f"{name}: padding efficiency {m['padding.efficiency']:.4f}, the log's {eff:.4f}")
        tail = logged[2:]
        tps = sum(s["real_tokens"] for s in tail) / sum(s["seconds"] for s in tail)
        runs[name] = (rep, tps)
        print(f"{name}: {tps:.0f} real tokens/s over steps 3-{len(logged)} (the trainer's log); findings {[f['rule'] for f in rep['findings']]}")
    if "trainer-pad" in runs and "trainer-pack" in runs:
        rep, tps = runs["trainer-pad"]
        m = rep["metrics"]
        pw = next((f for f in rep["findings"] if f["rule"] == "padding-waste"), None)
        check(pw is not None and "--batching packed" in pw["fix"], "trainer padded: padding-waste fires with the trainer's fix"
              + (f", saving {pw['saving_ms']:.1f} ms a step ({pw['saving_pct']:.1f}%)" if pw else ""))
        print(f"trainer packing gain: predicted {m['padding.packed_tokens_per_s'] / m['tokens.per_s']:.2f}x, measured "
              f"{runs['trainer-pack'][1] / tps:.2f}x")


if __name__ == "__main__":
    {"peer": peer, "trainer": trainer}[sys.argv[1]](*sys.argv[2:])
    print(f"{len(failed)} check(s) failed" if failed else "all checks passed")
    sys.exit(1 if failed else 0)
