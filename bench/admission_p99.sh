#!/usr/bin/env bash
# The Kubernetes admission webhook's tail latency (docs/benchmarks.md, "Kubernetes admission
# webhook"; target p99 <= 10 ms at 200 reviews/s with a trained model), in one command that
# builds nothing: makes the store (`admission_load --make-store`: the admission tests' history,
# trained), starts `rightsize serve` with TLS on a free port, warms it up for 5 s, then runs
# `admission_load` RUNS times (open loop, RATE reviews/s for SECONDS s, 8 keep-alive HTTPS
# connections). Prints each run's p50/p99, the server's CPU time per review (utime + stime of
# the server process over the run, from /proc: independent of what else runs on the machine)
# and the load average, then the median p99 and the median CPU per review. Cleans up after
# itself (server stopped, work folder removed) however it ends.
# Usage: bench/admission_p99.sh BUILD_DIR [RUNS]   (env RATE=200 DURATION_S=20 by default)
set -euo pipefail
BUILD=$(realpath "${1:?usage: bench/admission_p99.sh BUILD_DIR [RUNS]}")
RUNS=${2:-3}
RATE=${RATE:-200}
SECONDS_PER_RUN=${DURATION_S:-20}
RS=$BUILD/rightsize
LOAD=$BUILD/bench/admission_load
for exe in "$RS" "$LOAD"; do
  [ -x "$exe" ] || { echo "admission_p99.sh: $exe not built" >&2; exit 2; }
done
WORK=$(mktemp -d /tmp/rightsize-admission.XXXXXX)
SERVER=""
cleanup() {
  if [ -n "$SERVER" ]; then
    kill -TERM "$SERVER" 2>/dev/null || true
    wait "$SERVER" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
"$LOAD" --make-store "$WORK/adm.db" >/dev/null
"$RS" --db "$WORK/adm.db" serve --listen 127.0.0.1:0 --tls-cert "$WORK/cert.pem" \
  --tls-key "$WORK/key.pem" >"$WORK/serve.out" 2>"$WORK/serve.err" &
SERVER=$!
for _ in $(seq 100); do grep -q listening "$WORK/serve.out" && break; sleep 0.1; done
PORT=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$WORK/serve.out")
[ -n "$PORT" ] || { echo "admission_p99.sh: the server did not start:" >&2; cat "$WORK/serve.err" >&2; exit 1; }
URL=https://127.0.0.1:$PORT
TICKS=$(getconf CLK_TCK)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$SERVER/stat"; }  # utime + stime

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
"$LOAD" --url "$URL" --ca "$WORK/cert.pem" --rate "$RATE" --seconds 5 >/dev/null || true  # warm-up
P99S=() CPUS=()
for run in $(seq "$RUNS"); do
  before=$(cpu_ticks)
  out=$("$LOAD" --url "$URL" --ca "$WORK/cert.pem" --rate "$RATE" --seconds "$SECONDS_PER_RUN" \
    | head -1) || true
  after=$(cpu_ticks)
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  reviews=$(sed -n 's/^\([0-9]*\) reviews.*/\1/p' <<<"$out")
  p50=$(sed -n 's/.*p50 \([0-9.]*\) ms.*/\1/p' <<<"$out")
  p99=$(sed -n 's/.*p99 \([0-9.]*\) ms.*/\1/p' <<<"$out")
  errors=$(sed -n 's/.*errors \([0-9]*\).*/\1/p' <<<"$out")
  if [ -z "$reviews" ] || [ -z "$p99" ]; then
    echo "run $run: admission_load failed: $out" >&2
    exit 1
  fi
  cpu=$(awk -v t="$((after - before))" -v hz="$TICKS" -v n="$reviews" \
    'BEGIN { printf "%.3f", t * 1000 / hz / n }')
  echo "run $run: p50 $p50 ms, p99 $p99 ms, errors $errors, server CPU $cpu ms/review" \
    "($reviews reviews at $RATE/s), load average $load"
  P99S+=("$p99")
  CPUS+=("$cpu")
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "median of $RUNS runs: p99 $(median "${P99S[@]}") ms, server CPU $(median "${CPUS[@]}") ms/review"
