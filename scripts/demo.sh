#!/usr/bin/env bash
# The demo behind `make demo`, the product's point in a minute:
#   1. the store: real accounting of a GPU cluster (FAU Alex, Feb 2023), a CPU cluster, a sacct
#      export and a 2002 CPU trace (scripts/demo-store.sh), and what the GPU cluster wasted;
#   2. live: `rightsize serve` on that store, `rightsize agent` watching a few short real jobs
#      this script starts (scripts/demo_workload.py, found as SLURM jobs by their environment),
#      so the dashboard's overview, charts and flame graphs move. It prints the URL and serves
#      until Ctrl-C; four new jobs start every 45 s meanwhile.
# Without a terminal (CI, `make demo </dev/null`) the live part lasts 60 s, then the demo ends;
# RIGHTSIZE_DEMO_SECONDS=N sets its length (0: no live part). Either way the store stays:
# `build/rightsize --db build/demo.db serve` shows it again. RIGHTSIZE_DEMO_LISTEN=HOST:PORT
# (default 127.0.0.1:8080, else any free port). STORE (`make demo DEMO_DB=…`) puts the demo in
# another store: an SQLite file, or a PostgreSQL database by its postgresql:// URL.
# Usage: scripts/demo.sh path/to/rightsize [STORE]
set -euo pipefail
RS=$(realpath "${1:-build/rightsize}")
cd "$(dirname "$0")/.."
SRC=$PWD
DB=${2:-build/demo.db}
LOGS=build/demo-logs
mkdir -p "$LOGS"

bash scripts/demo-store.sh "$RS" "$DB"
rs() { "$RS" --db "$DB" "$@"; }

echo
echo "== rightsize report --cluster alex (the GPU cluster; the whole report: report.html)"
rs report --cluster alex >"$LOGS/report-alex.txt"
sed -n '1,/^Resources/p' "$LOGS/report-alex.txt" | sed '$d'
rs report --cluster alex --format html -o report.html
echo
echo "== rightsize job 679909 --cluster alex (8 A40 GPUs held for 2 h 42 min, all idle)"
rs job 679909 --cluster alex

if [ -n "${RIGHTSIZE_DEMO_SECONDS:-}" ]; then
  seconds=$RIGHTSIZE_DEMO_SECONDS
elif [ -t 0 ] && [ -t 1 ]; then
  seconds=""  # until Ctrl-C
else
  seconds=60
fi
if ! [[ "${seconds:-0}" =~ ^[0-9]+$ ]]; then
  echo "demo: RIGHTSIZE_DEMO_SECONDS must be a whole number of seconds, got '$seconds'" >&2
  exit 1
fi
if [ "$seconds" = "0" ]; then
  echo
  echo "The store is $DB: build/rightsize --db $DB serve, then open http://127.0.0.1:8080/"
  exit 0
fi

# ---- live part
server="" agent="" job_pids=()
stop() {
  trap - INT TERM EXIT
  echo
  echo "== stopping: the jobs, then the agent (it ships their ends), then the server"
  for p in "${job_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 3
  [ -n "$agent" ] && kill "$agent" 2>/dev/null || true
  [ -n "$agent" ] && wait "$agent" 2>/dev/null || true
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  wait 2>/dev/null || true
  echo "The store is $DB (the live jobs included): build/rightsize --db $DB serve"
}
trap stop EXIT
trap 'exit 0' INT TERM

start_server() {
  : >"$LOGS/serve.out"
  # setsid: Ctrl-C reaches the demo, which stops the server after the agent has shipped.
  setsid "$RS" --db "$DB" serve --listen "$1" >"$LOGS/serve.out" 2>"$LOGS/serve.err" &
  server=$!
  for _ in $(seq 1 100); do
    port=$(grep -o 'listening on [^ ]*:[0-9]*' "$LOGS/serve.out" | sed 's/.*://' || true)
    [ -n "$port" ] && return 0
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
  done
  server=""
  return 1
}
listen=${RIGHTSIZE_DEMO_LISTEN:-127.0.0.1:8080}
if ! start_server "$listen"; then
  if [ -n "${RIGHTSIZE_DEMO_LISTEN:-}" ]; then
    echo "demo: rightsize serve could not listen on $listen: $(cat "$LOGS/serve.err")" >&2
    exit 1
  fi
  start_server 127.0.0.1:0 || { echo "demo: rightsize serve did not start: $(cat "$LOGS/serve.err")" >&2; exit 1; }
fi
url="http://127.0.0.1:$port"
rm -rf build/demo-spool  # batches of an earlier demo's store
setsid "$RS" agent --server "$url" --cluster demo --interval 1 --ship-interval 2 --stacks \
  --spool build/demo-spool 2>"$LOGS/agent.err" &
agent=$!

# The live jobs: KIND USER NAME CPUS MEMORY_MB, each asking for more than it uses.
specs=("crunch alice train-model 4 8192" "grow bob etl-merge 2 4096" "idle carol notebook 8 16384"
  "fail dave preprocess 4 8192")
next_id=1001
start_jobs() {
  for spec in "${specs[@]}"; do
    read -r kind user name cpus mem <<<"$spec"
    SLURM_JOB_ID=$next_id SLURM_JOB_USER=$user SLURM_JOB_NAME=$name SLURM_CPUS_ON_NODE=$cpus \
      SLURM_MEM_PER_NODE=$mem setsid python3 "$SRC/scripts/demo_workload.py" "$kind" 50 \
      >/dev/null 2>>"$LOGS/jobs.err" &
    job_pids+=($!)
    next_id=$((next_id + 1))
  done
}
start_jobs

echo
echo "== rightsize serve: the dashboard is at $url/"
echo "   the GPU cluster's waste:   $url/#/report?cluster=alex"
echo "   the idle 8-GPU job:         $url/#/job/alex/679909"
echo "   a live job, flame graph:    $url/#/job/demo/1001   (4 new jobs every 45 s)"
if [ -z "$seconds" ]; then
  echo "Press Ctrl-C to stop."
else
  echo "Serving for $seconds s (RIGHTSIZE_DEMO_SECONDS)."
fi
t=0
while [ -z "$seconds" ] || [ "$t" -lt "$seconds" ]; do
  sleep 1
  t=$((t + 1))
  if ! kill -0 "$server" 2>/dev/null; then
    echo "demo: rightsize serve stopped: $(tail -3 "$LOGS/serve.err")" >&2
    exit 1
  fi
  if [ $((t % 45)) -eq 0 ]; then start_jobs; fi
done
