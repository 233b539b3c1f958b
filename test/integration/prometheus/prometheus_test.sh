#!/usr/bin/env bash
# A real Prometheus (Debian's) scrapes `rightsize serve` and `rightsize agent --listen` while a
# real process runs as a job: both targets are up (their exposition parses), the server's
# running-job and telemetry counters and the agent's per-job gauges land in Prometheus's store
# and answer PromQL queries. promtool lints both expositions.
# Usage: prometheus_test.sh RIGHTSIZE TESTDIR SRCDIR
set -euo pipefail
source "$2/cli/lib.sh" "$@"
PROMETHEUS=$(command -v prometheus || true)
[ -n "$PROMETHEUS" ] || { fail "prometheus is not installed (scripts/install-deps.sh installs it)"; finish; }

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
free_port() { python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])"; }

"$RS" --db "$WORK/serve.db" serve --listen 127.0.0.1:0 >"$WORK/serve.out" 2>"$WORK/serve.err" &
pids+=($!)
for _ in $(seq 1 100); do
  sport=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$WORK/serve.out" | cut -d: -f2 || true)
  [ -n "$sport" ] && break
  sleep 0.1
done
SLURM_JOB_ID=5150 SLURM_JOB_USER=carol python3 -c "
import time
x = bytearray(100 * 1024 * 1024)
for i in range(0, len(x), 4096): x[i] = 1
time.sleep(60)" &
pids+=($!)
"$RS" agent --server "http://127.0.0.1:$sport" --cluster promtest --interval 0.5 --ship-interval 1 \
  --listen 127.0.0.1:0 --spool "$WORK/spool" 2>"$WORK/agent.err" &
pids+=($!)
for _ in $(seq 1 100); do
  aport=$(grep -o '/metrics on 127.0.0.1:[0-9]*' "$WORK/agent.err" | cut -d: -f2 || true)
  [ -n "$aport" ] && break
  sleep 0.1
done
[ -n "${sport:-}" ] && [ -n "${aport:-}" ] || { fail "server or agent did not start"; finish; }
sleep 2
curl -s "http://127.0.0.1:$sport/metrics" >"$WORK/server.prom"
curl -s "http://127.0.0.1:$aport/metrics" >"$WORK/agent.prom"
if promtool check metrics <"$WORK/server.prom" >"$WORK/lint" 2>&1; then pass "promtool: the server's exposition"; else fail "promtool server: $(cat "$WORK/lint")"; fi
if promtool check metrics <"$WORK/agent.prom" >"$WORK/lint" 2>&1; then pass "promtool: the agent's exposition"; else fail "promtool agent: $(cat "$WORK/lint")"; fi

pport=$(free_port)
cat >"$WORK/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: rightsize-serve
    static_configs: [{targets: ['127.0.0.1:$sport']}]
  - job_name: rightsize-agent
    static_configs: [{targets: ['127.0.0.1:$aport']}]
YML
"$PROMETHEUS" --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
  --web.listen-address="127.0.0.1:$pport" >"$WORK/prometheus.log" 2>&1 &
pids+=($!)
query() {  # query PROMQL: prints the result vector as JSON
  curl -s --get "http://127.0.0.1:$pport/api/v1/query" --data-urlencode "query=$1" |
    python3 -c "import json,sys; print(json.dumps(json.load(sys.stdin).get('data',{}).get('result',[])))"
}
# Wait until both targets have been scraped (each scrape sets `up`, 0 if the exposition did not
# parse) and the server's gauge has a value.
ok=""
for _ in $(seq 1 60); do
  r=$(query 'rightsize_running_jobs{cluster="promtest"}' 2>/dev/null || echo '[]')
  n=$(json_get "$(query 'count(up)' 2>/dev/null || echo '[]')" 'int(float(d[0]["value"][1])) if d else 0' 2>/dev/null || echo 0)
  if [ "$r" != "[]" ] && [ -n "$r" ] && [ "$n" == 2 ]; then ok=yes; break; fi
  sleep 0.5
done
expect_eq "Prometheus scraped the server's running jobs" "$ok" yes
up=$(query 'sum(up)')
expect_eq "both targets are up (the expositions parse)" "$(json_get "$up" 'int(float(d[0]["value"][1]))')" 2
running=$(query 'rightsize_running_jobs{cluster="promtest"}')
if [ "$(json_get "$running" 'int(float(d[0]["value"][1]))')" -ge 1 ]; then pass "a running job counted"; else fail "running: $running"; fi
mem=$(query 'rightsize_job_memory_bytes{job_id="5150"}')
bytes=$(json_get "$mem" 'int(float(d[0]["value"][1])) if d else 0')
if [ "$bytes" -ge $((100 * 1024 * 1024)) ]; then pass "the agent's per-job memory gauge ($bytes)"; else fail "job memory: $mem"; fi
samples=$(query 'rightsize_telemetry_samples_total')
if [ "$(json_get "$samples" 'int(float(d[0]["value"][1])) if d else 0')" -gt 0 ]; then pass "telemetry counter scraped"; else fail "samples: $samples"; fi
finish
