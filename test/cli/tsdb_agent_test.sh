#!/usr/bin/env bash
# `agent --tsdb-write-url` (docs/scale-tsdb.md): a real agent on a real process writes its
# samples straight to a real VictoriaMetrics (started here) and posts the server batches without
# them. The job page's /series comes back from the TSDB, the server's SQLite file has the job
# and no sample; with the TSDB down the agent keeps its batches in the spool (the server gets
# nothing of them) and delivers them, samples once, when the TSDB is back.
# Usage: tsdb_agent_test.sh RIGHTSIZE TESTDIR SRCDIR HOT_LOOP
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
start_vm() {  # start_vm DIR PORT: sets $ENGINE once it answers
  mkdir -p "$1"
  victoria-metrics -storageDataPath="$1/data" -httpListenAddr=127.0.0.1:$2 \
    -retentionPeriod=100y -loggerLevel=WARN >>"$1/log" 2>&1 &
  ENGINE=$!
  PIDS+=("$ENGINE")
  for _ in $(seq 1 200); do
    curl -sf "http://127.0.0.1:$2/health" >/dev/null && return 0
    sleep 0.05
  done
  fail "victoria-metrics did not start: $(cat "$1/log")"
  finish
}
stop_pid() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
flush() { curl -s "$TSDB/internal/force_flush" >/dev/null; }
series() {  # series JOB METRIC: how many points of METRIC the job page's series has
  local body
  body=$(curl -s "$URL/api/v1/jobs/c1/$1/series")
  json_get "$body" "len(d['series'].get('$2', []))" 2>/dev/null || echo 0
}
count_in_tsdb() {  # count_in_tsdb JOB: cpu_cores samples VictoriaMetrics holds (duplicates too)
  curl -s "$TSDB/api/v1/export" --data-urlencode "match[]=rightsize_job_cpu_cores{cluster=\"c1\",job_id=\"$1\"}" |
    python3 -c 'import sys,json; print(sum(len(json.loads(l)["values"]) for l in sys.stdin if l.strip()))'
}

dir=$WORK/vm
port=$(free_port)
TSDB=http://127.0.0.1:$port
start_vm "$dir" "$port"
db=$WORK/serve.db
"$RS" --db "$db" --tsdb-write-url "$TSDB/api/v1/write" --tsdb-query-url "$TSDB" serve \
  --listen 127.0.0.1:0 >"$WORK/serve.out" 2>"$WORK/serve.err" &
server=$!
PIDS+=("$server")
PORT=""
for _ in $(seq 1 100); do
  PORT=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$WORK/serve.out" | cut -d: -f2 || true)
  [ -n "$PORT" ] && break
  sleep 0.1
done
[ -n "$PORT" ] || { fail "server did not start: $(cat "$WORK/serve.err")"; finish; }
URL=http://127.0.0.1:$PORT

run_rs agent --cluster c1 --tsdb-write-url "$TSDB/api/v1/write"
expect_eq "--tsdb-write-url without --server is a usage error" "$RC" 1
expect_contains "and says so" "$ERR" "--tsdb-write-url needs --server"

# --- a real agent on a real process, samples straight to the TSDB ---
SLURM_JOB_ID=9101 SLURM_JOB_USER=alice SLURM_JOB_NAME=spin SLURM_CPUS_ON_NODE=2 \
  "$HOT_LOOP" 600 >/dev/null &
job=$!
PIDS+=("$job")
"$RS" agent --server "$URL" --tsdb-write-url "$TSDB/api/v1/write" --cluster c1 --interval 0.5 \
  --ship-interval 1 --spool "$WORK/spool" 2>"$WORK/agent.err" &
agent=$!
PIDS+=("$agent")
got=0
for _ in $(seq 1 80); do
  flush
  got=$(series 9101 cpu_cores)
  [ "$got" -ge 3 ] && break
  sleep 0.5
