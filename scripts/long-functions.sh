#!/usr/bin/env bash
# Lists the functions (and Catch2 test cases) of the tree's C++ and CUDA sources longer than
# LIMIT lines (default 100) whose comment above does not say why ("over 100 lines"); exits 1 when
# there is one. Functions are found by universal-ctags; exit 77 (a skip for CTest) without it
# (scripts/setup.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
limit=${1:-100}
if ! ctags --version 2>/dev/null | grep -q 'Universal Ctags'; then
  echo "long-functions: universal-ctags is not installed (scripts/setup.sh installs it)" >&2
  exit 77
fi
mapfile -d '' files < <(git ls-files -z -- '*.cpp' '*.h' '*.inc' '*.cu' '*.cuh' ':!third_party')
tags=$(mktemp)
trap 'rm -f "$tags"' EXIT
ctags --output-format=json --fields=+ne --kinds-c++=f --language-force=C++ -o "$tags" "${files[@]}" 2>/dev/null || true
python3 - "$limit" "$tags" "${files[@]}" <<'PY'
import json, re, sys
limit = int(sys.argv[1])
spans = []  # (path, first line, last line, name)
for line in open(sys.argv[2]):
    t = json.loads(line)
    if "end" in t:
        spans.append((t["path"], t["line"], t["end"], t["name"]))
# Catch2 test cases: from TEST_CASE( to the first '}' at the start of a line.
for path in sys.argv[3:]:
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    for i, l in enumerate(lines):
        if l.startswith("TEST_CASE("):
            for j in range(i + 1, len(lines)):
                if lines[j].startswith("}"):
                    spans.append((path, i + 1, j + 1, l[:60]))
                    break
cache, bad = {}, []
for path, first, last, name in sorted(spans):
    if last - first + 1 <= limit:
        continue
    lines = cache.setdefault(path, open(path, encoding="utf-8", errors="replace").read().split("\n"))
    k, why = first - 2, False
    while k >= 0 and lines[k].lstrip().startswith("//"):
        why |= "over 100 lines" in lines[k]
        k -= 1
    print(f"{path}:{first}: {name}: {last - first + 1} lines" + ("" if not why else " (the comment above says why)"))
    if not why:
        bad.append(name)
if bad:
    print(f"long-functions: {len(bad)} function(s) over {limit} lines without a comment saying why", file=sys.stderr)
    sys.exit(1)
print(f"long-functions: every function over {limit} lines says why")
PY
