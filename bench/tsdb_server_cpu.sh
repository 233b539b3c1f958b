#!/usr/bin/env bash
# The server's CPU per ingested sample with the samples in SQLite vs in VictoriaMetrics
# (docs/scale-tsdb.md, "Measured"). Starts `rightsize serve` on a fresh SQLite file, with and
# without --tsdb-*-url pointing at a VictoriaMetrics started here, and drives it with
# bench/server/ingest_load (batches prepared before the clock starts, so the generator takes
# little CPU); the server's CPU comes from ingest_load --server-pid (/proc), VictoriaMetrics' from
# /proc/PID/stat around the same window.
# Usage: tsdb_server_cpu.sh BUILD_DIR [SECONDS] [AGENTS] [SAMPLES_PER_BATCH…]
set -euo pipefail
BUILD=$(cd "$1" && pwd)
SECONDS_RUN=${2:-15}
AGENTS=${3:-50}
shift $(($# < 3 ? $# : 3))
SPBS=("$@")
[ ${#SPBS[@]} -gt 0 ] || SPBS=(5 60)
RS=$BUILD/rightsize
WORK=$(mktemp -d /tmp/rightsize-tsdb-cpu.XXXXXX)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait; rm -rf "$WORK"' EXIT
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)

for spb in "${SPBS[@]}"; do
  for backend in sqlite victoria-metrics; do
    rm -rf "$WORK/run"
    mkdir -p "$WORK/run"
    args=()
    vm=""
    if [ "$backend" == victoria-metrics ]; then
      vport=$(port)
      victoria-metrics -storageDataPath="$WORK/run/vm" -httpListenAddr=127.0.0.1:$vport \
        -retentionPeriod=100y -loggerLevel=WARN >"$WORK/run/vm.log" 2>&1 &
      vm=$!
      PIDS+=("$vm")
      until curl -sf "http://127.0.0.1:$vport/health" >/dev/null; do sleep 0.05; done
      args=(--tsdb-write-url "http://127.0.0.1:$vport/api/v1/write" --tsdb-query-url "http://127.0.0.1:$vport")
    fi
    sport=$(port)
    "$RS" --db "$WORK/run/serve.db" "${args[@]}" serve --listen 127.0.0.1:$sport --threads 32 \
      >"$WORK/run/serve.log" 2>&1 &
    server=$!
    PIDS+=("$server")
    until curl -sf "http://127.0.0.1:$sport/healthz" >/dev/null; do sleep 0.05; done
    v0=0
    [ -z "$vm" ] || v0=$(cpu_ticks "$vm")
    out=$("$BUILD/bench/ingest_load" --url "http://127.0.0.1:$sport" --agents "$AGENTS" \
      --seconds "$SECONDS_RUN" --warmup-s 0 --samples-per-batch "$spb" --metrics 11 \
      --server-pid "$server" --tcp-nodelay --pre-encode 2>&1 || true)
    vm_cpu=""
    if [ -n "$vm" ]; then
      v1=$(cpu_ticks "$vm")
      vm_cpu=$(echo "scale=2; ($v1 - $v0) / $TICK" | bc)
    fi
    echo "== $backend, $spb s batches (11 x $spb samples), $AGENTS agents, ${SECONDS_RUN} s"
    echo "$out" | tail -4
    [ -z "$vm" ] || echo "victoria-metrics CPU over the run (incl. start-up of the run): ${vm_cpu} s"
    kill "$server"; wait "$server" 2>/dev/null || true
    [ -z "$vm" ] || { kill "$vm"; wait "$vm" 2>/dev/null || true; }
  done
done
