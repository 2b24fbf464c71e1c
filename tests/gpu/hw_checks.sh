#!/usr/bin/env bash
# Hardware sampling (`sightline run --hw`, CUPTI PM sampling) on the GPU machine, in one device call
# of about 3 minutes, every job under a time limit:
#  1. four microbenchmarks (tests/gpu/hw_job.py) under --hw at 100 us: a bf16 GEMM (tensor pipes busy), an
#     fp32 GEMM with TF32 off (tensor pipes idle), a one-block kernel (the GPU "busy" on one SM),
#     a 4 GiB device-to-device copy (DRAM near its ceiling); each report's title line, sampling
#     status and per-kernel-class figures printed;
#  2. the cost of --hw: one job (hw_job.py mixed) without sightline, under sightline run, and under
#     run --hw at 1000 us and 20 us, alternated over two rounds; each run's measured step time
#     and its ratio to the run without --hw;
#  3. two --hw jobs on one GPU at once: the second cannot have the counters (one line) and records
#     everything else;
#  4. a non-root run (setpriv to nobody) where the machine allows it: what it says, what it recorded;
#  5. the reference trainer on the benchmark config (fused kernels, packed 8,192-token batches, 4
#     steps) under --hw: its figures per step and per kernel class (needs the trainer in devbin/).
# Expects devbin/ (tests/gpu/make_devbin.sh). Results under $OUT. HW_ONLY="1 2" runs those parts.
set -u
source tests/gpu/devbin_env.sh
work=/tmp/slhw; rm -rf $work; mkdir -p $work; chmod 755 $work
JOB=tests/gpu/hw_job.py
want() { [[ " ${HW_ONLY:-1 2 3 4} " == *" $1 "* ]]; }

