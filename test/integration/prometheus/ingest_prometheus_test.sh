#!/usr/bin/env bash
# `rightsize ingest prometheus` against a real Prometheus (Debian's) holding three days of a
# Kubernetes cluster's kube-state-metrics, cAdvisor and dcgm-exporter series, backfilled with
# promtool: the records a user checks (keys, owners with suffixes stripped, requests, peaks, CPU
# time, GPU memory, OOM and failed states, running pods), the same records when answers are split
# into many small requests, `rightsize report` in dollars with GPU memory, and the bad inputs
# (unreachable URL, a server that is not Prometheus, malformed JSON, an error answer, a bad flag)
# failing clearly with nothing stored.
# Usage: ingest_prometheus_test.sh RIGHTSIZE TESTDIR SRCDIR
set -euo pipefail
source "$2/cli/lib.sh" "$@"
PROMETHEUS=$(command -v prometheus || true)
[ -n "$PROMETHEUS" ] || { fail "prometheus is not installed (scripts/install-deps.sh installs it)"; finish; }
PY=/usr/bin/python3
GEN="$TESTDIR/integration/prometheus/k8s_history.py"

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
free_port() { $PY -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])"; }
utc() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%S; }

# Three days ending an hour ago, on whole hours.
now=$(date +%s)
T_END=$(( now / 3600 * 3600 - 3600 ))
T0=$(( T_END - 3 * 86400 ))
$PY "$GEN" generate "$WORK/k8s.om" "$WORK/expect.json" "$T0" "$T_END"
promtool tsdb create-blocks-from openmetrics --max-block-duration=400h "$WORK/k8s.om" \
  "$WORK/tsdb" >"$WORK/promtool.log" 2>&1 || { fail "promtool backfill: $(tail -5 "$WORK/promtool.log")"; finish; }
pass "promtool backfilled $(grep -c . "$WORK/k8s.om") lines"

: >"$WORK/prometheus.yml"
start_prometheus() {  # start_prometheus [FLAGS…]: sets port and PROM
  port=""
  for _ in 1 2 3; do
    port=$(free_port)
    "$PROMETHEUS" --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
      --storage.tsdb.retention.time=100y --web.listen-address="127.0.0.1:$port" \
      --log.level=warn "$@" >"$WORK/prometheus.log" 2>&1 &
    ppid=$!
    pids+=($ppid)
    for _ in $(seq 1 100); do
      curl -sf "http://127.0.0.1:$port/-/ready" >/dev/null 2>&1 && break
      kill -0 $ppid 2>/dev/null || break
      sleep 0.1
    done
    curl -sf "http://127.0.0.1:$port/-/ready" >/dev/null 2>&1 && break
    port=""
  done
  [ -n "$port" ] || { fail "prometheus did not start: $(tail -5 "$WORK/prometheus.log")"; finish; exit 1; }
  PROM="http://127.0.0.1:$port"
}
start_prometheus

WINDOW=(--since "$(utc "$T0")" --until "$(utc "$T_END")")
run_rs --db "$WORK/k8s.db" ingest prometheus --url "$PROM" "${WINDOW[@]}" --cluster k8s --json
expect_eq "ingest prometheus exits 0 ($ERR)" "$RC" 0
want=$(json_get "$(cat "$WORK/expect.json")" 'len(d["records"])')
expect_eq "records stored" "$(json_get "$OUT" 'd["files"][0]["stored"]')" "$want"
expect_eq "pods with records" "$(json_get "$OUT" 'd["files"][0]["pods"]')" \
  "$(json_get "$(cat "$WORK/expect.json")" 'd["pods"]')"
expect_eq "containers still running" "$(json_get "$OUT" 'd["files"][0]["running"]')" \
  "$(json_get "$(cat "$WORK/expect.json")" 'd["running"]')"
expect_contains "the init containers are noted" "$OUT" "containers seen only by cAdvisor"
expect_contains "the pod that never started is noted" "$OUT" "1 pods never started"
if $PY "$GEN" check "$WORK/expect.json" "$WORK/k8s.db" >"$WORK/check.out"; then
  pass "every record as kube-state-metrics, cAdvisor and dcgm-exporter say ($(grep -c '^ok' "$WORK/check.out") checks)"
