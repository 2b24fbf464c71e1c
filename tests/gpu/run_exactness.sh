#!/bin/sh
# usage: run_exactness.sh SIGHTLINE EXACTNESS PYTHON WORKDIR   (exit 77: no GPU here, skipped)
set -e
if ! nvidia-smi -L >/dev/null 2>&1; then echo "skipped: no GPU"; exit 77; fi
rm -rf "$4"; mkdir -p "$4"
"$1" run -o "$4/cap" --no-import -- "$2" > "$4/expected.json"
cap=$(ls "$4"/cap/*.slcap | head -n 1)
"$1" import "$cap" -o "$4/trace.db"
"$3" "$(dirname "$0")/check_exactness.py" "$4/expected.json" "$4/trace.db"
