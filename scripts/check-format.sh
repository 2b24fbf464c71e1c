#!/usr/bin/env bash
# Checks that every C++ and CUDA source of the tree follows .clang-format; prints what differs and
# exits 1 when one does not (reformat with: clang-format -i FILE). Exit 77 (a skip for CTest) when
# clang-format is not installed (scripts/setup.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "check-format: clang-format is not installed (scripts/setup.sh installs it)" >&2
  exit 77
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -d '' files < <(git ls-files -z -- '*.cpp' '*.h' '*.inc' '*.cu' '*.cuh' ':!third_party')
else
  mapfile -d '' files < <(find . -path ./third_party -prune -o -path ./build -prune -o \
    \( -name '*.cpp' -o -name '*.h' -o -name '*.inc' -o -name '*.cu' -o -name '*.cuh' \) -print0)
fi
printf '%s\0' "${files[@]}" | xargs -0 -n 64 clang-format --dry-run -Werror
echo "check-format: ${#files[@]} files follow .clang-format"
