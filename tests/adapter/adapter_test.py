#!/usr/bin/env python3
"""The Python adapter on the CPU: tests/adapter/train_job.py (a tiny transformers model, no
annotation) under `sightline run`, its batches read back from the trace and compared with the
job's own count.

usage: adapter_test.py SIGHTLINE TORCH_PYTHON CONFIG.json WORKDIR CASE
CASE: padded | packed | packed_eos | late | broken | dataloader | attach | trainer
Exits 77 (skipped) when the Python has no torch and transformers (or, for `trainer`, no accelerate)."""
import json, os, shutil, subprocess, sys, time

sl, py, config, work, case = sys.argv[1:6]
job = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train_job.py")
work = os.path.join(work, case)
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)

if subprocess.run([py, "-c", "import torch, transformers"], capture_output=True).returncode != 0:
    print("skipped: no torch and transformers in", py)
    sys.exit(77)


def fail(why):
    print("FAIL:", why)
    sys.exit(1)


def run(mode, name, extra_env=None, run_args=(), expect_rc=0):
    """The job under sightline run: (its stdout, its stderr, the capture's path)."""
    out = os.path.join(work, name)
    env = dict(os.environ, **(extra_env or {}))
    p = subprocess.run([sl, "run", "--no-import", "-o", out, *run_args, "--", py, job, config, mode], capture_output=True,
                       text=True, env=env, timeout=600)
    if p.returncode != expect_rc:
        fail(f"{name}: status {p.returncode} (expected {expect_rc}): {p.stderr[-2000:]}")
    caps = sorted(f for f in os.listdir(out) if f.endswith(".slcap"))
    if len(caps) != 1:
        fail(f"{name}: captures {caps}: {p.stderr[-1000:]}")
    return p.stdout, p.stderr, os.path.join(out, caps[0])


