#!/usr/bin/env bash
# Builds the concurrency tests with ThreadSanitizer (arbor_tsan_tests in build-tsan/,
# -DARBOR_SANITIZE=thread) and runs those that exercise concurrency: the thread
# pool, the cache actor, a nested run and supervision, generations cancelled from
# other threads, the HTTP server's sessions, exchanges, admission and drain. Fails on
# any data race, lock-order inversion or thread leak TSan reports. CAF (Debian's, not
# built with TSan) has its message hand-offs annotated (tests/tsan_caf_handoff.cpp), so
# races between actors' handlers are seen (TsanCanary.* checks it); tests/tsan.supp
# lists what is still suppressed (CAF's internal bookkeeping only) and why.
#   ARBOR_TSAN_FILTER   gtest filter replacing the default selection
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${ARBOR_TSAN_BUILD_DIR:-$root/build-tsan}"

filter="TsanCanary.*:ThreadPool.*:CacheActor.*:ServerHttp.*:ServerExchange.*:ServerHostile*"
filter+=":Generate.CancelEndsAGenerationEarly:Generate.RuntimeDestructorCancelsWhatIsRunning"
filter+=":Supervision.CancellationStopsGeneration:RuntimeRun.NestedTeamsComplete"
filter+=":ServerE2E.ConcurrentStreamingClientsGetTheirOwnOutputs:ServerE2E.DisconnectMidStreamFreesThePages"
filter+=":ServerE2E.StopCancelsStreamsWhichStillEndCleanly"
# The SIGTERM and CLI tests run the `arbor` binary, which this stage does not build.
filter+=":-ServerHostileHttp.Sigterm*:ServerHostileUtf8Cli.*"
filter="${ARBOR_TSAN_FILTER:-$filter}"

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# -O1: TSan's recommendation, and a third less compile time than -O3.
[ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" -DARBOR_SANITIZE=thread \
  -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" -DARBOR_BENCH=OFF "${launcher[@]}" >/dev/null
# The compiler's output (thousands of -Wtsan notes on Boost.Asio's fences) goes to a log,
# shown only if the build fails.
if ! cmake --build "$build" -j "${ARBOR_JOBS:-2}" --target arbor_tsan_tests >"$build/tsan_build.log" 2>&1; then
  grep -E 'error|Error' "$build/tsan_build.log" | head -n 50
  echo "[arbor] tsan: build failed (full log: $build/tsan_build.log)" >&2
  exit 1
fi

# halt_on_error=0: every report is printed; the exit status is still non-zero (66).
export TSAN_OPTIONS="suppressions=$root/tests/tsan.supp second_deadlock_stack=1 halt_on_error=0 ${TSAN_OPTIONS:-}"
echo "[arbor] tsan: $filter"
log="$build/tsan_run.log"
status=0
"$build/tests/arbor_tsan_tests" --gtest_filter="$filter" --gtest_brief=1 >"$log" 2>&1 || status=$?
# A report's frames name CAF's typed actors in full (kilobytes a line): the output is
# shown with each report condensed (template arguments dropped, lines cut, at most four
# reports), so that a CI log's tail still holds every report whole; the full text stays in the log.
awk '/^==================$/ || /^Running main\(\)/ {next}
     /WARNING: ThreadSanitizer/ {n++; r = 1}
     !r || n <= 4 {gsub(/<null>/, "?"); while (gsub(/<[^<>]*>/, "«»")) {}; print substr($0, 1, 300)}
     /^SUMMARY:/ {r = 0}' "$log"
[ "$status" = 0 ] || echo "[arbor] tsan: failed (exit $status; full output: $log)" >&2
exit "$status"
