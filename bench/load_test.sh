#!/usr/bin/env bash
# Issue 27's load test: starts `rightsize serve` on a backend, drives it with a cluster of
# simulated agents (bench/server/fleet_load.cc), stops it and prints one JSON line per run.
#
#   bench/load_test.sh BACKEND NODES SECONDS [-- SERVE_FLAGS...]
#       NODES nodes of 8 GPUs (a job per GPU unless DRIVER_FLAGS says --jobs-per-node 1), the
#       agent's real metric set at 1 Hz, a batch per node every 5 s, for SECONDS. The line adds
#       to fleet_load's (accepted samples/s, samples per server CPU-second, p50/p99 batch latency,
#       answers by status, ...) the store's side: samples stored for the run's cluster, samples
#       lost (acknowledged - stored), and bytes stored per sample (store size delta / samples).
#   bench/load_test.sh BACKEND pages [JOBS] [-- SERVE_FLAGS...]
#       Fills the store through the API with JOBS (100,000) jobs and one hour-long 8-GPU job,
#       then times its job page, its series (all metrics and each metric) and the job list
#       (fleet_load pages; p50/p99 over REQUESTS (200) requests each).
#
# BACKEND is where the store is, passed to `rightsize --db`:
#   sqlite                      a new SQLite file in a temporary folder (deleted afterwards)
#   sqlite:PATH                 that SQLite file (kept)
#   postgresql://… | postgres://…   that database (the PostgreSQL backend)
# SERVE_FLAGS after `--` (or in $SERVE_FLAGS) go to `rightsize serve` as they are: the TSDB path
# is the same store plus its serve flags, e.g. `bench/load_test.sh sqlite 1000 120 --
# <the remote-write and PromQL URL flags>` (docs/scale-load.md).
#
# Environment: BUILD (build tree, default ./build), RS (the rightsize binary, default
# $BUILD/rightsize), DRIVER_FLAGS (more fleet_load flags: --connections 8, --jobs-per-node 1,
# --ship-interval-s 5, ...), REQUESTS (pages mode), KEEP=1 (keep the work folder and the
# server's log). How the store is counted is pluggable: COUNT_CMD prints the samples stored for
# cluster $LOAD_CLUSTER, SIZE_CMD the store's size in bytes; both run by bash with LOAD_DB and
# LOAD_CLUSTER set. Defaults: SQLite sum(n) of series_chunks and the file's size (after the
# server stopped); PostgreSQL the same query through psql and pg_database_size(). A command
# that fails leaves its fields null with a note.
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//; /^set -euo/d' >&2
  exit 2
}
[ $# -ge 2 ] || usage
BACKEND=$1
MODE=$2
shift 2
SECONDS_ARG=60
JOBS=100000
if [ "$MODE" = pages ]; then
  if [ $# -gt 0 ] && [ "$1" != -- ]; then JOBS=$1; shift; fi
else
  if [ $# -lt 1 ] || [ "$1" = -- ]; then usage; fi
  SECONDS_ARG=$1
  shift
  NODES=$MODE
  MODE=ingest
  [[ $NODES =~ ^[0-9]+$ ]] || { echo "load_test.sh: NODES must be a number, got '$NODES'" >&2; exit 2; }
fi
if [ $# -gt 0 ]; then
  [ "$1" = -- ] || { echo "load_test.sh: unexpected '$1' (serve flags go after --)" >&2; exit 2; }
  shift
fi
read -r -a EXTRA_SERVE <<<"${SERVE_FLAGS:-}"
EXTRA_SERVE+=("$@")

SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$SRC/build}
RS=${RS:-$BUILD/rightsize}
DRIVER=${DRIVER:-$BUILD/bench/fleet_load}
for f in "$RS" "$DRIVER"; do
  [ -x "$f" ] || { echo "load_test.sh: $f not built (cmake --build build --target rightsize fleet_load)" >&2; exit 2; }
done
WORK=$(mktemp -d /tmp/rightsize-load.XXXXXX)
SERVER_PID=
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null || true; fi
  if [ "${KEEP:-0}" = 1 ]; then echo "load_test.sh: kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

case $BACKEND in
  sqlite) DB=$WORK/load.db; KIND=sqlite ;;
  sqlite:*) DB=${BACKEND#sqlite:}; KIND=sqlite ;;
  postgresql://* | postgres://*) DB=$BACKEND; KIND=postgresql ;;
  *) echo "load_test.sh: BACKEND must be sqlite, sqlite:PATH or a postgresql:// URL, got '$BACKEND'" >&2; exit 2 ;;
esac
CLUSTER=${LOAD_CLUSTER:-load$(date +%s)}
export LOAD_DB=$DB LOAD_CLUSTER=$CLUSTER
if [ -z "${COUNT_CMD:-}" ]; then
  if [ $KIND = sqlite ]; then
    COUNT_CMD='sqlite3 "$LOAD_DB" "SELECT coalesce(sum(n), 0) FROM series_chunks WHERE cluster = '"'"'$LOAD_CLUSTER'"'"'"'
  else
    COUNT_CMD='psql "$LOAD_DB" -Atc "SELECT coalesce(sum(n), 0) FROM series_chunks WHERE cluster = '"'"'$LOAD_CLUSTER'"'"'"'
  fi
fi
if [ -z "${SIZE_CMD:-}" ]; then
  if [ $KIND = sqlite ]; then
    SIZE_CMD='cat "$LOAD_DB" "$LOAD_DB-wal" 2>/dev/null | wc -c || true'
  else
    SIZE_CMD='psql "$LOAD_DB" -Atc "SELECT pg_database_size(current_database())"'
  fi
fi
# run_cmd CMD: its output when it printed one integer, else "null".
run_cmd() {
  local out
  out=$(bash -c "$1" 2>"$WORK/cmd.err" | tr -d '[:space:]') || true
  if [[ $out =~ ^[0-9]+$ ]]; then echo "$out"; else echo null; fi
}

SIZE_BEFORE=$(run_cmd "$SIZE_CMD")  # before the server makes its schema: the delta counts it too
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$port
"$RS" --db "$DB" serve --listen "127.0.0.1:$port" "${EXTRA_SERVE[@]}" >"$WORK/serve.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 300); do
  curl -sf "$URL/healthz" >/dev/null && break
  kill -0 "$SERVER_PID" 2>/dev/null || { echo "load_test.sh: rightsize serve exited: $(cat "$WORK/serve.log")" >&2; exit 1; }
  sleep 0.1
done
curl -sf "$URL/healthz" >/dev/null || { echo "load_test.sh: rightsize serve did not answer: $(cat "$WORK/serve.log")" >&2; exit 1; }

rc=0
if [ $MODE = ingest ]; then
  # shellcheck disable=SC2086  # DRIVER_FLAGS is a list of flags
  "$DRIVER" ingest --url "$URL" --nodes "$NODES" --seconds "$SECONDS_ARG" --cluster "$CLUSTER" \
    --server-pid "$SERVER_PID" ${DRIVER_FLAGS:-} >"$WORK/driver.json" 2>"$WORK/driver.err" || rc=$?
else
  "$DRIVER" pages --url "$URL" --jobs "$JOBS" --requests "${REQUESTS:-200}" --cluster "$CLUSTER" \
    --server-pid "$SERVER_PID" \
    >"$WORK/driver.json" 2>"$WORK/driver.err" || rc=$?
fi
SERVER_METRICS=$(curl -sf "$URL/metrics" | grep -E '^rightsize_telemetry_(samples|batches)_total ' || true)
kill "$SERVER_PID" 2>/dev/null || true
wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=
if [ ! -s "$WORK/driver.json" ]; then
  echo "load_test.sh: fleet_load printed nothing (exit $rc): $(cat "$WORK/driver.err")" >&2
  exit 1
fi
STORED=$(run_cmd "$COUNT_CMD")
COUNT_ERR=$(head -c 300 "$WORK/cmd.err")
SIZE_AFTER=$(run_cmd "$SIZE_CMD")

KIND=$KIND BACKEND=$BACKEND EXTRA="${EXTRA_SERVE[*]}" STORED=$STORED COUNT_ERR=$COUNT_ERR \
  SIZE_BEFORE=$SIZE_BEFORE SIZE_AFTER=$SIZE_AFTER SERVER_METRICS=$SERVER_METRICS COUNT_CMD=$COUNT_CMD \
  python3 - "$WORK/driver.json" <<'EOF'
import json, os, sys
run = json.loads(open(sys.argv[1]).readline())
num = lambda k: None if os.environ[k] == "null" else int(os.environ[k])
out = {"backend": os.environ["BACKEND"], "serve_flags": os.environ["EXTRA"]}
out.update(run)
stored, before, after = num("STORED"), num("SIZE_BEFORE"), num("SIZE_AFTER")
for line in os.environ["SERVER_METRICS"].splitlines():
    name, value = line.split()
    out["server_" + name.replace("rightsize_telemetry_", "")] = int(float(value))
samples = run.get("samples_acked", run.get("fill_samples", 0) + run.get("long_job_samples", 0))
out["count_cmd"] = os.environ["COUNT_CMD"]
out["samples_stored"] = stored
if stored is None:
    out["note"] = "the store's count did not run (" + os.environ["COUNT_ERR"].strip() + \
        "): set COUNT_CMD for this backend"
if stored is not None:
    out["samples_lost"] = samples - stored
out["store_bytes_before"], out["store_bytes_after"] = before, after
if before is not None and after is not None and stored:
    out["bytes_per_sample"] = round((after - before) / stored, 2)
else:
    out["bytes_per_sample"] = None
print(json.dumps(out, separators=(",", ":")))
EOF
exit $rc
