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
echo "== whole process: rightsize ingest swf (median of 3 runs; max RSS)"
for copies in 1 11 35 105; do
  make_swf "$copies" "$WORK/t.swf"
  n=$(wc -l <"$WORK/t.swf")
  times=()
  rss=0
  for _ in 1 2 3; do
    rm -f "$WORK/b.db"*
    out=$( { /usr/bin/time -f '%e %M' "$RS" --db "$WORK/b.db" ingest swf "$WORK/t.swf" >/dev/null; } 2>&1 | tail -1)
    times+=("$(cut -d' ' -f1 <<<"$out")")
    rss=$(cut -d' ' -f2 <<<"$out")
  done
  t=$(printf '%s\n' "${times[@]}" | median3)
  printf '%9d records: %6.2f s  %9.0f records/s  max RSS %d MiB\n' "$n" "$t" "$(echo "$n / $t" | bc -l)" $((rss / 1024))
done
echo "== whole process: rightsize report over the last store (median of 3 runs)"
times=()
for _ in 1 2 3; do
  out=$( { /usr/bin/time -f '%e %M' "$RS" --db "$WORK/b.db" report --json >/dev/null; } 2>&1 | tail -1)
  times+=("$(cut -d' ' -f1 <<<"$out")")
done
printf '%9d jobs: report in %.2f s\n' "$(sqlite3 "$WORK/b.db" 'select count(*) from jobs')" "$(printf '%s\n' "${times[@]}" | median3)"
