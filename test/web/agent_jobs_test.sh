#!/usr/bin/env bash
# Jobs the agent saw before accounting did, in a real browser (issue 28): a real `rightsize agent`
# watches "SLURM jobs" started by hand (found by SLURM_JOB_ID, as under proctrack/linuxproc) and
# ships them to a real `rightsize serve`:
#   - job 5101 dies of MemoryError (exit 1) with 16 GiB asked for and its output in slurm-5101.out:
#     its page must show it failed, its diagnosis, and advice to ask for more memory;
#   - array job 5200's tasks 0 and 1 run as raw job ids 5201 and 5202; accounting then arrives
#     (`ingest sacct`, SLURM's own `5200_0` / `5200_1`): each task must be one job, in the list
#     and in the report.
# The checks are in agent_jobs_test.mjs; screenshots land in SHOTS.
# Usage: agent_jobs_test.sh RIGHTSIZE TESTDIR SRCDIR WEB_BUILD SHOTS
set -euo pipefail
source "$2/cli/lib.sh" "$@"
export RIGHTSIZE_WEB_BUILD=$4
SHOTS=$5
mkdir -p "$SHOTS"

"$RS" --db "$WORK/serve.db" serve --listen 127.0.0.1:0 >"$WORK/serve.out" 2>"$WORK/serve.err" &
server=$!
agent=""
cleanup() {
  for p in $agent $server; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  cd /
  rm -rf "$WORK"
}
trap cleanup EXIT
port=$(listening_port "$WORK/serve.out")
[ -n "$port" ] || { fail "server did not start: $(cat "$WORK/serve.err")"; finish; }
URL="http://127.0.0.1:$port"

"$RS" agent --server "$URL" --cluster demo --interval 0.3 --ship-interval 1 \
  --spool "$WORK/spool" 2>"$WORK/agent.err" &
agent=$!
sleep 1
cd "$WORK"
SLURM_JOB_ID=5101 SLURM_JOB_USER=alice SLURM_JOB_NAME=load-batches SLURM_MEM_PER_NODE=16384 \
  python3 "$SRCDIR/scripts/demo_workload.py" fail 3 >"$WORK/slurm-5101.out" 2>&1 &
failing=$!
SLURM_JOB_ID=5201 SLURM_ARRAY_JOB_ID=5200 SLURM_ARRAY_TASK_ID=0 SLURM_JOB_USER=alice \
  SLURM_JOB_NAME=sweep python3 -c "import time; time.sleep(3)" &
task0=$!
SLURM_JOB_ID=5202 SLURM_ARRAY_JOB_ID=5200 SLURM_ARRAY_TASK_ID=1 SLURM_JOB_USER=alice \
  SLURM_JOB_NAME=sweep python3 -c "import time; time.sleep(3)" &
task1=$!
set +e
wait "$failing" "$task0" "$task1"
set -e
# The ended records reach the server within a few ship intervals.
for _ in $(seq 1 60); do
  if curl -s "$URL/api/v1/jobs/demo/5101" | grep -q '"FAILED"' &&
    curl -s "$URL/api/v1/jobs/demo/5200_1" | grep -q '"end_time":[0-9]'; then
    break
  fi
  sleep 0.5
done
expect_contains "the agent's record of job 5101 reached the server" \
  "$(curl -s "$URL/api/v1/jobs/demo/5101")" '"FAILED"'

# Accounting arrives: SLURM names the tasks 5200_0 and 5200_1 (raw ids 5201, 5202).
now=$(date -u +%Y-%m-%dT%H:%M:%S)
start=$(date -u -d '-10 seconds' +%Y-%m-%dT%H:%M:%S)
{
  echo "JobID|JobIDRaw|JobName|User|Account|Partition|QOS|State|ExitCode|Submit|Start|End|Elapsed|Timelimit|NNodes|NCPUS|ReqCPUS|ReqMem|ReqTRES|AllocTRES|TotalCPU|UserCPU|SystemCPU|MaxRSS|AveRSS|MaxDiskRead|MaxDiskWrite|TRESUsageInMax|Comment"
  for t in 0 1; do
    echo "5200_$t|520$((t + 1))|sweep|alice|lab|debug|normal|COMPLETED|0:0|$start|$start|$now|00:00:10|00:10:00|1|1|1|1G|billing=1,cpu=1,mem=1G,node=1|billing=1,cpu=1,mem=1G,node=1|00:00.010|00:00.010|00:00:00||||||"
  done
} >"$WORK/sacct.psv"
run_rs --db "$WORK/serve.db" ingest sacct "$WORK/sacct.psv" --cluster demo
expect_eq "accounting of the array tasks ingested" "$RC" 0

set +e
BASE_URL="$URL" SCREENSHOT_DIR="$SHOTS" node "$TESTDIR/web/agent_jobs_test.mjs"
rc=$?
set -e
expect_eq "agent-seen jobs in Chromium (screenshots in $SHOTS)" "$rc" 0
[ "$rc" -eq 0 ] || echo "agent: $(tail -5 "$WORK/agent.err")"
finish