else
  fail "records: $(grep FAIL "$WORK/check.out" | head -20)"
fi
expect_eq "cluster and source" "$(sqlite3 "$WORK/k8s.db" "select distinct cluster || ' ' || source from jobs")" "k8s prometheus"

requests=$(json_get "$OUT" 'd["files"][0]["requests"]')

# The same records from 6-hour chunks, with answers capped so small that requests must be split.
run_rs --db "$WORK/small.db" ingest prometheus --url "$PROM" "${WINDOW[@]}" --cluster k8s \
  --chunk 6h --max-answer 6Ki --step 1m --json
expect_eq "ingest with 6-hour chunks and 6 KiB answers exits 0 ($ERR)" "$RC" 0
split=$(json_get "$OUT" 'd["files"][0]["requests"]')
if [ "$split" -gt "$requests" ]; then pass "answers split ($split requests, $requests before)"; else fail "no split: $split requests, $requests before"; fi
if $PY "$GEN" check "$WORK/expect.json" "$WORK/small.db" >"$WORK/check.out"; then
  pass "the same records from 6-hour chunks in small answers"
else
  fail "6-hour chunks: $(grep FAIL "$WORK/check.out" | head -20)"
fi

# A Prometheus that refuses heavy queries (--query.max-samples): each query is asked again over
# fewer or shorter chunks until it fits, and the records are the same.
kill "$ppid"
wait "$ppid" 2>/dev/null || true
start_prometheus --query.max-samples=10000
run_rs --db "$WORK/light.db" ingest prometheus --url "$PROM" "${WINDOW[@]}" --cluster k8s --json
expect_eq "ingest from a Prometheus limited to 10,000 samples a query exits 0 ($ERR)" "$RC" 0
light=$(json_get "$OUT" 'd["files"][0]["requests"]')
if [ "$light" -gt "$requests" ]; then pass "heavy queries asked again in pieces ($light requests)"; else fail "not split: $light requests"; fi
if $PY "$GEN" check "$WORK/expect.json" "$WORK/light.db" >"$WORK/check.out"; then
  pass "the same records from the limited Prometheus"
else
  fail "limited Prometheus: $(grep FAIL "$WORK/check.out" | head -20)"
fi

# Re-ingesting replaces, never duplicates.
run_rs --db "$WORK/k8s.db" ingest prometheus --url "$PROM" "${WINDOW[@]}" --cluster k8s
expect_eq "re-ingest exits 0" "$RC" 0
expect_contains "human summary" "$OUT" "containers of $(json_get "$(cat "$WORK/expect.json")" 'd["pods"]') pods stored in cluster 'k8s'"
expect_eq "no duplicates after re-ingest" "$(sqlite3 "$WORK/k8s.db" 'select count(*) from jobs')" "$want"

# The waste report over these pods, in dollars, with GPU memory.
run_rs --db "$WORK/k8s.db" report --since "$(utc "$T0")" --until "$(utc $((T_END + 60)))" --json
expect_eq "report exits 0 ($ERR)" "$RC" 0
expect_eq "report counts the ended containers" "$(json_get "$OUT" 'd["jobs"]')" \
  "$(json_get "$(cat "$WORK/expect.json")" 'sum(1 for r in d["records"].values() if r["end_time"])')"
dollars=$(json_get "$OUT" 'd["cost"]["wasted_dollars"]')
if $PY -c "import sys; sys.exit(0 if float('$dollars') > 0 else 1)"; then pass "wasted dollars ($dollars)"; else fail "wasted dollars: $dollars"; fi
gpumem=$(json_get "$OUT" 'd["gpu_memory"]["used_gb_hours"]')
if $PY -c "import sys; sys.exit(0 if float('$gpumem') > 0 else 1)"; then pass "GPU memory used ($gpumem GB-hours)"; else fail "GPU memory: $gpumem"; fi
run_rs --db "$WORK/k8s.db" report --since "$(utc "$T0")" --until "$(utc $((T_END + 60)))" --by job-name
expect_contains "report in dollars" "$OUT" '$'
expect_contains "report lists GPU memory" "$OUT" "GPU memory"
expect_contains "report groups the CronJob's runs" "$OUT" "nightly/etl"

