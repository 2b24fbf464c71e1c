#!/usr/bin/env python3
"""The trainer's delta rule kernels as built, read from the plugin with cuobjdump (no GPU needed).

  kernel_resources.py PLUGIN --check     each delta rule kernel present in both forms, the Fixed
                                         forms' stack frames at most STACK_LIMIT bytes: exit 1 if not
  kernel_resources.py PLUGIN [BASE]      registers, stack frame and static SASS instructions by kind
                                         of every delta rule kernel (Fixed forms), beside BASE's

The Fixed forms (gdn.cu) run at heads of 128, every benchmark and trainer step: their constants fold
and their bodies inline, so their stack frames hold a few spilled words at most (0 to 16 bytes as
of session 43). A body left a call keeps Params in local memory and folds none of its constants:
session 42's first prep on bf16 operands, dispatched through a generic lambda, had a 656-byte frame
(ptxas) and ran 2.8 times slower on the H100 (0.476 -> 1.318 ms a call), which no CPU check could
see. The static counts are what one build's code holds, not what runs (loops count once): a proxy
to set two builds side by side where no GPU is lent, never a timing.

cuobjdump (and nvdisasm for the SASS) from CUDA_TOOLS, third_party/cuda-tools/bin (scripts/setup.sh
installs both there from PyPI: the toolkit on these machines lacks them), /usr/local/cuda/bin or
PATH; exit 77 (skipped) where there is none."""
import argparse
import os
import re
import shutil
import subprocess
import sys
from collections import Counter

KERNELS = ("prep", "fwd", "out", "bwd_state", "bwd_chunk")
# Forms in a Fixed form alone: the chunk gradients in clusters of a key head's two value heads
# (sightline_gdn_bwd_chunk<true, true>, gdn.cu), told here by their second template argument; the
# held output (sightline_gdn_out_held, no template: counted as a Fixed form)
FIXED_ONLY = ("bwd_chunk_pair", "out_held")
STACK_LIMIT = 64
# SASS opcodes counted apart, by the first word of the opcode (predicate and suffixes dropped)
KINDS = ("HMMA", "LDSM", "LDS", "STS", "LDG", "STG", "LDGSTS", "BAR", "MUFU", "SHFL")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tool(name):
    """The path of cuobjdump or nvdisasm, or None."""
    for d in (os.environ.get("CUDA_TOOLS"), os.path.join(REPO, "third_party", "cuda-tools", "bin"), "/usr/local/cuda/bin"):
        if d and os.access(os.path.join(d, name), os.X_OK):
            return os.path.join(d, name)
    return shutil.which(name)


def kernel_name(mangled):
    """(kernel, fixed) for a delta rule kernel's own mangled name, e.g. ('prep', True), else None
    (a function nested in it, such as a lambda left a call, names it too but is not it). A second
    template argument set (the chunk gradients' pairs) names the form apart: ('bwd_chunk_pair', True).
    The state passes and the held output take the held forms' tensor maps after Params (held::Maps)."""
    maps = r"(?:NS\d_4held4MapsE)?"
    m = re.fullmatch(r"_ZN9sightline7kernels\d+sightline_gdn_(\w+?)ILb([01])E(?:Lb([01])E)?EEvNS_3gdn6ParamsE" + maps, mangled)
    if not m:
        plain = re.fullmatch(r"_ZN9sightline7kernels\d+sightline_gdn_(\w+?)ENS_3gdn6ParamsE" + maps, mangled)
        return (plain.group(1), True) if plain else None
    return (m.group(1) + ("_pair" if m.group(3) == "1" else ""), m.group(2) == "1")


def parse_resources(text):
    """[(mangled name, {'REG': n, 'STACK': n, ...})] from cuobjdump --dump-resource-usage, in its
    order (a function built for several architectures is listed once for each)."""
    found, name = [], None
    for line in text.splitlines():
        m = re.match(r"\s*Function (\S+):\s*$", line)
        if m:
            name = m.group(1)
            continue
        if name and "REG:" in line:
            found.append((name, {k: int(v) for k, v in re.findall(r"(\w+(?:\[\d+\])?):(\d+)", line)}))
            name = None
    return found


