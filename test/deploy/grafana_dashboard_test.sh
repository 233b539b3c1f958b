#!/usr/bin/env bash
# deploy/grafana/rightsize.json against the binaries: a real `rightsize serve` and a real
# `rightsize agent --listen` (NVML through the fake library, so the GPU series exist) watch a
# real process of "SLURM job 6160"; both /metrics are scraped once every series the dashboard
# needs has samples, and check_dashboard.mjs parses every panel's and variable's PromQL with
# Prometheus's own grammar and fails on any metric the binaries did not export. The same check
# must fail on a copy of the dashboard with one metric misspelt. Then a real Prometheus scrapes
# both and answers every query as Grafana would send it (variables at All) with data.
# Usage: grafana_dashboard_test.sh RIGHTSIZE TESTDIR SRCDIR FAKE_NVML NODE_DIR
set -euo pipefail
source "$2/cli/lib.sh" "$@"
FAKE_NVML=$4
NODE_DIR=$5
DASHBOARD=$SRCDIR/deploy/grafana/rightsize.json
CHECK=$NODE_DIR/check_dashboard.mjs
cp "$TESTDIR/deploy/grafana/check_dashboard.mjs" "$CHECK"

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
scrape() { python3 -c "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())" "$1"; }

"$RS" --db "$WORK/serve.db" serve --listen 127.0.0.1:0 >"$WORK/serve.out" 2>"$WORK/serve.err" &
pids+=($!)
sport=$(listening_port "$WORK/serve.out")
SLURM_JOB_ID=6160 SLURM_JOB_USER=dave python3 -c "
import os, sys, time
open(sys.argv[1], 'w').write(str(os.getpid()))
x = bytearray(50 * 1024 * 1024)
for i in range(0, len(x), 4096): x[i] = 1
time.sleep(120)" "$WORK/job.pid" &
pids+=($!)
# GPU 0 is the job's, busy 30% of the time with 20 GiB of its memory.
cat >"$WORK/nvml.script" <<SCRIPT
gpu 0 uuid=GPU-6160 name=NVIDIA H100 bus=00000000:3B:00.0 util=30 memutil=10 used=21474836480 total=85899345920 power=250000 sm=1980 mem=2619 temp=50 ecc=0
proc 0 pidfile=$WORK/job.pid used=21474836480
SCRIPT
RIGHTSIZE_FAKE_NVML=$WORK/nvml.script "$RS" agent --server "http://127.0.0.1:$sport" \
  --cluster grafanatest --interval 0.5 --ship-interval 1 --listen 127.0.0.1:0 \
  --spool "$WORK/spool" --nvml "$FAKE_NVML" 2>"$WORK/agent.err" &
pids+=($!)
aport=""
for _ in $(seq 1 100); do
  aport=$(grep -o '/metrics on 127.0.0.1:[0-9]*' "$WORK/agent.err" | cut -d: -f2 || true)
  [ -n "$aport" ] && break
  sleep 0.1
done
if [ -n "$sport" ] && [ -n "$aport" ]; then
  pass "server on $sport, agent on $aport"
else
  fail "server or agent did not start: $(cat "$WORK/serve.err" "$WORK/agent.err")"
  finish
fi
# Until the agent reports the job's GPU and the server has the agent's cluster (at most 30 s).
ready=""
for _ in $(seq 1 120); do
  scrape "http://127.0.0.1:$sport/metrics" >"$WORK/server.prom" || true
  scrape "http://127.0.0.1:$aport/metrics" >"$WORK/agent.prom" || true
  if grep -q '^rightsize_job_gpu_util_pct{job_id="6160"' "$WORK/agent.prom" &&
    grep -q '^rightsize_allocated_gpus{cluster="grafanatest"}' "$WORK/server.prom"; then
    ready=yes
    break
  fi
  sleep 0.25
done
expect_eq "the agent exports the job's GPU series and the server the agent's cluster" "$ready" yes
expect_contains "GPU utilisation from the fake NVML" "$(cat "$WORK/agent.prom")" \
  'rightsize_job_gpu_util_pct{job_id="6160",kind="slurm"} 30'

