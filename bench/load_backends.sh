#!/usr/bin/env bash
# Issue 27's load test on all three backends in one command: starts a PostgreSQL 15 (as the
# tests do, test/cli/postgres.sh) and a VictoriaMetrics of its own, then runs
# bench/load_test.sh for each node count on
#   sqlite      the embedded store
#   postgresql  the PostgreSQL backend (--db postgresql://…)
#   tsdb        the embedded store for jobs, samples sent by remote write to VictoriaMetrics and
#               counted there (the server-writes path: agents post to `rightsize serve`)
# and prints load_test.sh's JSON line per run with "backend" added.
#
# Usage: bench/load_backends.sh [SECONDS [NODES...]]   (default 60 s; 100 1000 10000)
# A node count written N:1 runs one job per node (DRIVER_FLAGS --jobs-per-node 1, 16
# connections), as the SQLite table in docs/scale-load.md does at 10,000 nodes; a plain N runs a
# job per GPU. BACKENDS (default "sqlite postgresql tsdb") picks the backends. Needs the targets
# rightsize and fleet_load (RIGHTSIZE_BUILD_BENCH=ON), postgresql-15 and victoria-metrics.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$SRC/build}
SECS=${1:-60}
shift || true
[ $# -eq 0 ] && set -- 100 1000 10000:1
RS_BIN=$(realpath "${RS:-$BUILD/rightsize}")
[ -x "$BUILD/bench/fleet_load" ] || { echo "load_backends.sh: build fleet_load first" >&2; exit 2; }
command -v victoria-metrics >/dev/null || { echo "load_backends.sh: victoria-metrics not installed" >&2; exit 2; }

WORK=$(mktemp -d)  # under $TMPDIR or /tmp
chmod 755 "$WORK"
VM_PID=""
# shellcheck source=../test/cli/postgres.sh
source "$SRC/test/cli/postgres.sh"
cleanup() {
  [ -n "$VM_PID" ] && kill "$VM_PID" 2>/dev/null && wait "$VM_PID" 2>/dev/null
  pg_stop
  rm -rf "$WORK"
}
trap cleanup EXIT
pg_start || exit 1

vport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export VM=http://127.0.0.1:$vport
victoria-metrics -storageDataPath="$WORK/vm" -httpListenAddr="127.0.0.1:$vport" \
  -retentionPeriod=100y -search.maxUniqueTimeseries=10000000 -loggerLevel=WARN >"$WORK/vm.log" 2>&1 &
VM_PID=$!
until curl -sf "$VM/health" >/dev/null; do
  kill -0 "$VM_PID" 2>/dev/null || { echo "victoria-metrics exited: $(cat "$WORK/vm.log")" >&2; exit 1; }
  sleep 0.1
done
printf '#!/bin/sh\nexec %s --tsdb-write-url %s/api/v1/write --tsdb-query-url %s "$@"\n' \
  "$RS_BIN" "$VM" "$VM" >"$WORK/rs-tsdb"
chmod +x "$WORK/rs-tsdb"

echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1); commit $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown); $(date -u +%FT%TZ)"
for spec in "$@"; do
  nodes=${spec%%:*}
  flags=""
  [ "$spec" != "$nodes" ] && flags="--jobs-per-node 1 --connections 16"
  for backend in ${BACKENDS:-sqlite postgresql tsdb}; do
    line=""
    case $backend in
      sqlite) line=$(DRIVER_FLAGS="$flags" RS="$RS_BIN" bash "$SRC/bench/load_test.sh" sqlite "$nodes" "$SECS") ;;
      postgresql) line=$(DRIVER_FLAGS="$flags" RS="$RS_BIN" bash "$SRC/bench/load_test.sh" "$RIGHTSIZE_PG_URL" "$nodes" "$SECS") ;;
      tsdb)
        # Samples stored = what VictoriaMetrics counts for the run's cluster, asked at a minute
        # from now (an instant query at now leaves out the last 30 s: -search.latencyOffset);
        # size = its folder.
        line=$(DRIVER_FLAGS="$flags" RS="$WORK/rs-tsdb" \
          COUNT_CMD='curl -s "$VM/internal/force_flush" >/dev/null; sleep 2; curl -s "$VM/api/v1/query" --data-urlencode "time=$(( $(date +%s) + 60 ))" --data-urlencode "query=sum(count_over_time({cluster=\"$LOAD_CLUSTER\"}[1h]))" | python3 -c "import json,sys; r=json.load(sys.stdin)[\"data\"][\"result\"]; print(r[0][\"value\"][1] if r else 0)"' \
          SIZE_CMD="du -sb '$WORK/vm' | cut -f1" \
          bash "$SRC/bench/load_test.sh" sqlite "$nodes" "$SECS") ;;
      *) echo "BACKENDS: unknown backend $backend" >&2; exit 2 ;;
    esac
    python3 -c 'import json, sys; d = json.loads(sys.argv[1]); d = {**d, "store": d.get("backend"), "backend": sys.argv[2], "spec": sys.argv[3]}; print(json.dumps(d, separators=(",", ":")))' "$line" "$backend" "$spec"
  done
done
