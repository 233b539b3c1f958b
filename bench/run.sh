#!/usr/bin/env bash
# `make bench`: the in-process benchmarks (Google Benchmark) and whole-process figures for the
# targets in docs/benchmarks.md. Usage: bench/run.sh BUILD_DIR
set -euo pipefail
BUILD=${1:-build}
RS=$BUILD/rightsize
SRC=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/rightsize-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

echo "== machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "== in-process (median of 3 repetitions)"
"$BUILD/bench/ingest_bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  2>&1 | grep -E 'median|^Benchmark|^---' || true

# Whole process: the KTH SP2 trace N times over, one copy after the other with fresh ids (as N
# consecutive periods: accounting lists jobs in id order), as a user would run it.
make_swf() { # make_swf COPIES OUT
  zcat "$SRC/test/data/swf/KTH-SP2-1996-2.1-cln.swf.gz" | grep -v '^;' >"$2.one"
  for c in $(seq 0 $(($1 - 1))); do awk -v c="$c" '{ $1 = c * 100000 + NR; print }' "$2.one"; done >"$2"
  rm -f "$2.one"
}
median3() { sort -n | sed -n 2p; }
# time3 CMD...: median wall seconds of 3 runs, and the last run's max RSS in MiB.
time3() {
  local times=() out
  for _ in 1 2 3; do
    [ -n "${PREP:-}" ] && eval "$PREP"
    out=$( { /usr/bin/time -f '%e %M' "$@" >/dev/null; } 2>&1 | tail -1)
    times+=("$(cut -d' ' -f1 <<<"$out")")
  done
  echo "$(printf '%s\n' "${times[@]}" | median3) $(($(cut -d' ' -f2 <<<"$out") / 1024))"
}
echo "== whole process: rightsize ingest swf, then rightsize report --json (median of 3 runs)"
for copies in 1 11 35 105; do
  make_swf "$copies" "$WORK/t.swf"
  n=$(wc -l <"$WORK/t.swf")
  read -r t rss <<<"$(PREP="rm -f $WORK/b.db*" time3 "$RS" --db "$WORK/b.db" ingest swf "$WORK/t.swf")"
  read -r tr rssr <<<"$(time3 "$RS" --db "$WORK/b.db" report --json)"
  printf '%9d records: ingest %6.2f s = %7.0f records/s, max RSS %4d MiB; report %5.2f s, max RSS %4d MiB\n' \
    "$n" "$t" "$(echo "$n / $t" | bc -l)" "$rss" "$tr" "$rssr"
done
echo "== whole process: rightsize ingest sacct (UB CCR XDMoD export x N, fresh ids; median of 3)"
zcat "$SRC/test/data/sacct/sites/ub-ccr-phillips_slurm-2016-12-2017-01.psv.gz" >"$WORK/one.psv"
for copies in 35 105; do
  { head -1 "$WORK/one.psv"; for c in $(seq 1 "$copies"); do
    awk -F'|' -v OFS='|' -v c="$c" 'NR > 1 { $1 = c $1; $2 = c $2; print }' "$WORK/one.psv"; done; } >"$WORK/t.psv"
  n=$(($(wc -l <"$WORK/t.psv") - 1))
  read -r t rss <<<"$(PREP="rm -f $WORK/s.db*" time3 "$RS" --db "$WORK/s.db" ingest sacct "$WORK/t.psv")"
  printf '%9d rows: ingest %6.2f s = %7.0f rows/s, max RSS %4d MiB\n' "$n" "$t" "$(echo "$n / $t" | bc -l)" "$rss"
done
