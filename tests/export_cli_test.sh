#!/usr/bin/env bash
# sightline export on the command line: the bundled trace, its gzip export, its trace database and
# (where the test program is built) a capture of `sightline run`, each exported, checked by
# check_chrome_trace.py and read back with the same report (tables, steps, metrics, findings) as
# its source; bad input and an unwritable output give one line and status 1.
# usage: export_cli_test.sh SIGHTLINE PYTHON FIXTURE OUTDIR [TORCH_OPS_PROGRAM]
set -euo pipefail
SL=$1 PY=$2 FIXTURE=$3 OUT=$4 JOB=${5:-}
CHECK="$(dirname "$0")/check_chrome_trace.py"
rm -rf "$OUT" && mkdir -p "$OUT"

roundtrip() { # SOURCE EXPORT_NAME
    local src=$1 name=$2
    "$SL" export "$src" -o "$OUT/$name"
    "$SL" report "$src" --format json -o "$OUT/$name.source-report.json"
    "$SL" report "$OUT/$name" --format json -o "$OUT/$name.export-report.json"
    "$PY" "$CHECK" "$OUT/$name" --same-report "$OUT/$name.source-report.json" "$OUT/$name.export-report.json"
}

roundtrip "$FIXTURE" fixture.json
roundtrip "$FIXTURE" fixture.json.gz
"$SL" import "$FIXTURE" -o "$OUT/fixture.db" 2>/dev/null
roundtrip "$OUT/fixture.db" database.json
if [ -n "$JOB" ]; then
    "$SL" run --no-import -o "$OUT/run" -- "$JOB" >/dev/null 2>&1
    roundtrip "$(ls "$OUT"/run/*.slcap | head -1)" capture.json
fi

one_line_error() { # EXPECTED_TEXT ARGS...
    local expect=$1; shift
    local err rc=0
    err=$("$SL" "$@" 2>&1 >/dev/null) || rc=$?
    if [ "$rc" != 1 ] || [ "$(printf '%s\n' "$err" | wc -l)" != 1 ] || [[ "$err" != "sightline: "*"$expect"* ]]; then
        echo "FAILED: sightline $*: status $rc, stderr: $err"; exit 1
    fi
}
one_line_error "no such file" export /nonexistent/trace.json -o "$OUT/x.json"
one_line_error "cannot write" export "$FIXTURE" -o "$OUT/no/such/dir/x.json"
[ ! -e "$OUT/no" ] || { echo "FAILED: an unwritable export left files"; exit 1; }
echo "export checks passed"
