#!/usr/bin/env bash
# Runs every libFuzzer target (test/fuzz/*_fuzz.cc) for a fixed number of executions, one at a
# time, and prints per target: executions, executions per second, peak RSS and findings
# (crashes, leaks, timeouts of 120 s, out-of-memory, sanitizer reports). Exits 1 when any target
# found something; the reproducers are left in BUILD/fuzz-findings/NAME/. The timeout is long
# because a shared machine under load once stalled for 45 s an input that takes 0.7 s alone.
# For the same reason a slow unit (libFuzzer writes one past 10 s) is a finding only when it is
# slow again alone: each is re-run once, and its time alone is printed beside it.
#
# Usage: scripts/fuzz.sh [-b BUILD] RUNS [TARGET...|all]
# TARGET: telemetry swf sacct clustercockpit sinfo prometheus jobscript log_scan (the default:
# each needs only its reader's libraries), admission and serve_config (`all` adds these two: they
# link the webhook's and the server's libraries, so their first build instruments most of the
# project, about 80 more files; their corpus replays run in every ctest).
# Configures BUILD (default build-fuzz) with clang, ccache when there is one, and
# -DRIGHTSIZE_FUZZ=ON when it is not configured yet, and builds the targets. `make test` runs it
# with a short RUNS (`make fuzz-short`); bench/fuzz.sh runs the long campaign.
# Each run starts from test/fuzz/corpus/NAME and grows a working corpus in BUILD/fuzz-corpus/NAME
# (kept between runs, never written to the sources); -seed is fixed so a run repeats.
# Inputs are at most MAX_LEN bytes (default 4096: every seed fits, and a line reader's cost per
# execution grows with its input; the runs of 2026-12-06 before 22:30 UTC used 16384).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build-fuzz
if [ "${1:-}" = "-b" ]; then
  BUILD=$2
  shift 2
fi
RUNS=${1:?usage: scripts/fuzz.sh [-b BUILD] RUNS [TARGET...]}
shift
LIGHT=(telemetry swf sacct clustercockpit sinfo prometheus jobscript log_scan)
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=("${LIGHT[@]}")
[ "${TARGETS[*]}" = "all" ] && TARGETS=("${LIGHT[@]}" admission serve_config)

if [ ! -f "$BUILD/build.ninja" ]; then
  launcher=()
  if command -v ccache >/dev/null 2>&1; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DRIGHTSIZE_FUZZ=ON \
    -DRIGHTSIZE_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
fi
bins=()
for t in "${TARGETS[@]}"; do bins+=("${t}_fuzz"); done
cmake --build "$BUILD" -j "${JOBS:-$(nproc)}" --target "${bins[@]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=0
printf '%-15s %12s %10s %9s  %s\n' target executions exec/s "rss MB" findings
for t in "${TARGETS[@]}"; do
  corpus=$BUILD/fuzz-corpus/$t
  findings=$BUILD/fuzz-findings/$t
  log=$BUILD/fuzz-logs/$t.log
  rm -rf "$findings"  # what an earlier run found is in its log; this run starts clean
  mkdir -p "$corpus" "$findings" "$(dirname "$log")"
  rc=0
  "$BUILD/test/${t}_fuzz" -runs="$RUNS" -seed=1 -max_len="${MAX_LEN:-4096}" -timeout=120 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$findings/" "$corpus" "test/fuzz/corpus/$t" \
    >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
  found=$(find "$findings" -type f ! -name 'slow-unit-*' | wc -l)
  reports=$(grep -cE '^(==[0-9]+==ERROR|SUMMARY: |.*runtime error:)' "$log" || true)
  slow=""
  for unit in "$findings"/slow-unit-*; do
    [ -e "$unit" ] || continue
    t0=$(date +%s%N)
    "$BUILD/test/${t}_fuzz" -runs=1 "$unit" >/dev/null 2>&1 || true
    alone_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    slow="$slow, slow unit $(basename "$unit") ${alone_ms} ms alone"
    [ "$alone_ms" -ge 10000 ] && found=$((found + 1))
  done
  what="none$slow"
  if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ] || [ "$reports" -ne 0 ]; then
    what="exit $rc, $found reproducer(s) in $findings, $reports sanitizer line(s); see $log"
    failed=1
  fi
  printf '%-15s %12s %10s %9s  %s\n' "$t" "${execs:-?}" "${speed:-?}" "${rss:-?}" "$what"
done
exit $failed
