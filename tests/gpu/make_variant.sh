#!/usr/bin/env bash
# Puts a variant of the trainer's kernels plugin into devbin/NAME, beside copies of the programs
# that load it from beside themselves (sightline-trainer-checks, sightline-trainer and its NCCL
# backend), for tests/gpu/gdn_variants.sh to set against the tree's own (devbin/). Run after
# make_devbin.sh; PLUGIN is the variant's libsightline_trainer_kernels.so, built from a copy of
# the tree with one change (a worktree with its own build folder).
#   tests/gpu/make_variant.sh NAME PLUGIN
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -eq 2 ] || { echo "usage: tests/gpu/make_variant.sh NAME PLUGIN" >&2; exit 2; }
name=$1 plugin=$2
case $name in tree|lib|python|peers|wheels|*/*|"") echo "make_variant: '$name' is taken or not a folder name" >&2; exit 2 ;; esac
[ -f devbin/sightline-trainer-checks ] || { echo "make_variant: no devbin/ (run tests/gpu/make_devbin.sh first)" >&2; exit 1; }
[ -f "$plugin" ] || { echo "make_variant: no plugin at $plugin" >&2; exit 1; }
rm -rf "devbin/$name" && mkdir -p "devbin/$name"
cp devbin/sightline-trainer-checks devbin/sightline-trainer devbin/libsightline_trainer_nccl.so "devbin/$name/"
cp "$plugin" "devbin/$name/libsightline_trainer_kernels.so"
strip --strip-debug "devbin/$name/libsightline_trainer_kernels.so"
du -sh "devbin/$name"
