#!/usr/bin/env bash
# How a block of each delta-rule kernel spends its time, phase by phase: the benchmark (one round
# of the three cases, kernels only) on a plugin built with SIGHTLINE_GDN_PHASE_CLOCK
# (examples/trainer/kernels/gdn_phase_clock.h), put into devbin/NAME by make_variant.sh:
#   cmake --preset dev -B build/clock -DSIGHTLINE_GDN_PHASE_CLOCK=ON
#   ninja -C build/clock examples/libsightline_trainer_kernels.so
#   tests/gpu/make_variant.sh clock build/clock/examples/libsightline_trainer_kernels.so
# Prints each kernel's phases (index, the line that wrote the phase, mean cycles a block, share)
# with the source line's text, the table also in $OUT/phase-clock-NAME.txt.
#   tests/gpu/gdn_phase_clock.sh [NAME]
set -u
. "$(dirname "$0")/devbin_env.sh"
name=${1:-clock}
[ -f $bin/$name/libsightline_trainer_kernels.so ] || { echo "gdn_phase_clock: no devbin/$name (make_variant.sh)"; exit 2; }
GDN_BENCH_ONLY=kernels GDN_BENCH_ROUNDS=1 T ${LIMIT:-200} $bin/$name/sightline-trainer-checks $TINY --device cuda --only gdn-bench \
    > /tmp/phase-clock.out 2> /tmp/phase-clock.err
echo "gdn_phase_clock: rc=$?"
grep '^phase clock' /tmp/phase-clock.err > $out/phase-clock-$name.txt || { tail -5 /tmp/phase-clock.err; exit 1; }
python3 "$(dirname "$0")/phase_clock_lines.py" $out/phase-clock-$name.txt "$root/examples/trainer/kernels"
