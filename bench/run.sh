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
echo "== in-process: prediction and training (median of 3 repetitions; p50_us/p99_us per call)"
"$BUILD/bench/model_bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  2>&1 | grep -E 'median|^Benchmark|^---' || true
echo "== in-process: reading a 5,000-line Python project (median of 5; target < 100 ms)"
"$BUILD/bench/code_bench" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
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

# Prediction, whole process. make_model_swf TRACE COPIES MODE OUT: the real TRACE COPIES times
# over, each copy with fresh job ids and its own users (user id + 10000 per copy), header kept
# (real dates). MODE "together": the copies run side by side in the same period, one cluster
# COPIES times as big (MaxProcs scaled). MODE "after": each copy's submit times are shifted to
# start a day after the previous copy's last submission, COPIES consecutive periods.
make_model_swf() {
  zcat "$1" | grep '^;' >"$4.hdr" || true
  zcat "$1" | grep -v '^;' | awk 'NF >= 18' >"$4.one"
  local span
  span=$(awk 'NR == 1 { a = $2 } { b = $2 } END { print b - a + 86400 }' "$4.one")
  {
    if [ "$3" = together ]; then
      awk -v c="$2" '{ if (match($0, /^; *Max(Procs|Nodes): */)) print substr($0, 1, RLENGTH) substr($0, RLENGTH + 1) * c; else print }' "$4.hdr"
    else
      cat "$4.hdr"
    fi
    for c in $(seq 0 $(($2 - 1))); do
      awk -v c="$c" -v s="$([ "$3" = after ] && echo "$span" || echo 0)" \
        '{ $1 = c * 100000 + NR; $2 += c * s; if ($12 >= 0) $12 += c * 10000; print }' "$4.one"
    done
  } >"$4"
  rm -f "$4.hdr" "$4.one"
}
# busiest_user SWF: "userN JOBS" for the user with the most jobs.
busiest_user() { grep -v '^;' "$1" | awk '$12 >= 0 { n[$12]++ } END { for (u in n) print n[u], u }' | sort -rn | awk 'NR == 1 { print "user" $2, $1 }'; }
# median_user SWF: "userN JOBS" for the user in the middle of the users sorted by job count.
median_user() { grep -v '^;' "$1" | awk '$12 >= 0 { n[$12]++ } END { for (u in n) print n[u], u }' | sort -n | awk '{ l[NR] = $0 } END { split(l[int((NR + 1) / 2)], f, " "); print "user" f[2], f[1] }'; }
# jobs_in SWF: its job lines.
jobs_in() { awk '!/^;/ && NF >= 18' "$1" | wc -l; }
# wall_ms N CMD...: median and p99 wall milliseconds of N runs (with 50 runs, p99 is the slowest).
wall_ms() {
  local n=$1 t0 t1
  shift
  for _ in $(seq "$n"); do
    t0=$EPOCHREALTIME
    "$@" >/dev/null
    t1=$EPOCHREALTIME
    echo "$t0 $t1"
  done | awk '{ print ($2 - $1) * 1000 }' | sort -n |
    awk '{ v[NR] = $1 } END { p = int(NR * 0.99); if (p < NR * 0.99) p++; printf "%.1f %.1f\n", (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2, v[p] }'
}
SCRIPT=$SRC/test/data/scripts/mpi_job.sh
echo "== load average before the model figures: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== whole process: rightsize predict $(basename "$SCRIPT") --user U after ingest + train (50 runs each)"
zcat "$SRC/data/traces/HPC2N-excerpt-alea.swf.gz" >"$WORK/hpc2n.swf"
make_model_swf "$SRC/test/data/swf/KTH-SP2-1996-2.1-cln.swf.gz" 11 together "$WORK/kth11.swf"
for swf in hpc2n kth11; do
  rm -f "$WORK/p.db"*
  "$RS" --db "$WORK/p.db" ingest swf "$WORK/$swf.swf" >/dev/null
  "$RS" --db "$WORK/p.db" train >/dev/null
  n=$(jobs_in "$WORK/$swf.swf")
  for who in busiest median; do
    read -r user jobs <<<"$("${who}_user" "$WORK/$swf.swf")"
    read -r med p99 <<<"$(wall_ms 50 "$RS" --db "$WORK/p.db" predict "$SCRIPT" --user "$user")"
    printf '%9d jobs, %-7s user %-10s (%4d jobs): median %6.1f ms, p99 %6.1f ms\n' "$n" "$who" "$user" "$jobs" "$med" "$p99"
  done
done

# Training and replay at 300,000 jobs. train: median of 3 runs; eval: one run (minutes).
echo "== whole process: rightsize train (median of 3 runs) and rightsize eval --store --retrain-every 7d (1 run)"
make_model_swf "$SRC/data/traces/HPC2N-excerpt-alea.swf.gz" 95 together "$WORK/hpc2n95.swf"
make_model_swf "$SRC/test/data/swf/KTH-SP2-1996-2.1-cln.swf.gz" 11 after "$WORK/kth11after.swf"
for swf in kth11 hpc2n95 kth11after; do
  rm -f "$WORK/m.db"*
  "$RS" --db "$WORK/m.db" ingest swf "$WORK/$swf.swf" >/dev/null
  n=$(jobs_in "$WORK/$swf.swf")
  days=$(awk '!/^;/ && NF >= 18 { if (!seen++) a = $2; b = $2 } END { printf "%.0f", (b - a) / 86400 }' "$WORK/$swf.swf")
  # The first run (untimed) warms the page cache and says how many targets have a model.
  targets=$("$RS" --db "$WORK/m.db" train --json | grep -c '"trained": true' || true)
  read -r t rss <<<"$(time3 "$RS" --db "$WORK/m.db" train)"
  /usr/bin/time -o "$WORK/eval.time" -f '%e %M' "$RS" --db "$WORK/m.db" eval --store --retrain-every 7d --json \
    >"$WORK/eval.json" 2>/dev/null
  read -r te rsse <"$WORK/eval.time"
  retrains=$(grep -o '"retrains": [0-9]*' "$WORK/eval.json" | grep -o '[0-9]*$')
  printf '%9d jobs over %4d days (%-10s %d targets): train %6.2f s, max RSS %4d MiB; eval %7.1f s (%3d retrains), max RSS %4d MiB\n' \
    "$n" "$days" "$swf," "$targets" "$t" "$rss" "$te" "$retrains" "$((rsse / 1024))"
