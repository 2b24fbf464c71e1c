#!/usr/bin/env bash
# The advisor on the GPU's clock (docs/metrics.md, "Steps on the GPU's clock"): a GPU-bound job
# whose host runs ahead (tests/gpu/mlp_job.py: 8 bf16 MLP blocks of 4096/16384 on 16x1024 tokens,
# fused AdamW, no sync in the step) recorded by `sightline run` and by torch.profiler, each reported
# by `sightline report`: every step's time against the job's own CUDA-event timer, GPU busy, the
# findings (no launch-bound one); then the same job made launch-bound (tiny layers), which must
# still get one. About 2 minutes on an H200. Expects devbin/ (tests/gpu/make_devbin.sh).
# Writes advisor.txt (and the reports) to $OUT.
set -u
source tests/gpu/devbin_env.sh
work=/tmp/sladvisor; rm -rf $work; mkdir -p $work
small="--hidden 256 --ffn 1024 --batch 2 --seq 64 --steps 8"
{
  echo "### sightline run, GPU-bound"
  T 150 $SL run -o $work/sl -- python3 tests/gpu/mlp_job.py --steps 6 --timer $work/sl_timer.json > $work/sl.out 2>&1 || tail -5 $work/sl.out
  cap=$(ls -S $work/sl/*.slcap | head -1)
  $SL report "$cap" --format json -o $out/sl_report.json && python3 tests/gpu/advisor_compare.py sightline-run $out/sl_report.json $work/sl_timer.json gpu-bound
  echo "### torch.profiler, GPU-bound"
  T 150 python3 tests/gpu/mlp_job.py --steps 6 --torch-profile $work/tp.json.gz --timer $work/tp_timer.json > $work/tp.out 2>&1 || tail -5 $work/tp.out
  $SL report $work/tp.json.gz --format json -o $out/tp_report.json && python3 tests/gpu/advisor_compare.py torch-profiler $out/tp_report.json $work/tp_timer.json gpu-bound
  echo "### the job's own timer without a profiler"
  T 90 python3 tests/gpu/mlp_job.py --steps 6
  echo "### torch.profiler, launch-bound (tiny layers)"
  T 90 python3 tests/gpu/mlp_job.py $small --torch-profile $work/lb.json.gz --timer $work/lb_timer.json > $work/lb.out 2>&1 || tail -5 $work/lb.out
  $SL report $work/lb.json.gz --format json -o $out/lb_report.json && python3 tests/gpu/advisor_compare.py launch-bound $out/lb_report.json $work/lb_timer.json launch-bound
  $SL report $work/tp.json.gz > $out/tp_report.txt
} 2>&1 | tee $out/advisor.txt