# Bad inputs: a clear error, a nonzero exit, nothing stored.
bad() {  # bad WHAT WANT-IN-STDERR ARGS...
  local what=$1 want=$2
  shift 2
  run_rs --db "$WORK/bad.db" ingest prometheus "${WINDOW[@]}" "$@"
  if [ "$RC" -ne 0 ] && grep -qF -- "$want" <<<"$ERR"; then pass "$what: exit $RC"; else fail "$what: rc=$RC err=$ERR"; fi
  local n
  n=$(sqlite3 "$WORK/bad.db" 'select count(*) from jobs' 2>/dev/null || echo 0)
  expect_eq "$what: nothing stored" "$n" 0
}
dead=$(free_port)
bad "unreachable URL" "cannot get" --url "http://127.0.0.1:$dead" --timeout 5
bad "not a URL" "expected http://" --url "127.0.0.1:$port"
bad "bad header" "expected 'Name: value'" --url "$PROM" --header "no colon"
bad "missing token file" "no such file" --url "$PROM" --bearer-token-file "$WORK/none"
bad "bad step" "--step" --url "$PROM" --step 0s
bad "an answer too large even for one chunk" "even for one chunk: raise --max-answer" \
  --url "$PROM" --max-answer 1Ki

# Servers that are not (quite) Prometheus, each answering every request the same way.
mkdir -p "$WORK/www"
echo '<html><body>Grafana</body></html>' >"$WORK/www/index.html"
cat >"$WORK/fake.py" <<'PY'
import http.server, sys
mode = sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if mode == "html":
            body, code, ctype = b"<html><body>404 page not found</body></html>", 404, "text/html"
        elif mode == "malformed":
            body, code, ctype = b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":', 200, "application/json"
        elif mode == "shape":
            body, code, ctype = b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"pod":"p"},"values":[[1,2]]}]}}', 200, "application/json"
        elif mode == "error":
            body, code, ctype = b'{"status":"error","errorType":"bad_data","error":"invalid parameter \\"query\\": parse error"}', 400, "application/json"
        elif mode == "auth":  # a proxy in front of an empty Prometheus
            if self.headers.get("Authorization") != "Bearer s3cret" or self.headers.get("X-Scope-OrgID") != "lab":
                body, code, ctype = b"Unauthorized", 401, "text/plain"
            else:
                body, code, ctype = b'{"status":"success","data":{"resultType":"matrix","result":[]}}', 200, "application/json"
        else:
            body, code, ctype = b'{"status":"success","warnings":["partial response: store 10.0.0.3 unreachable"],"data":{"resultType":"vector","result":[]}}', 200, "application/json"
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
fake() {  # fake MODE: starts a fake server, sets FAKE to its URL
  local p
  p=$(free_port)
  $PY "$WORK/fake.py" "$p" "$1" &
  pids+=($!)
  for _ in $(seq 1 50); do curl -s "http://127.0.0.1:$p/" >/dev/null 2>&1 && break; sleep 0.1; done
  FAKE="http://127.0.0.1:$p"
}
fake html
bad "a server that is not Prometheus" "is --url a Prometheus server?" --url "$FAKE"
fake malformed
bad "malformed JSON" "not the Prometheus API's JSON" --url "$FAKE"
fake shape
bad "a point that is not [time, \"value\"]" "expected a point [time, \"value\"]" --url "$FAKE"
fake error
bad "an error answer" "Prometheus refused a first test query (HTTP 400, bad_data)" --url "$FAKE"
fake warn
bad "an answer with warnings" "--allow-warnings" --url "$FAKE"
fake auth
bad "no credentials" "HTTP 401" --url "$FAKE"
printf 's3cret\n' >"$WORK/token"
bad "credentials sent, but no kube-state-metrics" "no kube-state-metrics pod phases" \
  --url "$FAKE" --bearer-token-file "$WORK/token" --header 'X-Scope-OrgID: lab'
finish
