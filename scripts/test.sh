#!/usr/bin/env bash
# The whole test suite: install what is missing, fetch the default model, build with
# -j2, run the lower layers' tests under AddressSanitizer + UBSan, the concurrency tests
# under ThreadSanitizer (scripts/tsan.sh), the fuzz targets for a bounded time
# (scripts/fuzz.sh), compile the CUDA backend (-DARBOR_CUDA=ON, when nvcc is installed),
# then every test with ctest. The sanitizer stage also runs the CUDA tests on the CUDA
# emulator (tests/cuda_emulator). Exits non-zero if anything fails.
# ARBOR_SKIP_SANITIZE=1 skips the ASan stage, ARBOR_SKIP_TSAN=1 the TSan stage,
# ARBOR_SKIP_FUZZ=1 the fuzz stage (ARBOR_FUZZ_SECONDS per target, default 40),
# ARBOR_SKIP_CUDA=1 the CUDA compile stage.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${ARBOR_BUILD_DIR:-$root/build}"
"$root/scripts/install_deps.sh"
"$root/scripts/install_test_tools.sh"  # openai (pip) and chromium for the server's client tests
"$root/scripts/fetch_model.sh"
"$root/scripts/build.sh"

if [ "${ARBOR_SKIP_SANITIZE:-0}" != 1 ]; then
  # The same build carries the CUDA backend compiled for the CUDA emulator
  # (tests/cuda_emulator): its device stays hidden for the suites' own run, then the CUDA
  # tests run on it, so every kernel and the CUDA engine run here, under ASan + UBSan.
  echo "[arbor] sanitizer stage: ASan + UBSan build of the common/kernels/cache/model/workflows tests"
  asan="$root/build-asan"
  [ -f "$asan/CMakeCache.txt" ] || cmake -S "$root" -B "$asan" -DARBOR_SANITIZE=ON -DARBOR_CUDA_EMULATOR=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DARBOR_BENCH=OFF >/dev/null
  suites=(arbor_common_tests arbor_kernels_tests arbor_cache_tests arbor_model_tests arbor_workflows_tests)
  cmake --build "$asan" -j "${ARBOR_JOBS:-2}" --target "${suites[@]}" arbor_cuda_emulator_tests >/dev/null
  for s in "${suites[@]}"; do
    echo "[arbor] sanitizer: $s"
    "$asan/tests/$s" --gtest_brief=1
  done
  echo "[arbor] sanitizer: the CUDA backend on the CUDA emulator (the emulator's tests, then the Cuda* tests)"
  "$asan/tests/arbor_cuda_emulator_tests" --gtest_brief=1
  for s in arbor_kernels_tests arbor_model_tests; do
    ARBOR_CUDA_EMULATOR_DEVICES=1 "$asan/tests/$s" --gtest_brief=1 --gtest_filter='Cuda*'
  done
fi

if [ "${ARBOR_SKIP_TSAN:-0}" != 1 ]; then
  echo "[arbor] ThreadSanitizer stage: thread pool, actors, runtime and server concurrency tests (build-tsan/)"
  "$root/scripts/tsan.sh"
fi

# The fuzz stage replays every past finding (fuzz/corpus/*/regress_*) before fuzzing.
if [ "${ARBOR_SKIP_FUZZ:-0}" != 1 ]; then
  echo "[arbor] fuzz stage: libFuzzer targets (fuzz/), ${ARBOR_FUZZ_SECONDS:-40}s each"
  "$root/scripts/fuzz.sh"
fi

if [ "${ARBOR_SKIP_CUDA:-0}" != 1 ] && command -v nvcc >/dev/null; then
  # Without a GPU nothing CUDA runs here: this keeps every CUDA source (kernels, engine,
  # their tests) compiling; scripts/device_check.sh builds and runs them on a GPU machine.
  echo "[arbor] CUDA compile stage: every CUDA source with -DARBOR_CUDA=ON (compile only)"
  cuda_build="$root/build-cuda"
  [ -f "$cuda_build/CMakeCache.txt" ] || cmake -S "$root" -B "$cuda_build" -DARBOR_CUDA=ON \
    -DCMAKE_BUILD_TYPE=Release -DARBOR_BENCH=OFF >/dev/null
  cmake --build "$cuda_build" -j "${ARBOR_JOBS:-2}" --target arbor_cuda_compile_check >/dev/null
fi

cd "$build"
ctest --output-on-failure -j "${ARBOR_TEST_JOBS:-2}" --timeout 900
