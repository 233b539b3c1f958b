#!/usr/bin/env bash
# `rightsize serve` with jobs' samples in a real TSDB (docs/scale-tsdb.md): Debian's
# VictoriaMetrics (named in the config file) and Prometheus with its remote-write receiver
# (named by the global flags), each started here in a temp dir. A real agent watches a real
# process: the job page's /series and `rightsize job` come back from the TSDB, the SQLite file
# holds the job but no samples, and a TSDB that is down makes the server answer 503 without
# storing the batch, which the agent's retry then stores whole.
# Usage: tsdb_cli_test.sh RIGHTSIZE TESTDIR SRCDIR HOT_LOOP
set -euo pipefail
source "$2/cli/lib.sh" "$@"
HOT_LOOP=$4
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_engine KIND DIR PORT: sets $ENGINE (pid) once it answers.
start_engine() {
  local kind=$1 dir=$2 port=$3 ready
  mkdir -p "$dir"
  if [ "$kind" == victoria-metrics ]; then
    # The default -search.latencyOffset (30 s): the server's reads must see past it.
    victoria-metrics -storageDataPath="$dir/data" -httpListenAddr=127.0.0.1:$port \
      -retentionPeriod=100y -loggerLevel=WARN >>"$dir/log" 2>&1 &
    ready=/health
  else
    printf 'storage:\n  tsdb:\n    out_of_order_time_window: 30d\n' >"$dir/prometheus.yml"
    prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
      --web.listen-address=127.0.0.1:$port --web.enable-remote-write-receiver \
      --storage.tsdb.retention.time=100y --log.level=warn >>"$dir/log" 2>&1 &
    ready=/-/ready
  fi
  ENGINE=$!
  PIDS+=("$ENGINE")
  for _ in $(seq 1 200); do
    curl -sf "http://127.0.0.1:$port$ready" >/dev/null && return 0
    sleep 0.05
  done
  fail "$kind did not start: $(cat "$dir/log")"
  finish
}
stop_pid() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

http() {  # http METHOD URL [curl args…]: sets $CODE and $BODY
  local method=$1 url=$2
  shift 2
  BODY=$(curl -s -o - -w '\n%{http_code}' -X "$method" "$@" "$url")
  CODE=$(tail -n1 <<<"$BODY")
  BODY=$(sed '$d' <<<"$BODY")
}

for kind in victoria-metrics prometheus; do
  echo "--- $kind ---"
  dir=$WORK/$kind
  port=$(free_port)
  TSDB=http://127.0.0.1:$port
  start_engine "$kind" "$dir" "$port"
  flush() { [ "$kind" != victoria-metrics ] || curl -s "$TSDB/internal/force_flush" >/dev/null; }
  db=$dir/serve.db
  if [ "$kind" == victoria-metrics ]; then
    cat >"$dir/config.json" <<JSON
{"agent_tokens": ["agent-secret"], "user_tokens": {"ops-token": "ops"}, "admins": ["ops"],
 "tsdb_write_url": "$TSDB/api/v1/write", "tsdb_query_url": "$TSDB"}
