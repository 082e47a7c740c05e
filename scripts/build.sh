#!/usr/bin/env bash
# Configures (once) and builds Arbor into build/ (or $ARBOR_BUILD_DIR).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${ARBOR_BUILD_DIR:-$root/build}"
jobs="${ARBOR_JOBS:-2}"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "$@"
fi
cmake --build "$build" -j "$jobs"
