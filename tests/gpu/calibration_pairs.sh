#!/usr/bin/env bash
# Calibration pairs for the advisor's savings (docs/rules.md, "Calibration"): one process runs each
# before/after pair of tests/gpu/calibration_job.py (fused vs foreach and for-loop AdamW, fp32 vs
# bf16, eager vs SDPA attention, a slow data loader, a mid-step .item(), padded vs packed, eager vs
# compiled), timing both sides and recording the "before" side with torch.profiler; then
# calibration_table.py prints predicted against measured savings as a Markdown table. About 4
# minutes on an H200 (the compiled side compiles for about a minute). Expects devbin/
# (tests/gpu/make_devbin.sh). Writes calibration.md and the traces to $OUT.
set -u
source tests/gpu/devbin_env.sh
T 480 python3 tests/gpu/calibration_job.py --out $out/calibration 2>&1 | grep -v -i warn | tail -30
python3 tests/gpu/calibration_table.py $SL $out/calibration | tee $out/calibration.md
