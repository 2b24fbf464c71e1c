#!/bin/sh
# sightline report TRACE --format json > OUT, then the shared checker against PyTorch's table.
# usage: compare_key_averages.sh SIGHTLINE PYTHON CHECKER TRACE TABLE OUT   (exit 77 = skipped)
set -e
[ -f "$3" ] || { echo "skipped: $3 not found"; exit 77; }
"$1" report "$4" --format json -o "$6"
"$2" "$3" "$6" "$5"
