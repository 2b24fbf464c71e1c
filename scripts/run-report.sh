#!/usr/bin/env bash
# The main job on a machine without a GPU: set up, build (release), and print the report of the
# bundled real trace (one training step of a Qwen3-Next model on the transformers torch fallback,
# recorded on an H200). Extra arguments go to `sightline report` (for example --format md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release
exec build/release/cli/sightline report tests/fixtures/kineto/qwen3next_fallback_small.json.gz "$@"
