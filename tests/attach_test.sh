#!/usr/bin/env bash
# Attach windows on a dormant job (CPU only here): sightline ps lists it; a step window holds
# exactly its steps; a timed window works after it; a second client during a window hears "busy";
# malformed frames are refused without harm; another user is refused; the job runs to its end.
# usage: attach_test.sh SIGHTLINE COLLECTOR LONG_OPS WORKDIR
set -u
SL=$1; COLLECTOR=$2; PROG=$3; W=$4
rm -rf "$W"; mkdir -p "$W/run" "$W/caps"; chmod 700 "$W/run"
fail() { echo "FAIL: $*"; kill "$pid" 2>/dev/null; exit 1; }
export XDG_RUNTIME_DIR=$W/run
SIGHTLINE_OUTPUT=$W/caps SIGHTLINE_DORMANT=1 LD_PRELOAD=$COLLECTOR "$PROG" 400 > "$W/job.out" 2> "$W/job.err" &
pid=$!
for i in $(seq 1 100); do [ -S "$W/run/sightline/$pid.sock" ] && break; sleep 0.05; done
[ -S "$W/run/sightline/$pid.sock" ] || fail "no control socket"
[ "$(stat -c %a "$W/run/sightline/$pid.sock")" = 600 ] || fail "socket mode is not 0600"

"$SL" ps > "$W/ps.out" 2>&1; grep -q "^$pid " "$W/ps.out" || fail "ps does not list the job: $(cat "$W/ps.out")"

"$SL" attach "$pid" --steps 3 > "$W/a1.out" 2> "$W/a1.err" || fail "step window: $(cat "$W/a1.err")"
grep -q "3 step(s) found by user range" "$W/a1.out" || fail "step window: $(head -20 "$W/a1.out")"
grep -Eq "aten::mm +op +3 " "$W/a1.out" || fail "step window ops: $(grep aten:: "$W/a1.out" | head)"

"$SL" attach "$pid" --duration 300ms > "$W/a2.out" 2> "$W/a2.err" || fail "timed window: $(cat "$W/a2.err")"
grep -q "step(s) found" "$W/a2.out" || fail "timed window: $(head "$W/a2.out")"

"$SL" attach "$pid" --duration 1s > /dev/null 2>&1 &
first=$!
sleep 0.3
"$SL" attach "$pid" --duration 100ms > /dev/null 2> "$W/busy.err" && fail "a second window was allowed"
grep -q "busy" "$W/busy.err" || fail "no busy answer: $(cat "$W/busy.err")"
wait "$first" || fail "the first window failed"

# Malformed frames: garbage, a wrong version, an oversized length, a truncated frame.
python3 - "$W/run/sightline/$pid.sock" <<'PY' || fail "malformed frames were not refused"
import socket, struct, sys
def send(data):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(8); s.connect(sys.argv[1]); s.sendall(data)
    if len(data) < 12: s.shutdown(socket.SHUT_WR)
    reply = s.recv(4096); s.close(); return reply
magic = struct.pack("<I", 0x54434c53)
for bad in (b"hello world, not a frame", magic + struct.pack("<HHI", 9, 1, 0), magic + struct.pack("<HHI", 1, 2, 1 << 20),
            magic + struct.pack("<HHI", 1, 77, 0), magic + struct.pack("<HH", 1, 2)):
    r = send(bad)
    assert len(r) >= 12 and struct.unpack("<I", r[:4])[0] == 0x54434c53 and struct.unpack("<H", r[6:8])[0] == 104, r
PY
kill -0 "$pid" 2>/dev/null || fail "the job died"

# Another user: refused by the directory's permissions or by the peer check.
if [ "$(id -u)" = 0 ] && command -v runuser > /dev/null; then
  if runuser -u nobody -- env XDG_RUNTIME_DIR="$W/run" "$SL" attach "$pid" --duration 100ms > /dev/null 2> "$W/other.err"; then
    fail "another user could attach"
  fi
fi
wait "$pid" || fail "the job failed: $(cat "$W/job.err")"
[ -e "$W/run/sightline/$pid.sock" ] && fail "the socket was left behind"
echo "attach windows: all checks passed"
