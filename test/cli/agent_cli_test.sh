#!/usr/bin/env bash
# `rightsize agent` on this node: a process of "SLURM job 4242" (found by SLURM_JOB_ID, as under
# proctrack/linuxproc) holding 200 MiB shows in /metrics while it runs, and its usage record is
# in the store when it ends; SIGTERM stops the agent cleanly.
# Usage: agent_cli_test.sh RIGHTSIZE TESTDIR SRCDIR
set -euo pipefail
source "$2/cli/lib.sh" "$@"

# Job 4343's record is already in the store from sacct (no memory measured): the agent adds
# its peak, and the scheduler's state and user stay.
printf 'JobID|JobIDRaw|Cluster|User|JobName|State|Submit|Start|End|Elapsed|Timelimit|NCPUS|ReqMem|MaxRSS\n%s\n' \
  '4343|4343|testnode|alice|held|COMPLETED|2026-12-04T10:00:00|2026-12-04T10:00:01|2026-12-04T10:00:06|00:00:05|01:00:00|1|1G|' \
  >"$WORK/4343.psv"
"$RS" --db "$WORK/agent.db" ingest sacct "$WORK/4343.psv" >/dev/null
SLURM_JOB_ID=4343 python3 -c "
x = bytearray(60 * 1024 * 1024)
for i in range(0, len(x), 4096):
    x[i] = 1
import time; time.sleep(4)
" &
other=$!
SLURM_JOB_ID=4242 python3 -c "
import time
x = bytearray(200 * 1024 * 1024)
for i in range(0, len(x), 4096):
    x[i] = 1
time.sleep(8)
" &
job=$!
"$RS" --db "$WORK/agent.db" agent --cluster testnode --interval 0.3 --listen 127.0.0.1:0 \
  2>"$WORK/agent.err" &
agent=$!
# A failed check must not leave the agent behind (it would hold ctest's pipe open).
trap 'kill "$agent" 2>/dev/null || true; rm -rf "$WORK"' EXIT
port=""
for _ in $(seq 1 50); do
  port=$(grep -o '/metrics on 127.0.0.1:[0-9]*' "$WORK/agent.err" | cut -d: -f2 || true)
  [ -n "$port" ] && break
  sleep 0.1
done
if [ -n "$port" ]; then pass "agent listening on $port"; else fail "no port: $(cat "$WORK/agent.err")"; fi
# Filling 200 MiB takes the job a second or two on a loaded machine: read /metrics until it
# shows it all (at most 10 s), as a person refreshing the page would.
mem=0
for _ in $(seq 1 40); do
  metrics=$(python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$port/metrics').read().decode())")
  mem=$(grep 'rightsize_job_memory_bytes{job_id="4242"' <<<"$metrics" | awk '{print int($2)}' || true)
  [ -n "$mem" ] && [ "$mem" -ge $((200 * 1024 * 1024)) ] && break
  sleep 0.25
done
expect_contains "the job is in /metrics" "$metrics" 'rightsize_job_memory_bytes{job_id="4242",kind="slurm"}'
if [ -n "$mem" ] && [ "$mem" -ge $((200 * 1024 * 1024)) ]; then pass "live memory $mem"; else fail "live memory $mem"; fi
expect_contains "agent counters" "$metrics" "rightsize_agent_cycles_total"
wait "$job" "$other"
sleep 1.5
kill -TERM "$agent"
set +e
wait "$agent"
rc=$?
set -e
expect_eq "SIGTERM stops the agent cleanly" "$rc" 0
run_rs --db "$WORK/agent.db" job 4242 --cluster testnode --json
expect_eq "the job's usage record was stored" "$RC" 0
peak=$(json_get "$OUT" 'd["job"]["usage"]["peak_memory_bytes"]')
if [ "$peak" -ge $((200 * 1024 * 1024)) ] && [ "$peak" -le $((240 * 1024 * 1024)) ]; then
  pass "stored peak memory $peak"; else fail "stored peak $peak"; fi
expect_eq "source agent" "$(json_get "$OUT" 'd["job"]["source"]')" agent
run_rs --db "$WORK/agent.db" job 4343 --cluster testnode --json
expect_eq "sacct's record is kept" \
  "$(json_get "$OUT" '(d["job"]["source"], d["job"]["outcome"]["state"], d["job"]["request"]["user"])')" \
  "('sacct', 'COMPLETED', 'alice')"
expect_eq "and gains the peak the agent measured" \
  "$(json_get "$OUT" '60 * 2**20 <= d["job"]["usage"]["peak_memory_bytes"] <= 100 * 2**20')" True
run_rs --db "$WORK/agent.db" agent --listen nonsense
expect_eq "bad --listen is a usage error" "$RC" 1
finish
