#!/usr/bin/env bash
# Installs Arbor from a build tree into a temporary prefix, builds examples/embed
# against the installed package with find_package(arbor), and runs it on the default
# model. Used by ctest (embed_example_builds_against_install).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:?usage: check_embed_example.sh BUILD_DIR}"
prefix="$build/embed-install"
rm -rf "$prefix" "$build/embed-build"
cmake --install "$build" --prefix "$prefix" >/dev/null
cmake -S "$root/examples/embed" -B "$build/embed-build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build/embed-build" -j 2 >/dev/null
"$build/embed-build/embed_example" "$root/models/SmolLM2-135M-Instruct.Q4_1.gguf" \
  "$root/workflows/examples/refine_loop.json"
