#!/usr/bin/env bash
# Checks that every C++ and CUDA source of the tree follows .clang-format; prints what differs and
# exits 1 when one does not (reformat them all with scripts/format-tree.sh). Exit 77 (a skip for
# CTest) when clang-format 14 is not installed (scripts/setup.sh installs it).
exec "$(dirname "$0")/format-tree.sh" --check
