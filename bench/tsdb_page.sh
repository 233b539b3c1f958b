#!/usr/bin/env bash
# The job page with the samples in VictoriaMetrics (docs/scale-tsdb.md, "The job page").
#
#   bench/tsdb_page.sh record [JOBS]
#       The figure of record: a VictoriaMetrics started in a temporary folder, then
#       bench/load_test.sh sqlite pages JOBS (100,000) with `rightsize serve` reading the samples
#       back by PromQL: JOBS jobs and an hour-long 8-GPU job filled through the API, 200 requests of
#       each kind interleaved (REQUESTS), then 200 `…/series` alone with the server's CPU per
#       request. One JSON line (load_test.sh's, plus the VictoriaMetrics CPU of the whole run).
#   bench/tsdb_page.sh ab RS_A RS_B [RS_C ...]
#       rightsize binaries, interleaved, on one VictoriaMetrics that first gets JOBS (100,000)
#       jobs: each of ROUNDS (3) rounds, for each binary in turn, a fresh `serve` (fresh SQLite
#       file) and `fleet_load pages --jobs 0` (the hour-long job under a cluster of its own,
#       REQUESTS (50) of each kind, then REQUESTS `…/series` alone). One JSON line per run: which
#       binary, `…/series` p50/p99 interleaved and alone, the server's CPU per `…/series`, the
#       load average.
#
# Environment: BUILD (./build: its bench/fleet_load, and rightsize for `record`), RS (record's
# rightsize), REQUESTS, ROUNDS and JOBS (ab), KEEP=1 (keep the work folder).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$SRC/build}
DRIVER=$BUILD/bench/fleet_load
MODE=${1:-}
[ "$MODE" = record ] || [ "$MODE" = ab ] || { sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//; /^set -euo/d' >&2; exit 2; }
shift
[ -x "$DRIVER" ] || { echo "tsdb_page.sh: $DRIVER not built (RIGHTSIZE_BUILD_BENCH=ON, target fleet_load)" >&2; exit 2; }
command -v victoria-metrics >/dev/null || { echo "tsdb_page.sh: victoria-metrics not installed (apt-get install victoria-metrics)" >&2; exit 2; }

WORK=$(mktemp -d /tmp/rightsize-tsdb-page.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
  if [ "${KEEP:-0}" = 1 ]; then echo "tsdb_page.sh: kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
cpu_s() { awk '{ print ($14 + $15) / 100 }' "/proc/$1/stat"; }

vport=$(port)
VM=http://127.0.0.1:$vport
victoria-metrics -storageDataPath="$WORK/vm" -httpListenAddr="127.0.0.1:$vport" \
  -retentionPeriod=100y -search.maxUniqueTimeseries=1000000 -loggerLevel=WARN >"$WORK/vm.log" 2>&1 &
VM_PID=$!
PIDS+=("$VM_PID")
until curl -sf "$VM/health" >/dev/null; do
  kill -0 "$VM_PID" 2>/dev/null || { echo "tsdb_page.sh: victoria-metrics exited: $(cat "$WORK/vm.log")" >&2; exit 1; }
  sleep 0.1
done

# A rightsize that reads and writes its samples through this VictoriaMetrics (the TSDB URLs are
# global flags, before the command; `exec` keeps the PID the scripts measure).
wrap() {
  printf '#!/bin/sh\nexec %s --tsdb-write-url %s/api/v1/write --tsdb-query-url %s "$@"\n' "$1" "$VM" "$VM" >"$2"
  chmod +x "$2"
}

if [ "$MODE" = record ]; then
  JOBS=${1:-100000}
  wrap "$(realpath "${RS:-$BUILD/rightsize}")" "$WORK/rs"
  vm0=$(cpu_s "$VM_PID")
  export VM
  # The samples acknowledged are counted in VictoriaMetrics, not in the SQLite file.
  export COUNT_CMD='curl -s $VM/internal/force_flush >/dev/null; sleep 2; curl -s $VM/api/v1/query --data-urlencode "query=sum(count_over_time({cluster=\"$LOAD_CLUSTER\"}[30d]))" | python3 -c "import json,sys; print(json.load(sys.stdin)[\"data\"][\"result\"][0][\"value\"][1])"'
  line=$(RS=$WORK/rs BUILD=$BUILD "$SRC/bench/load_test.sh" sqlite pages "$JOBS")
  vm1=$(cpu_s "$VM_PID")
  python3 -c 'import json, sys; d = json.loads(sys.argv[1]); d["victoria_metrics_cpu_s"] = round(float(sys.argv[2]), 2); print(json.dumps(d, separators=(",", ":")))' "$line" "$(echo "$vm1 - $vm0" | bc)"
  exit 0
fi

[ $# -ge 1 ] || { echo "tsdb_page.sh ab RS_A [RS_B ...]" >&2; exit 2; }
BINS=("$@")
for i in "${!BINS[@]}"; do wrap "$(realpath "${BINS[$i]}")" "$WORK/rs-$i"; done
ROUNDS=${ROUNDS:-3}
JOBS=${JOBS:-100000}

# serve_with RS DB: starts `RS --db DB serve`, sets SERVE_PID and SERVE_URL.
serve_with() {
  local sport
  sport=$(port)
  "$1" --db "$2" serve --listen "127.0.0.1:$sport" >"$2.log" 2>&1 &
  SERVE_PID=$!
  PIDS+=("$SERVE_PID")
  SERVE_URL=http://127.0.0.1:$sport
  until curl -sf "$SERVE_URL/healthz" >/dev/null; do
    kill -0 "$SERVE_PID" 2>/dev/null || { echo "tsdb_page.sh: serve exited: $(cat "$2.log")" >&2; exit 1; }
    sleep 0.05
  done
}
stop_serve() { kill "$SERVE_PID" 2>/dev/null || true; wait "$SERVE_PID" 2>/dev/null || true; }

if [ "$JOBS" -gt 0 ]; then
  serve_with "$WORK/rs-0" "$WORK/fill.db"
  "$DRIVER" pages --url "$SERVE_URL" --jobs "$JOBS" --requests 1 --cluster fill >"$WORK/fill.json"
  stop_serve
fi
for round in $(seq 1 "$ROUNDS"); do
  for i in "${!BINS[@]}"; do
    serve_with "$WORK/rs-$i" "$WORK/$i-$round.db"
    out=$("$DRIVER" pages --url "$SERVE_URL" --jobs 0 --requests "${REQUESTS:-50}" \
      --cluster "ab$round-$i" --server-pid "$SERVE_PID" || true)
    stop_serve
    python3 -c '
import json, sys
d = json.loads(sys.argv[3])
print(json.dumps({"round": int(sys.argv[1]), "rs": sys.argv[2], "failures": d["failures"],
  "series_all_ms": d.get("series_all_ms"), "series_all_alone_ms": d.get("series_all_alone_ms"),
  "series_all_server_cpu_ms": d.get("series_all_server_cpu_ms"), "loadavg": d.get("loadavg")},
  separators=(",", ":")))' "$round" "${BINS[$i]}" "$out"
  done
done