if (cd "$NODE_DIR" && EXPRS_OUT=$WORK/exprs node "$CHECK" "$DASHBOARD" "$WORK/server.prom" \
  "$WORK/agent.prom") \
  >"$WORK/check.out" 2>&1; then
  pass "every panel queries metrics the binaries export"
else
  fail "the dashboard check: $(cat "$WORK/check.out")"
fi
cat "$WORK/check.out"
# The check can fail: one metric misspelt in one panel, or a query that does not parse.
sed 's/rightsize_job_gpu_util_pct{job_id/rightsize_job_gpu_utilisation_pct{job_id/' \
  "$DASHBOARD" >"$WORK/misspelt.json"
if (cd "$NODE_DIR" && node "$CHECK" "$WORK/misspelt.json" "$WORK/server.prom" "$WORK/agent.prom") \
  >"$WORK/check.out" 2>&1; then
  fail "a misspelt metric passed the check"
else
  expect_contains "a misspelt metric is caught" "$(cat "$WORK/check.out")" \
    'queries rightsize_job_gpu_utilisation_pct, which the binaries did not export'
fi
sed 's/sum(rightsize_running_jobs/sum(rightsize_running_jobs}/' "$DASHBOARD" >"$WORK/broken.json"
if (cd "$NODE_DIR" && node "$CHECK" "$WORK/broken.json" "$WORK/server.prom" "$WORK/agent.prom") \
  >"$WORK/check.out" 2>&1; then
  fail "a query that does not parse passed the check"
else
  expect_contains "a query that does not parse is caught" "$(cat "$WORK/check.out")" \
    'PromQL syntax error'
fi

PROMETHEUS=$(command -v prometheus || true)
[ -n "$PROMETHEUS" ] || { fail "prometheus is not installed (scripts/install-deps.sh installs it)"; finish; }
pport=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])")
cat >"$WORK/prometheus.yml" <<YML
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: rightsize-serve
    static_configs: [{targets: ['127.0.0.1:$sport']}]
  - job_name: rightsize-agent
    static_configs: [{targets: ['127.0.0.1:$aport']}]
YML
"$PROMETHEUS" --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
  --web.listen-address="127.0.0.1:$pport" >"$WORK/prometheus.log" 2>&1 &
pids+=($!)
query() {  # query PROMQL: prints "success N" (N series in the answer) or "error WHY"
  python3 -c "
import json, sys, urllib.error, urllib.parse, urllib.request
url = 'http://127.0.0.1:$pport/api/v1/query?' + urllib.parse.urlencode({'query': sys.argv[1]})
try:
    d = json.load(urllib.request.urlopen(url, timeout=5))
    print(d['status'], len(d['data']['result']))
except urllib.error.HTTPError as e:
    print('error', json.load(e).get('error'))
except Exception as e:
    print('error', e)" "$1"
}
# Rates need two scrapes of each target: wait for them (at most 30 s).
ready=""
for _ in $(seq 1 60); do
  if [ "$(query 'rate(rightsize_agent_cycles_total[5m])')" == "success 1" ] &&
    [ "$(query 'rate(rightsize_telemetry_samples_total[5m])')" == "success 1" ] &&
    [ "$(query 'rightsize_job_gpu_util_pct')" == "success 1" ]; then
    ready=yes
    break
  fi
  sleep 0.5
done
expect_eq "Prometheus scraped the server and the agent twice" "$ready" yes
# One client for all the queries (a process per query costs seconds on a loaded machine).
python3 - "$pport" "$WORK/exprs" >"$WORK/answers" 2>&1 <<'PY' || true
import json, sys, time, urllib.error, urllib.parse, urllib.request
port, path = sys.argv[1], sys.argv[2]
for expr in filter(None, open(path).read().split("\n")):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        d = json.load(urllib.request.urlopen(url, timeout=10))
        n = len(d["data"]["result"])
        print(("ok" if d["status"] == "success" and n else "empty"), n, expr)
    except urllib.error.HTTPError as e:
        print("error", json.load(e).get("error"), expr)
    except Exception as e:
        print("error", e, expr)
PY
bad=$(grep -v '^ok ' "$WORK/answers" || true)
expect_eq "Prometheus answered each of the dashboard's $(grep -c . "$WORK/exprs") queries with data" \
  "$bad" ""
finish
