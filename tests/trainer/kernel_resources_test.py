#!/usr/bin/env python3
"""kernel_resources.py on made-up cuobjdump output (no GPU, no cuobjdump): the delta rule kernels
found by name and form among other functions (the held output, no template, too), the check
refusing a missing kernel and a Fixed form's large stack frame (session 42's 656 bytes) and passing
the plugin as it was, SASS counted by kind under predicates and suffixes."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_resources as kr  # noqa: E402


def check(cond, what):
    if not cond:
        raise SystemExit(f"FAIL {what}")


def dump(stacks):
    """cuobjdump --dump-resource-usage's text for the five kernels in both forms, Fixed frames from
    stacks, with another kernel of the plugin among them."""
    lines = ["", "Fatbin elf code:", "================", "arch = sm_90", "", "Resource usage:",
             " Common:", "  GLOBAL:0 CONSTANT[3]:16",
             " Function _ZN9sightline7kernels19rms_norm_bwd_kernelIfLb1ELi8ELi10EEEvPKT_NS0_8NormArgsE:",
             "  REG:128 STACK:216 SHARED:1024 LOCAL:0 CONSTANT[0]:944 TEXTURE:0 SURFACE:0 SAMPLER:0"]
    for k, stack in stacks.items():
        if k == "out_held":  # the held output: no template, a Fixed form alone
            n = len(f"sightline_gdn_{k}")
            lines.append(f" Function _ZN9sightline7kernels{n}sightline_gdn_{k}ENS_3gdn6ParamsENS1_4held4MapsE:")
            lines.append(f"  REG:95 STACK:{stack} SHARED:1024 LOCAL:0 CONSTANT[0]:976 TEXTURE:0 SURFACE:0 SAMPLER:0")
            continue
        pair = k.endswith("_pair")  # the chunk gradients' pairs: a second template argument, Fixed alone
        name = k.removesuffix("_pair")
        n = len(f"sightline_gdn_{name}")
        for fixed in (1,) if pair else (0, 1):
            args = f"Lb{fixed}E" + ("Lb1E" if pair else "Lb0E" if name == "bwd_chunk" else "")
            maps = "NS2_4held4MapsE" if name in ("fwd", "bwd_state") else ""  # the passes' tensor maps after Params
            lines.append(f" Function _ZN9sightline7kernels{n}sightline_gdn_{name}I{args}EEvNS_3gdn6ParamsE{maps}:")
            lines.append(f"  REG:64 STACK:{stack if fixed else 120} SHARED:1024 LOCAL:0 CONSTANT[0]:944 TEXTURE:0 SURFACE:0 SAMPLER:0")
    return "\n".join(lines) + "\n"


def main():
    healthy = {"prep": 8, "fwd": 0, "out": 0, "bwd_state": 0, "bwd_chunk": 16, "bwd_chunk_pair": 24, "out_held": 0}
    found = kr.parse_resources(dump(healthy))
    check(len(found) == 13, f"every function read: {len(found)}")
    gdn = kr.gdn_resources(found)
    want = {(k, f) for k in kr.KERNELS for f in (False, True)} | {("bwd_chunk_pair", True), ("out_held", True)}
    check(set(gdn) == want, f"the kernels by form: {sorted(gdn)}")
    check(gdn[("bwd_chunk_pair", True)]["STACK"] == 24, "the pairs told apart from the chunk gradients' Fixed form")
    check(gdn[("bwd_chunk", True)]["STACK"] == 16 and gdn[("bwd_chunk", False)]["STACK"] == 120, "the forms told apart")
    check(gdn[("out_held", True)]["REG"] == 95, "a kernel with no template read as a Fixed form")
    check(gdn[("bwd_state", True)]["REG"] == 64 and gdn[("prep", True)]["CONSTANT[0]"] == 944, "the fields read")
    check(found[0][0].startswith("_ZN9sightline7kernels19rms_norm") and found[0][1]["STACK"] == 216, "in the dump's order")
    check(kr.problems(gdn) == [], f"the healthy plugin passes: {kr.problems(gdn)}")

    lambda_prep = kr.gdn_resources(kr.parse_resources(dump(dict(healthy, prep=656))))
    bad = kr.problems(lambda_prep)
    check(len(bad) == 1 and "sightline_gdn_prep" in bad[0] and "656-byte" in bad[0], f"a 656-byte frame refused: {bad}")
    check(kr.problems(kr.gdn_resources(kr.parse_resources(dump(dict(healthy, out=kr.STACK_LIMIT))))) == [], "the limit itself passes")

    # a lambda nested in the kernel (mangled under its name) listed after it does not hide its frame,
    # and neither does a second listing of the kernel (another architecture) with a smaller one
    nested = dump(dict(healthy, prep=656)) + (
        " Function _ZZN9sightline7kernels18sightline_gdn_prepILb1EEEvNS_3gdn6ParamsEENKUlT_E_clIDF16bEEDaS3_:\n"
        "  REG:40 STACK:0 SHARED:0 LOCAL:0\n"
        " Function _ZN9sightline7kernels18sightline_gdn_prepILb1EEEvNS_3gdn6ParamsE:\n  REG:64 STACK:8 SHARED:0 LOCAL:0\n")
    check(kr.kernel_name("_ZZN9sightline7kernels18sightline_gdn_prepILb1EEEvNS_3gdn6ParamsEENKUlT_E_clIDF16bEEDaS3_") is None,
          "a nested function is not the kernel")
    bad = kr.problems(kr.gdn_resources(kr.parse_resources(nested)))
    check(len(bad) == 1 and "656-byte" in bad[0], f"the larger frame kept: {bad}")

    no_out = {k: v for k, v in kr.gdn_resources(found).items() if k != ("out", True)}
    check(any("sightline_gdn_out (Fixed form) is not in the plugin" in x for x in kr.problems(no_out)), "a missing kernel refused")
    no_pair = {k: v for k, v in kr.gdn_resources(found).items() if k != ("bwd_chunk_pair", True)}
    check(any("sightline_gdn_bwd_chunk_pair (Fixed form) is not in the plugin" in x for x in kr.problems(no_pair)), "missing pairs refused")
    no_held = {k: v for k, v in kr.gdn_resources(found).items() if k != ("out_held", True)}
    check(any("sightline_gdn_out_held (Fixed form) is not in the plugin" in x for x in kr.problems(no_held)), "a missing held output refused")
    check(any("640-byte" in x for x in kr.problems(kr.gdn_resources(kr.parse_resources(dump(dict(healthy, out_held=640)))))),
          "the held output's frame checked too")
    no_general = {k: v for k, v in kr.gdn_resources(found).items() if k != ("fwd", False)}
    check(any("sightline_gdn_fwd (general form)" in x for x in kr.problems(no_general)), "a missing general form refused")

    sass = """
        /*0000*/                   LDC R1, c[0x0][0x28] ;            /* 0x00000a00ff017b82 */
        /*0010*/              @P0  HMMA.16816.F32.BF16 R4, R8, R12, R4 ;  /* 0x0 */
        /*0020*/             @!P1  LDSM.16.M88.4 R8, [R2] ;          /* 0x0 */
        /*0028*/             @!PT  LDS R9, [R2] ;                    /* 0x0 */
        /*002c*/             @UP0  LDS R9, [R2+0x4] ;                /* 0x0 */
        /*0030*/                   LDS.64 R6, [R3] ;                 /* 0x0 */
        /*0040*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;     /* 0x0 */
        /*0050*/                   LDGSTS.E.BYPASS.128 [R1], desc[UR4][R2.64] ;  /* 0x0 */
        /*0060*/                   EXIT ;                            /* 0x0 */
"""
    c = kr.sass_kinds(sass)
    check(c["all"] == 9 and c["HMMA"] == 1 and c["LDSM"] == 1 and c["LDS"] == 3 and c["BAR"] == 1, f"SASS by kind: {c}")
    check(c["LDGSTS"] == 1 and c["LDG"] == 0 and c["other"] == 2, f"LDGSTS apart from LDG, the rest other: {c}")
    print("kernel_resources_test: ok")


if __name__ == "__main__":
    main()