def sightline_json(*args):
    p = subprocess.run([sl, *args, "--format", "json"], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        fail(f"sightline {' '.join(args)}: {p.stderr}")
    return json.loads(p.stdout)


def own_batches(stdout):
    return [json.loads(line[6:]) for line in stdout.splitlines() if line.startswith("BATCH ")]


def check_batches(cap, stdout, packed):
    """Every recorded batch equals the job's own count; returns (report, recorded, own)."""
    recorded = sightline_json("padding", cap)["recorded_batches"]
    own = own_batches(stdout)
    if not recorded or len(recorded) > len(own):
        fail(f"{len(recorded)} batches recorded, the job made {len(own)}")
    for i, (r, o) in enumerate(zip(recorded, own)):
        got = {"real": r["real_tokens"], "padded": r["padded_tokens"], "sequences": r["sequences"], "ignored": r["ignored_tokens"],
               "lengths": r["lengths"]}
        if got != o or r["packed"] != packed or not r["by_adapter"] or r["step"] != i + 1:
            fail(f"batch {i + 1}: recorded {r}, the job counted {o}")
    report = sightline_json("report", cap)
    steady = [s["steady"] for s in report["steps"]]
    if len(steady) != len(recorded):
        fail(f"{len(steady)} steps for {len(recorded)} batches")
    kept = [o for o, s in zip(own, steady) if s]
    m = report["metrics"]
    real, padded = sum(o["real"] for o in kept), sum(o["padded"] for o in kept)
    if abs(m["tokens.real"] - real / len(kept)) > 1e-9 or abs(m["tokens.padded"] - padded / len(kept)) > 1e-9 \
            or abs(m["padding.efficiency"] - real / padded) > 1e-12:
        fail(f"report: {m['tokens.real']}/{m['tokens.padded']} eff {m['padding.efficiency']}; job {real}/{padded} over {len(kept)} steady steps")
    print(f"{len(recorded)} batches as the job counted them; steady state {m['tokens.real']:.1f} real / {m['tokens.padded']:.1f} padded "
          f"tokens a step, padding efficiency {m['padding.efficiency']:.4f} (the job's own: {real / padded:.4f})")
    return report, recorded, own


def rules(report):
    return {f["rule"]: f for f in report["findings"]}


def case_padded():
    stdout, _, cap = run("padded", "padded")
    report, _, _ = check_batches(cap, stdout, False)
    m, fired = report["metrics"], rules(report)
    if m["batch.packed"] != 0 or m["stack.transformers"] != 1 or m["stack.hf_trainer"] != 0:
        fail(f"flags: packed {m['batch.packed']}, transformers {m['stack.transformers']}, trainer {m['stack.hf_trainer']}")
    pw = fired.get("padding-waste")
    if not pw or "DataCollatorWithFlattening" not in pw["fix"] or pw["saving_ms"] <= 0:
        fail(f"padding-waste: {pw}")
    if not m["padding.packed_tokens_per_s"] > m["tokens.per_s"]:
        fail(f"packed rows predicted at {m['padding.packed_tokens_per_s']} tokens/s against {m['tokens.per_s']}")
    print(f"padding-waste: saves {pw['saving_ms']:.2f} ms a step; packed rows predicted at "
          f"{m['padding.packed_tokens_per_s']:.0f} real tokens/s against {m['tokens.per_s']:.0f}")


def case_packed():
    stdout, _, cap = run("packed", "packed")
    report, recorded, _ = check_batches(cap, stdout, True)
    m, fired = report["metrics"], rules(report)
    if m["padding.efficiency"] != 1 or m["batch.packed"] != 1 or m["batch.boundaries"] != 1 or m["batch.cu_seqlens"] != 0:
        fail(f"packed rows: {m}")
    if "packed-without-boundaries" not in fired or "packed-attention-without-boundaries" in fired or "padding-waste" in fired:
        fail(f"findings: {sorted(fired)}")
    print("packed rows with position_ids restarts: efficiency 1, packed; the Gated DeltaNet fallback flagged "
          "(no cu_seqlens), attention not")


def case_packed_eos():
    stdout, _, cap = run("packed-eos", "packed_eos")
    report, _, _ = check_batches(cap, stdout, True)
    m, fired = report["metrics"], rules(report)
    if m["batch.packed"] != 1 or m["batch.boundaries"] != 0:
        fail(f"flags: {m['batch.packed']}, {m['batch.boundaries']}")
    if "packed-attention-without-boundaries" not in fired:
        fail(f"findings: {sorted(fired)}")
    print("a packed row without boundaries (examples joined by EOS): flagged packed-attention-without-boundaries")


def case_late():
    stdout, stderr, cap = run("padded", "late", {"SIGHTLINE_ADAPTER_DEFER": "1", "SIGHTLINE_DEBUG": "1"})
    check_batches(cap, stdout, False)
    if "5 batches annotated (5 reported after their step)" not in stderr:
        fail(f"the late path was not taken: {[l for l in stderr.splitlines() if 'adapter' in l]}")
    print("every batch reported a step late (the path GPU batches take): the same counts")


def case_broken():
    user = os.path.join(work, "user-site")
    os.makedirs(user)
    with open(os.path.join(user, "sitecustomize.py"), "w") as f:
        f.write("import sys\nsys.stderr.write('user sitecustomize ran\\n')\n")
    env = {"EXIT_CODE": "3", "PYTHONPATH": user}
    good_out, good_err, _ = run("padded", "intact", env, expect_rc=3)
    if "user sitecustomize ran" not in good_err:
        fail("the job's own sitecustomize did not run after the adapter's")
    bad_out, bad_err, cap = run("padded", "broken", dict(env, BREAK="1"), expect_rc=3)
    broken_dir = os.path.join(work, "adapter-broken")
    shutil.copytree(os.path.join(os.path.dirname(os.path.realpath(sl)), "..", "collector", "python"), broken_dir)
    init = os.path.join(broken_dir, "sightline_adapter", "__init__.py")
    with open(init) as f:
        text = f.read()
    with open(init, "w") as f:
        f.write("raise ImportError('broken on purpose')\n" + text)
    imp_out, imp_err, _ = run("padded", "broken_import", dict(env, SIGHTLINE_ADAPTER_DIR=broken_dir), expect_rc=3)
    for name, out, err in (("a failing batch reader", bad_out, bad_err), ("an adapter that cannot be imported", imp_out, imp_err)):
        lines = [l for l in err.splitlines() if l.startswith("sightline: Python adapter off")]
        if out != good_out or len(lines) != 1 or "user sitecustomize ran" not in err:
            fail(f"{name}: output {'same' if out == good_out else 'differs'}, adapter lines {lines}")
        print(f"{name}: the job's output and status 3 unchanged; one line: {lines[0]}")
    if sightline_json("report", cap)["metrics"]["tokens.real"] is not None:
        fail("the broken adapter still recorded batches")
    off_out, _, off_cap = run("padded", "off", env, run_args=("--no-python-adapter",), expect_rc=3)
    report = sightline_json("report", off_cap)
    if off_out != good_out or report["metrics"]["tokens.real"] is not None:
        fail("--no-python-adapter: the adapter still ran")
    print("--no-python-adapter: no batches recorded, the job's output unchanged")


def case_dataloader():
    stdout, _, cap = run("dataloader", "dataloader")
    report, recorded, _ = check_batches(cap, stdout, False)
    waits = [o for o in report["ops"] if o["name"] == "sightline.dataloader next"]
    if not waits or waits[0]["calls"] != len(recorded) + 1:
        fail(f"DataLoader waits: {waits} for {len(recorded)} batches")
    if not report["metrics"]["dataloader.ms"] >= 55:  # two examples of 30 ms a step
        fail(f"dataloader.ms {report['metrics']['dataloader.ms']}")
    print(f"DataLoader waits marked: {waits[0]['calls']} ranges, {report['metrics']['dataloader.ms']:.1f} ms a step in the loader")


def case_attach():
    """A job started with `sightline run --dormant`: a window of 3 steps opened by attach holds
    those steps' batches, as the job counted them."""
    run_dir = os.path.join(work, "run")
    os.makedirs(run_dir, mode=0o700)
    env = dict(os.environ, REPEAT="2", XDG_RUNTIME_DIR=run_dir)
    out_path, err_path = os.path.join(work, "job.out"), os.path.join(work, "job.err")
    with open(out_path, "w") as out, open(err_path, "w") as err:
        job_p = subprocess.Popen([sl, "run", "--dormant", "-o", os.path.join(work, "caps"), "--", py, job, config, "padded"],
                                 stdout=out, stderr=err, text=True, env=env)

    def wait_for(path, text):
        while job_p.poll() is None:
            with open(path) as f:
                for line in f:
                    if text in line:
                        return line
            time.sleep(0.05)
        fail(f"the job ended before writing '{text}': {open(err_path).read()[-1000:]}")
    pid = wait_for(err_path, "started dormant").split("job ")[1].split()[0]
    # The job is a shell script that execs Python: attach once Python runs (its first output line),
    # not to the shell's collector, whose socket goes with the exec.
    wait_for(out_path, "BATCH ")
    window = os.path.join(work, "window.db")
    a = subprocess.run([sl, "attach", pid, "--steps", "3", "-o", window], capture_output=True, text=True, timeout=240, env=env)
    job_p.wait(timeout=400)
    stdout = open(out_path).read()
    if a.returncode != 0 or job_p.returncode != 0:
        fail(f"attach {a.returncode}: {a.stderr[-500:]}; job {job_p.returncode}: {open(err_path).read()[-500:]}")
    recorded = sightline_json("padding", window)["recorded_batches"]
    own = own_batches(stdout)
    lengths = [o["lengths"] for o in own]
    at = next((i for i in range(len(own) - 2) if lengths[i:i + 3] == [r["lengths"] for r in recorded]), None)
    if len(recorded) != 3 or at is None:
        fail(f"window batches {[r['lengths'] for r in recorded]} not 3 consecutive batches of the job ({lengths})")
    for r, o in zip(recorded, own[at:at + 3]):
        if (r["real_tokens"], r["padded_tokens"], r["sequences"]) != (o["real"], o["padded"], o["sequences"]):
            fail(f"window batch {r} against the job's {o}")
    print(f"attach --steps 3 on the dormant job: its batches {at + 1} to {at + 3} of {len(own)}, as the job counted them")


def case_trainer():
    if subprocess.run([py, "-c", "import accelerate"], capture_output=True).returncode != 0:
        print("skipped: transformers' Trainer needs accelerate (scripts/setup.sh installs it)")
        sys.exit(77)
    stdout, _, cap = run("trainer", "trainer")
    report, _, _ = check_batches(cap, stdout, False)
    m, fired = report["metrics"], rules(report)
    if m["stack.hf_trainer"] != 1 or m["stack.trl"] != 0:
        fail(f"stack: {m['stack.hf_trainer']}, {m['stack.trl']}")
    if "Trainer(..., data_collator=DataCollatorWithFlattening" not in fired.get("padding-waste", {}).get("fix", ""):
        fail(f"padding-waste fix: {fired.get('padding-waste')}")
    print("transformers' Trainer: batches as the job counted them; padding-waste gives the Trainer's fix")


{"padded": case_padded, "packed": case_packed, "packed_eos": case_packed_eos, "late": case_late, "broken": case_broken,
 "dataloader": case_dataloader, "attach": case_attach, "trainer": case_trainer}[case]()
print("OK")
