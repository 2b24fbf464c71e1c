#!/usr/bin/env bash
# Nsight Compute on the gated delta rule's five kernels (docs/trainer.md): the first forward and
# backward of the bench's 1 x 8,192 case (launches 22-27 of the kernels, after the forward timing's
# 21: 7 forwards of prep, state pass and output), --set full, with the CUDA source lines when the
# kernels plugin was built with -lineinfo.
# Prints each kernel's headline figures (time, occupancy, throughputs, warp stalls, shared-memory
# bank conflicts) and writes them to $OUT, with each kernel's source page (so far it shows only
# gdn.cu's own lines, not the headers holding the bodies) and the report when it is small enough
# to come back; then each kernel's instruction mix and its phases (tests/gpu/gdn_sass_mix.py).
# LIB=DIR takes the kernels plugin and sightline-trainer-checks from DIR instead of devbin/ (for
# instance a copy of the plugin built with nvcc -lineinfo, which make_devbin.sh does not make).
set -u
. "$(dirname "$0")/devbin_env.sh"
lib=${LIB:-$bin}
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "SKIP ncu: Nsight Compute is not on this machine"; exit 0; }
work=/tmp/slncu; rm -rf $work; mkdir -p $work
GDN_BENCH_ONLY=kernels T ${NCU_LIMIT:-400} $ncu --set full --import-source yes -k regex:sightline_gdn --launch-skip 21 -c 6 \
  -o $work/gdn $lib/sightline-trainer-checks $TINY --device cuda --only gdn-bench > $work/ncu.log 2>&1
echo "ncu rc=$?"; grep -E "==PROF==|==ERROR==|==WARNING==" $work/ncu.log | head -5
$ncu --import $work/gdn.ncu-rep --page details > $out/ncu_details.txt 2>&1
grep -E "^  sightline_gdn|Duration|Achieved Occupancy|Theoretical Occupancy|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Hit|Registers Per|Block Limit|Shared Memory Configuration Size|Issue Slots Busy|Warp Cycles Per Issued|bank|Bank" $out/ncu_details.txt | head -150
$ncu --import $work/gdn.ncu-rep --page raw --csv --metrics smsp__pcsamp_warps_issue_stalled_barrier,smsp__pcsamp_warps_issue_stalled_long_scoreboard,smsp__pcsamp_warps_issue_stalled_short_scoreboard,smsp__pcsamp_warps_issue_stalled_mio_throttle,smsp__pcsamp_warps_issue_stalled_math_pipe_throttle,smsp__pcsamp_warps_issue_stalled_lg_throttle,smsp__pcsamp_warps_issue_stalled_wait,smsp__pcsamp_warps_issue_stalled_selected,smsp__pcsamp_warps_issue_stalled_not_selected,smsp__pcsamp_sample_count,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active > $out/ncu_stalls.csv 2>&1
cat $out/ncu_stalls.csv | cut -c1-1500
for k in prep fwd out_held out bwd_state bwd_chunk; do
  $ncu --import $work/gdn.ncu-rep -k regex:sightline_gdn_$k\$ --page source --csv --print-source cuda > $out/ncu_source_$k.csv 2>&1 || true
  # the SASS with each instruction's count and stall samples: its mix, and phase by phase
  $ncu --import $work/gdn.ncu-rep -k regex:sightline_gdn_$k\$ --launch-count 1 --page source --csv --print-source sass > $work/sass_$k.csv 2>&1 &&
    { echo "=== $k: instruction mix (warp level), phases between barriers"; python3 "$(dirname "$0")/gdn_sass_mix.py" $work/sass_$k.csv --phases | head -${SASS_LINES:-60}; }
done
# the backward's prep (the second prep launch: it also makes V' = U - W S)
$ncu --import $work/gdn.ncu-rep -k regex:sightline_gdn_prep\$ --launch-skip 1 --launch-count 1 --page source --csv --print-source sass > $work/sass_prep_bwd.csv 2>&1 &&
  { echo "=== prep (backward): instruction mix (warp level), phases between barriers"; python3 "$(dirname "$0")/gdn_sass_mix.py" $work/sass_prep_bwd.csv --phases | head -${SASS_LINES:-60}; }
ls -la $out; cp $work/gdn.ncu-rep $out/ 2>/dev/null
