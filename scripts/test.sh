#!/usr/bin/env bash
# The whole test suite: install what is missing, fetch the default model, build with
# -j2, run every test with ctest. Exits non-zero if anything fails.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${ARBOR_BUILD_DIR:-$root/build}"
"$root/scripts/install_deps.sh"
"$root/scripts/install_test_tools.sh"  # openai (pip) and chromium for the server's client tests
"$root/scripts/fetch_model.sh"
"$root/scripts/build.sh"
cd "$build"
ctest --output-on-failure -j "${ARBOR_TEST_JOBS:-2}" --timeout 900
