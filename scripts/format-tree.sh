#!/usr/bin/env bash
# Reformats every tracked C++ and CUDA source of the tree with .clang-format (clang-format 14,
# the version .clang-format is written for: other versions format some constructs differently).
# With --check, changes nothing: prints what differs and exits 1 when a file does not follow it.
# Exit 77 (a skip for CTest) when clang-format 14 is not installed (scripts/setup.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=(-i)
[ "${1:-}" = --check ] && mode=(--dry-run -Werror)
tool=""
for t in clang-format-14 clang-format; do
  if command -v "$t" >/dev/null && "$t" --version | grep -q 'version 14\.'; then tool=$t; break; fi
done
if [ -z "$tool" ]; then
  echo "format-tree: clang-format 14 is not installed (scripts/setup.sh installs it)" >&2
  exit 77
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -d '' files < <(git ls-files -z -- '*.cpp' '*.h' '*.inc' '*.cu' '*.cuh' ':!third_party')
else
  mapfile -d '' files < <(find . -path ./third_party -prune -o -path ./build -prune -o \
    \( -name '*.cpp' -o -name '*.h' -o -name '*.inc' -o -name '*.cu' -o -name '*.cuh' \) -print0)
fi
printf '%s\0' "${files[@]}" | xargs -0 -n 64 "$tool" "${mode[@]}"
if [ "${mode[0]}" = -i ]; then
  echo "format-tree: ${#files[@]} files formatted with $tool"
else
  echo "format-tree: ${#files[@]} files follow .clang-format"
fi