# The report's hardware figures: the title line, sampling status, steps and kernel classes.
figures() { # CAPTURE_DIR LABEL
    local cap; cap=$(ls -S "$1"/*.slcap 2>/dev/null | head -1)
    [ -n "$cap" ] || { echo "$2: no capture"; return; }
    $SL report "$cap" --format json -o "$1/report.json" 2>/dev/null
    python3 - "$1/report.json" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); label = sys.argv[2]
hw = r.get("hardware") or {}
f = lambda v, unit="%": "-" if v is None else f"{v:.1f}{unit}"
print(f"== {label}: {hw.get('title_line') or 'no hardware figures'}")
print(f"   sampling: {hw.get('sampling') or 'none'}; clock: {hw.get('clock') or '-'}")
for s in hw.get("steps", [])[:3]:
    print(f"   step {s['name']}: {s['time_ms']:.2f} ms, busy {f(s['gpu_busy_pct'])}, SMs active {f(s['sm_active_pct'])}, "
          f"warps {f(s['warps_active_pct'])}, tensor {f(s['tensor_pct'])}, DRAM {f(s['dram_tbps'], ' TB/s')} "
          f"({f(s['dram_ceiling_pct'])} of ceiling)")
for c in hw.get("kernel_classes", [])[:4]:
    print(f"   class {c['class']}: {c['time_ms']:.2f} ms, SMs active {f(c['sm_active_pct'])}, warps {f(c['warps_active_pct'])}, "
          f"tensor {f(c['tensor_pct'])}, DRAM {f(c['dram_tbps'], ' TB/s')} ({f(c['dram_ceiling_pct'])} of ceiling)")
for fd in r.get("findings", []):
    if fd["rule"] in ("few-sm-kernels", "gemm-tensor-idle", "memory-bound-elementwise", "mfu-tensor-check"):
        print(f"   finding {fd['rule']}: {fd['message']}")
PY
}

if want 1; then
# Each job runs long enough to outlast the PM sampler's start-up (0.6 to 0.9 s on the H200, whose
# one long first sample is left out): 300 steps of the 10 ms copy, 40 of the others.
for mode in bf16-gemm fp32-gemm one-block copy; do
    steps=40; [ $mode = copy ] && steps=300
    T 120 $SL run --hw --hw-interval 100 -o $work/$mode --no-import -- python3 $JOB $mode --steps $steps > $work/$mode.out 2> $work/$mode.err \
      || { echo "$mode: status $?"; tail -3 $work/$mode.err; }
    grep "sightline:" $work/$mode.err | grep -iv "wrote\|import" | head -3
    figures $work/$mode $mode | tee $out/hw_$mode.txt
done
fi

if want 2; then
echo "== cost of --hw (hw_job.py mixed, 20 steps; ms a step)"
for round in 1 2; do
    for cfg in plain run hw1000 hw20; do
        case $cfg in
        plain) cmd=(python3 $JOB mixed --steps 20) ;;
        run) cmd=($SL run -o $work/cost_$cfg --no-import -- python3 $JOB mixed --steps 20) ;;
        hw1000) cmd=($SL run --hw --hw-interval 1000 -o $work/cost_$cfg --no-import -- python3 $JOB mixed --steps 20) ;;
        hw20) cmd=($SL run --hw --hw-interval 20 -o $work/cost_$cfg --no-import -- python3 $JOB mixed --steps 20) ;;
        esac
        rm -rf $work/cost_$cfg
        T 120 "${cmd[@]}" 2> $work/cost_$cfg.err | sed -n 's/.*(\(.*\) ms a step).*/\1/p' > $work/cost_${cfg}_$round.ms
        echo "round $round $cfg: $(cat $work/cost_${cfg}_$round.ms) ms a step"
    done
done | tee $out/hw_cost.txt
python3 - $work <<'PY' | tee -a $out/hw_cost.txt
import sys, statistics
w = sys.argv[1]
def ms(cfg):
    vals = [float(open(f"{w}/cost_{cfg}_{r}.ms").read() or "nan") for r in (1, 2)]
    return statistics.mean(vals)
base = ms("run")
for cfg in ("plain", "run", "hw1000", "hw20"):
    print(f"{cfg}: {ms(cfg):.2f} ms a step, {100 * (ms(cfg) / base - 1):+.1f}% against sightline run without --hw")
PY
figures $work/cost_hw20 "mixed at 20 us" | tee -a $out/hw_cost.txt
fi

if want 3; then
echo "== two --hw jobs on one GPU"
T 120 $SL run --hw -o $work/first --no-import -- python3 $JOB bf16-gemm --steps 400 > /dev/null 2> $work/first.err &
first=$!
sleep 8
T 120 $SL run --hw -o $work/second --no-import -- python3 $JOB mixed --steps 5 > /dev/null 2> $work/second.err
wait $first
echo "second job's lines:"; grep "sightline:" $work/second.err | head -3
figures $work/second "second job" | tee $out/hw_busy.txt
cap=$(ls -S $work/second/*.slcap | head -1); $SL report "$cap" 2>/dev/null | grep -m3 -E "^Steps|kernels a step|GPU busy"
fi

if want 4; then
echo "== non-root"
if command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
    mkdir -p $work/nr && chmod 777 $work/nr
    echo "RmProfilingAdminOnly: $(grep -i RmProfilingAdminOnly /proc/driver/nvidia/params 2>/dev/null | awk '{print $2}')"
    T 120 setpriv --reuid=nobody --regid=nogroup --clear-groups env HOME=/tmp LD_LIBRARY_PATH=$LD_LIBRARY_PATH \
      SIGHTLINE_TORCH_BRIDGE=$SIGHTLINE_TORCH_BRIDGE $SL run --hw -o $work/nr/cap --no-import -- python3 $JOB mixed --steps 5 \
      > $work/nr.out 2> $work/nr.err || { echo "status $?"; tail -3 $work/nr.err; }
    echo "non-root job's lines:"; grep "sightline:" $work/nr.err | head -3
    figures $work/nr/cap "non-root" | tee $out/hw_nonroot.txt
else
    echo "no setpriv or no user nobody here: not run"
fi
fi

if want 5; then
echo "== the trainer on the benchmark config under --hw"
if [ -x "$TR" ]; then
    $TR --config $BENCH --synthetic 400 --write-data $work/bench.jsonl > /dev/null 2>&1
    T 240 $SL run --hw -o $work/trainer --no-import -- $TR --config $BENCH --data $work/bench.jsonl --steps 4 --bf16 --device cuda \
      --kernels fused --batching packed --budget 8192 > $work/trainer.out 2> $work/trainer.err || { echo "status $?"; tail -3 $work/trainer.err; }
    grep "sightline:" $work/trainer.err | grep -iv "wrote\|import" | head -3
    figures $work/trainer "trainer fused+packed 8192" | tee $out/hw_trainer.txt
else
    echo "no trainer in devbin/: not run"
fi
fi
