#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang from Debian, into build-fuzz/) and runs each
# for ARBOR_FUZZ_SECONDS (default 40) from its checked-in corpus (fuzz/corpus/<target>/,
# which also holds the inputs of past findings: every run replays them first).
# Exits non-zero on a crash, a leak, a hang (> 10 s for one input) or a broken
# invariant; the input that did it is saved in build-fuzz/findings/<target>/.
# Usage: scripts/fuzz.sh [target...]   (default: all five)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${ARBOR_FUZZ_BUILD_DIR:-$root/build-fuzz}"
seconds="${ARBOR_FUZZ_SECONDS:-40}"
clang_version=19  # Debian 12's clang-14 cannot compile libstdc++'s <expected>
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(workflow_fuzz gguf_fuzz http_request_fuzz openai_request_fuzz server_config_fuzz)

if ! command -v "clang++-$clang_version" >/dev/null ||
   ! dpkg-query -W -f='${Status}' "libclang-rt-$clang_version-dev" 2>/dev/null | grep -q "install ok installed"; then
  echo "[arbor] installing: clang-$clang_version libclang-rt-$clang_version-dev (libFuzzer)"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends \
    "clang-$clang_version" "libclang-rt-$clang_version-dev"
fi

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
[ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" -DARBOR_FUZZ=ON -DARBOR_TESTS=OFF \
  -DARBOR_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_COMPILER=clang++-$clang_version" "${launcher[@]}" >/dev/null
cmake --build "$build" -j "${ARBOR_JOBS:-2}" --target "${targets[@]}" >/dev/null

# Symbolized stacks in the reports (any LLVM's symbolizer reads clang-19's DWARF).
for s in "llvm-symbolizer-$clang_version" llvm-symbolizer-14 llvm-symbolizer; do
  if command -v "$s" >/dev/null; then export ASAN_SYMBOLIZER_PATH="$(command -v "$s")"; break; fi
done

status=0
for t in "${targets[@]}"; do
  dict="$root/fuzz/dict/json.dict"
  case "$t" in
    gguf_fuzz) dict="" ;;
    http_request_fuzz) dict="$root/fuzz/dict/http.dict" ;;
  esac
  work="$build/work/$t" findings="$build/findings/$t"
  rm -rf "$work" && mkdir -p "$work" "$findings"
  echo "[arbor] fuzz: $t for ${seconds}s"
  # New inputs go to $work (first corpus folder); the checked-in corpus is only read.
  # An allocation above -rss_limit_mb is a finding too (every size read is bounded).
  if ! "$build/fuzz/$t" "$work" "$root/fuzz/corpus/$t" ${dict:+"-dict=$dict"} \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=3072 -max_len=16384 \
      -print_final_stats=1 -artifact_prefix="$findings/" >"$build/$t.log" 2>&1; then
    echo "[arbor] fuzz: $t FAILED; the input is in $findings/, the report in $build/$t.log:"
    grep -E "ERROR|invariant|Assertion|runtime error|what\(\)|SUMMARY|Test unit written| in arbor::" "$build/$t.log" | head -20 || true
    status=1
  else
    grep -E "stat::number_of_executed_runs|cov: .*corp:" "$build/$t.log" | tail -2 | sed 's/^/[arbor]   /'
  fi
done
exit $status