def gdn_resources(found):
    """{(kernel, fixed): resources} of the delta rule kernels among the plugin's functions."""
    out = {}
    for mangled, res in found:
        k = kernel_name(mangled)
        if k and (k not in out or res.get("STACK", 0) > out[k].get("STACK", 0)):
            out[k] = dict(res, mangled=mangled)  # listed twice (several architectures): the larger frame
    return out


def problems(gdn):
    """What the check refuses, a line each: a kernel missing, a Fixed form's frame too large."""
    lines = []
    for k in KERNELS + FIXED_ONLY:
        for fixed in (False, True) if k in KERNELS else (True,):
            if (k, fixed) not in gdn:
                lines.append(f"sightline_gdn_{k} ({'Fixed' if fixed else 'general'} form) is not in the plugin")
        res = gdn.get((k, True))
        if res and res.get("STACK", 0) > STACK_LIMIT:
            lines.append(f"sightline_gdn_{k} (Fixed form): a {res['STACK']}-byte stack frame, over {STACK_LIMIT}: "
                         "a body left a call, Params in local memory? (kernel_resources.py's docstring)")
    return lines


def sass_kinds(text):
    """Counter of SASS instructions by kind (KINDS, the rest under 'other') and 'all', from
    cuobjdump -sass of one function."""
    c = Counter()
    for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", text):
        op = m.group(1)
        c["all"] += 1
        c[op if op in KINDS else "other"] += 1
    return c


def run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"kernel_resources: {' '.join(args[:2])} failed: {r.stderr.strip()[:300]}")
    return r.stdout


def read_plugin(cuobjdump, plugin):
    if not os.path.isfile(plugin):
        raise SystemExit(f"kernel_resources: no plugin at {plugin}")
    return gdn_resources(parse_resources(run([cuobjdump, "--dump-resource-usage", plugin])))


def table(cuobjdump, plugins):
    """Registers, stack and static SASS counts of each Fixed form, one column a plugin."""
    os.environ.setdefault("NVDISASM_PATH", os.path.dirname(tool("nvdisasm") or cuobjdump))
    cols = []
    for plugin in plugins:
        gdn = read_plugin(cuobjdump, plugin)
        col = {}
        for k in KERNELS + FIXED_ONLY:
            res = gdn.get((k, True))
            if res:
                col[k] = (res, sass_kinds(run([cuobjdump, "-sass", "-fun", res["mangled"], plugin])))
        cols.append(col)
    rows = ["REG", "STACK", "all"] + list(KINDS) + ["other"]
    for k in KERNELS + FIXED_ONLY:
        print(f"sightline_gdn_{k} (Fixed)" + "".join(f"  {label:>12}" for label in ("plugin", "base")[: len(plugins)]))
        for row in rows:
            vals = [c[k][0].get(row) if row in ("REG", "STACK") else c[k][1].get(row, 0) for c in cols if k in c]
            if len(vals) != len(cols):
                continue
            ratio = f"  x{vals[0] / vals[-1]:.3f}" if len(vals) > 1 and vals[-1] else ""  # plugin / base
            print(f"  {row:<8}" + "".join(f"  {v:>12}" for v in vals) + ratio)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("plugin")
    ap.add_argument("base", nargs="?", help="a second plugin to set beside the first (table only)")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    cuobjdump = tool("cuobjdump")
    if not cuobjdump:
        print("kernel_resources: no cuobjdump (scripts/setup.sh installs one into third_party/cuda-tools): skipped")
        return 77
    if a.check:
        gdn = read_plugin(cuobjdump, a.plugin)
        refused = problems(gdn)
        for line in refused:
            print("FAIL", line)
        for k in KERNELS + FIXED_ONLY:
            res = gdn.get((k, True), {})
            print(f"sightline_gdn_{k} (Fixed): {res.get('REG')} registers, a {res.get('STACK')}-byte stack frame")
        return 1 if refused else 0
    table(cuobjdump, [a.plugin] + ([a.base] if a.base else []))
    return 0


if __name__ == "__main__":
    sys.exit(main())