done
if [ "$got" -ge 3 ]; then pass "the job page's cpu_cores come back from the TSDB ($got)"; else
  fail "job page cpu_cores: $got; agent: $(cat "$WORK/agent.err")"; fi
expect_eq "the server's SQLite file keeps no samples" \
  "$(sqlite3 "$db" 'SELECT count(*) FROM series_chunks')" 0
expect_eq "and has the job (its record came in the sample-free batch)" \
  "$(sqlite3 "$db" "SELECT count(*) FROM jobs WHERE job_id = '9101'")" 1
# The job's record does not change while it runs: the server got it once, not a batch a second
# (agent/sent_records.h); the job page still shows the job running, with its samples growing.
batches() { curl -s "$URL/metrics" | awk '/^rightsize_telemetry_batches_total /{print $2}'; }
sleep 4
flush
posted=$(batches)
later=$(series 9101 cpu_cores)
# (2 or 3: the record gains the memory limit once the agent has read it.)
if [ "$posted" -ge 1 ] && [ "$posted" -le 3 ]; then
  pass "the server got $posted batch(es) in $((later / 2)) s of 1 s batches"
else fail "the server got $posted batches (want 1 to 3: an unchanged record is not resent)"; fi
if [ "$later" -gt "$got" ]; then pass "the job page's samples grow meanwhile ($got -> $later)"; else
  fail "job page cpu_cores: $later after $got"; fi
expect_contains "the job page shows it running" "$(curl -s "$URL/api/v1/jobs/c1/9101")" '"RUNNING"'

# --- the TSDB down: the agent keeps the batches in its spool, the server gets none of them ---
stop_pid "$ENGINE"
sleep 4
rw=$(ls "$WORK/spool" | grep -c '\.rw$' || true)
if [ "$rw" -ge 1 ]; then pass "batches wait in the spool with their samples ($rw .rw files)"; else
  fail "no .rw in the spool: $(ls "$WORK/spool")"; fi
stop_pid "$job"
sleep 2
# A restarted agent sends what the last one left.
stop_pid "$agent"
left=$(ls "$WORK/spool" | grep -c '\.json$' || true)
start_vm "$dir" "$port"
"$RS" agent --server "$URL" --tsdb-write-url "$TSDB/api/v1/write" --cluster c1 --interval 0.5 \
  --ship-interval 1 --spool "$WORK/spool" 2>"$WORK/agent2.err" &
agent=$!
PIDS+=("$agent")
for _ in $(seq 1 60); do
  [ "$(ls "$WORK/spool" | grep -c '\.json$' || true)" == 0 ] && break
  sleep 0.5
done
expect_eq "the restarted agent delivers the $left spooled batches" \
  "$(ls "$WORK/spool" | grep -c -E '\.(json|rw)$' || true)" 0
expect_contains "it says so" "$(cat "$WORK/agent2.err")" "unsent batches from"
flush
sleep 1
flush
page=$(series 9101 cpu_cores)
stored=$(count_in_tsdb 9101)
distinct=$(curl -s "$TSDB/api/v1/export" --data-urlencode 'match[]=rightsize_job_cpu_cores{cluster="c1",job_id="9101"}' |
  python3 -c 'import sys,json; print(len({t for l in sys.stdin if l.strip() for t in json.loads(l)["timestamps"]}))')
expect_eq "each sample is in the TSDB once (stored $stored, distinct $distinct)" "$stored" "$distinct"
if [ "$page" -gt "$got" ]; then pass "the job page has the samples of the outage too ($page > $got)"; else
  fail "job page after the outage: $page (before $got)"; fi
expect_eq "still no sample in SQLite" "$(sqlite3 "$db" 'SELECT count(*) FROM series_chunks')" 0
expect_eq "the job's ended record reached the server" \
  "$(sqlite3 "$db" "SELECT end_time IS NOT NULL FROM jobs WHERE job_id = '9101'")" 1
stop_pid "$agent"
stop_pid "$server"
finish