JSON
    TSDB_ARGS=()
    SERVE_ARGS=(--config "$dir/config.json")
    AGENT_AUTH=(--token agent-secret)
    H_AGENT=(-H 'Authorization: Bearer agent-secret')
    H_USER=(-H 'Authorization: Bearer ops-token')
  else
    TSDB_ARGS=(--tsdb-write-url "$TSDB/api/v1/write" --tsdb-query-url "$TSDB")
    SERVE_ARGS=()
    AGENT_AUTH=()
    H_AGENT=()
    H_USER=()
  fi
  "$RS" --db "$db" "${TSDB_ARGS[@]}" serve --listen 127.0.0.1:0 "${SERVE_ARGS[@]}" \
    >"$dir/serve.out" 2>"$dir/serve.err" &
  server=$!
  PIDS+=("$server")
  PORT=""
  for _ in $(seq 1 100); do
    PORT=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$dir/serve.out" | cut -d: -f2 || true)
    [ -n "$PORT" ] && break
    sleep 0.1
  done
  [ -n "$PORT" ] || { fail "server did not start: $(cat "$dir/serve.err")"; finish; }
  URL=http://127.0.0.1:$PORT
  expect_contains "$kind: serve says where samples go" "$(cat "$dir/serve.err")" \
    "samples to $TSDB/api/v1/write"

  # --- a real agent on a real process ---
  # Runs until stopped below: the job card's live figures are only there while it runs.
  SLURM_JOB_ID=9001 SLURM_JOB_USER=alice SLURM_JOB_NAME=spin SLURM_CPUS_ON_NODE=2 \
    "$HOT_LOOP" 120 >/dev/null &
  job=$!
  PIDS+=("$job")
  "$RS" agent --server "$URL" "${AGENT_AUTH[@]}" --cluster c1 --interval 0.5 --ship-interval 1 \
    --spool "$dir/spool" 2>"$dir/agent.err" &
  agent=$!
  PIDS+=("$agent")
  seen=""
  for _ in $(seq 1 80); do
    flush
    http GET "$URL/api/v1/jobs/c1/9001/series" "${H_USER[@]}"
    if [ "$CODE" == 200 ] && [ "$(json_get "$BODY" "len(d['series'].get('cpu_cores', []))")" -ge 3 ]; then
      seen=yes
      break
    fi
    sleep 0.5
  done
  expect_eq "$kind: the job page's series of the agent's job come back" "$seen" yes
  expect_contains "$kind: every metric the agent sent is listed" "$BODY" '"memory_bytes":['
  busy=$(json_get "$BODY" "max(p[2] for p in d['series']['cpu_cores'])")
  if python3 -c "import sys; sys.exit(0 if $busy > 0.2 else 1)"; then
    pass "$kind: a busy core shows ($busy)"
  else fail "$kind: cpu_cores max $busy"; fi
  # The samples are the TSDB's, under the documented names; SQLite has the job, not them.
  n=$(curl -s "$TSDB/api/v1/query" --data-urlencode 'query=count_over_time(rightsize_job_cpu_cores{cluster="c1",job_id="9001"}[1h])' \
    --data-urlencode nocache=1 --data-urlencode latency_offset=0s | json_get "$(cat)" "d['data']['result'][0]['value'][1]")
  if [ "${n%.*}" -ge 3 ]; then pass "$kind: the TSDB holds rightsize_job_cpu_cores ($n samples)"; else fail "$kind: TSDB has $n"; fi
  expect_eq "$kind: the SQLite file keeps no samples" "$(sqlite3 "$db" 'SELECT count(*) FROM series_chunks')" 0
  expect_eq "$kind: the SQLite file keeps the job" \
    "$(sqlite3 "$db" "SELECT count(*) FROM jobs WHERE job_id = '9001'")" 1

  # `rightsize job` reads the same samples when told where (flags or the environment).
  RIGHTSIZE_TSDB_WRITE_URL=$TSDB/api/v1/write RIGHTSIZE_TSDB_QUERY_URL=$TSDB \
    run_rs --db "$db" job 9001 --cluster c1 --json
  expect_eq "$kind: rightsize job with the TSDB" "$RC" 0
  cores=$(json_get "$OUT" 'd.get("live", {}).get("cores_last_minute", 0)')
  if python3 -c "import sys; sys.exit(0 if $cores > 0.05 else 1)"; then
    pass "$kind: the job card's cores now come from the TSDB ($cores)"
  else fail "$kind: job card cores now $cores: $OUT"; fi
  run_rs --db "$db" --tsdb-write-url "$TSDB/api/v1/write" job 9001 --cluster c1
  expect_eq "$kind: one TSDB URL without the other is a usage error" "$RC" 1
  expect_contains "$kind: and says so" "$ERR" "needs both its remote-write URL and its query URL"
  stop_pid "$agent"
  stop_pid "$job"

  # --- the TSDB down: 503 and nothing stored; the same batch once it is back: all of it ---
  now=$(date +%s)
  cat >"$dir/batch.json" <<JSON
{"schema":"rightsize.telemetry/v1","agent":"hand","seq":1,"jobs":[{"job":{"cluster":"c1","job_id":"77",
 "start_time":$((now - 100)),"request":{"user":"alice"},"outcome":{"state":"RUNNING"}},
 "samples":{"memory_bytes":[[$((now - 30)),100],[$((now - 29)),200],[$((now - 28)).5,300]]}}]}
JSON
  stop_pid "$ENGINE"
  http POST "$URL/api/v1/telemetry" "${H_AGENT[@]}" -H 'Content-Type: application/json' --data-binary @"$dir/batch.json"
  expect_eq "$kind: a batch while the TSDB is down gets 503 (the agent retries)" "$CODE" 503
  expect_contains "$kind: saying why" "$BODY" "cannot send 3 samples to the TSDB at $TSDB/api/v1/write"
  expect_eq "$kind: and nothing of it is stored" \
    "$(sqlite3 "$db" "SELECT count(*) FROM jobs WHERE job_id = '77'")" 0
  http GET "$URL/api/v1/jobs/c1/9001/series" "${H_USER[@]}"
  expect_eq "$kind: the job page's series while the TSDB is down: an error" "$CODE" 500
  expect_contains "$kind: naming the TSDB" "$BODY" "cannot read a job's metrics from the TSDB at $TSDB"
  start_engine "$kind" "$dir" "$port"
  http POST "$URL/api/v1/telemetry" "${H_AGENT[@]}" -H 'Content-Type: application/json' --data-binary @"$dir/batch.json"
  expect_eq "$kind: the same batch once the TSDB is back" "$CODE" 200
  got=""
  for _ in $(seq 1 60); do
    flush
    got=$(curl -s "${H_USER[@]}" "$URL/api/v1/jobs/c1/77/series?metric=memory_bytes&from=$((now - 60))&to=$now&step=0.5" |
      json_get "$(cat)" "[p[1] for p in d['series']['memory_bytes']]" || true)
    [ "$got" == "[100.0, 200.0, 300.0]" ] && break
    sleep 0.5
  done
  expect_eq "$kind: its three samples, once each" "$got" "[100.0, 200.0, 300.0]"
  http POST "$URL/api/v1/telemetry" "${H_AGENT[@]}" -H 'Content-Type: application/json' --data-binary @"$dir/batch.json"
  expect_eq "$kind: and a third time it is a replay" "$CODE" 409
  stop_pid "$server"
  stop_pid "$ENGINE"
done
finish