done
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

# Diagnosis, whole process: a noisy 1 GiB training log ending in a CUDA OOM (bench/make_noisy_log.py),
# read from a file (parallel pieces) and through a pipe (one sequential pass), median of 3.
echo "== whole process: rightsize diagnose (median of 3 runs)"
python3 "$SRC/bench/make_noisy_log.py" "$WORK/big.log" 1024
cat "$WORK/big.log" >/dev/null  # in the page cache, as a log just written by the job
read -r t rss <<<"$(time3 "$RS" diagnose --log "$WORK/big.log" --json)"
printf '1 GiB log, file:  %5.2f s = %6.0f MiB/s, max RSS %4d MiB\n' "$t" "$(echo "1024 / $t" | bc -l)" "$rss"
times=()
for _ in 1 2 3; do
  out=$( { /usr/bin/time -f '%e %M' sh -c "cat '$WORK/big.log' | '$RS' diagnose --log - --json >/dev/null"; } 2>&1 | tail -1)
  times+=("$(cut -d' ' -f1 <<<"$out")")
done
printf '1 GiB log, pipe:  %5.2f s, max RSS %4d MiB\n' "$(printf '%s\n' "${times[@]}" | median3)" \
  "$(($(cut -d' ' -f2 <<<"$out") / 1024))"
rm -f "$WORK/big.log"

# The agent's own cost with 20 jobs of 20 processes (found by SLURM_JOB_ID), 60 s at 1 Hz.
echo "== whole process: rightsize agent overhead"
bash "$SRC/bench/agent_overhead.sh" "$RS" 60

# The server (docs/api.md): telemetry from 200 agents, and job pages on a big store. Both tools
# talk HTTP to a `rightsize serve` started here (bench/server/).
# serve DB THREADS: starts rightsize serve on a free port; sets SERVER_PID and URL.
serve() {
  local port
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$RS" --db "$1" serve --listen "127.0.0.1:$port" --threads "$2" >"$WORK/serve.log" 2>&1 &
  SERVER_PID=$!
  URL=http://127.0.0.1:$port
  for _ in $(seq 100); do curl -sf "$URL/healthz" >/dev/null && return 0; sleep 0.1; done
  echo "rightsize serve did not start: $(cat "$WORK/serve.log")"
  return 1
}
stop_server() { kill "$SERVER_PID" && wait "$SERVER_PID" || true; }
echo "== whole process: rightsize serve, POST /api/v1/telemetry from 200 agents (20 s closed loop, gzip, TCP_NODELAY; target >= 100,000 samples/s)"
# Each batch size twice: batches built and gzipped while sending, as the agent does (the
# generator then takes a third of this machine's two cores), and prepared before the run.
for spb in 5 10 60; do
  for how in "" --pre-encode; do
    rm -f "$WORK/ingest.db"*
    serve "$WORK/ingest.db" 32
    "$BUILD/bench/ingest_load" --url "$URL" --agents 200 --seconds 20 --samples-per-batch "$spb" \
      --metrics 11 --server-pid "$SERVER_PID" --tcp-nodelay $how || true
    stop_server
  done
done
echo "== whole process: rightsize serve, job page (GET job + 1 h series) on 100,000 jobs / 50M samples (target p99 < 20 ms)"
# The store takes a minute or two to build: kept between runs (delete it to rebuild).
JOBPAGE_DB=${JOBPAGE_DB:-/tmp/rightsize-jobpage.db}
"$BUILD/bench/job_page_bench" build --db "$JOBPAGE_DB"
echo "store: $(du -h "$JOBPAGE_DB" | cut -f1)"
serve "$JOBPAGE_DB" 8
"$BUILD/bench/job_page_bench" measure --url "$URL" --pages 50 --seed 7 >/dev/null  # warm-up
"$BUILD/bench/job_page_bench" measure --url "$URL" --pages 300 || true
echo "== dashboard in Chromium on the same store: first paint and data on screen (target first paint < 1 s)"
if [ -d "$SRC/web/node_modules/playwright-core" ] || [ -d "$BUILD/web/node_modules/playwright-core" ]; then
  BASE_URL=$URL RUNS=20 JOB=bench/99000 RIGHTSIZE_WEB_BUILD="$BUILD/web" node "$SRC/bench/dashboard_paint.mjs" || true
  BASE_URL=$URL RUNS=20 JOB=bench/200017 RIGHTSIZE_WEB_BUILD="$BUILD/web" node "$SRC/bench/dashboard_paint.mjs" | tail -1 || true
else
  echo "(skipped: playwright-core not installed; npm ci --prefix web)"
fi
stop_server

echo "== whole process: Kubernetes admission webhook, 200 reviews/s for 20 s over HTTPS (target p99 <= 10 ms)"
"$SRC/bench/admission_p99.sh" "$BUILD" 3 || true
