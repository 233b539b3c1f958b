#!/usr/bin/env bash
# The server's CPU per ingested sample on the three paths of a sample (docs/scale-tsdb.md):
#   sqlite        agents -> rightsize serve -> the SQLite store
#   via-server    agents -> rightsize serve -> remote write -> VictoriaMetrics
#   agent-direct  agents -> remote write -> VictoriaMetrics; agents -> serve: the job records the
#                 server does not have yet (agent/sent_records.h; a batch with none is not posted)
#   agent-direct-every-batch  the same, but every batch posted with all its records (as agents
#                 did before agent/sent_records.h; for comparison, run only when PATHS names it)
# driven by bench/server/fleet_load (simulated 8-GPU nodes, the agent's metric set and encoding),
# the server's CPU from /proc (fleet_load --server-pid). Runs the three in turn, ROUNDS times.
# Usage: tsdb_paths_cpu.sh BUILD_DIR [NODES] [SECONDS] [ROUNDS]
# PATHS (environment): the paths to run, in order (default "sqlite via-server agent-direct").
set -euo pipefail
BUILD=$(cd "$1" && pwd)
NODES=${2:-200}
SECS=${3:-30}
ROUNDS=${4:-2}
RS=$BUILD/rightsize
WORK=$(mktemp -d /tmp/rightsize-tsdb-paths.XXXXXX)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait; rm -rf "$WORK"' EXIT
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

for round in $(seq 1 "$ROUNDS"); do
  for path in ${PATHS:-sqlite via-server agent-direct}; do
    rm -rf "$WORK/run"
    mkdir -p "$WORK/run"
    serve_args=()
    driver_args=()
    vm=""
    if [ "$path" != sqlite ]; then
      vport=$(port)
      victoria-metrics -storageDataPath="$WORK/run/vm" -httpListenAddr=127.0.0.1:$vport \
        -retentionPeriod=100y -loggerLevel=WARN >"$WORK/run/vm.log" 2>&1 &
      vm=$!
      PIDS+=("$vm")
      until curl -sf "http://127.0.0.1:$vport/health" >/dev/null; do sleep 0.05; done
      serve_args=(--tsdb-write-url "http://127.0.0.1:$vport/api/v1/write"
        --tsdb-query-url "http://127.0.0.1:$vport")
      case $path in
        agent-direct) driver_args=(--tsdb-write-url "http://127.0.0.1:$vport/api/v1/write") ;;
        agent-direct-every-batch)
          driver_args=(--tsdb-write-url "http://127.0.0.1:$vport/api/v1/write" --every-batch 1) ;;
      esac
    fi
    sport=$(port)
    "$RS" --db "$WORK/run/serve.db" "${serve_args[@]}" serve --listen 127.0.0.1:$sport \
      >"$WORK/run/serve.log" 2>&1 &
    server=$!
    PIDS+=("$server")
    until curl -sf "http://127.0.0.1:$sport/healthz" >/dev/null; do sleep 0.05; done
    line=$("$BUILD/bench/fleet_load" ingest --url "http://127.0.0.1:$sport" --nodes "$NODES" \
      --seconds "$SECS" --server-pid "$server" "${driver_args[@]}" || true)
    /usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[2])
print(json.dumps({"path": sys.argv[1], "nodes": d["nodes"], "accepted_samples_per_s": d["accepted_samples_per_s"],
  "samples_acked": d["samples_acked"], "samples_made": d["samples_made"],
  "batches_posted": d["batches_sent"], "batches_tsdb_only": d.get("batches_tsdb_only", 0),
  "server_cpu_s": d.get("server_cpu_s"),
  "samples_per_server_cpu_s": d.get("samples_per_server_cpu_s"), "statuses": d["statuses"],
  "transport_errors": d["transport_errors"], "loadavg": [d["loadavg_before"], d["loadavg_after"]]}))
' "$path" "$line"
    kill "$server"; wait "$server" 2>/dev/null || true
    [ -z "$vm" ] || { kill "$vm"; wait "$vm" 2>/dev/null || true; }
  done
done
