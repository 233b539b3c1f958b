#!/usr/bin/env bash
# The job page in a real browser (Debian's Chromium, headless, driven by playwright-core): the
# advice and cost of the job card, what ended a job (a TIMEOUT is not "exit 0", a FAILED job
# shows its exit code, an OOM kill asks for more memory first), and the charts of a job a real
# `rightsize agent` watches (hot_loop, SLURM job 4712): legends that show values without a
# hover, y axes whose ticks never read the same twice; the phases of a watched job whose memory
# grew half-way (job 4714). Jobs with a failure come from real
# SLURM 22.05 sacct output (test/data/sacct/slurm22) and one excerpt written here. The checks
# are in job_page_test.mjs; the screenshots land in SHOTS.
# Usage: job_page_test.sh RIGHTSIZE TESTDIR SRCDIR HOT_LOOP WEB_BUILD SHOTS
set -euo pipefail
source "$2/cli/lib.sh" "$@"
HOT_LOOP=$4
export RIGHTSIZE_WEB_BUILD=$5
SHOTS=$6
mkdir -p "$SHOTS"

# Accounting: SLURM's own TIMEOUT (exit 0:0), FAILED (exit 3) and OUT_OF_MEMORY jobs, a job
# that kept 0.5 of its 4 CPUs busy and peaked at 600M of its 16G (so: -c 1, --mem=768M), and
# one that held an A100 for 12 hours at 0% utilisation.
FIXTURES="$SRCDIR/test/data/sacct/slurm22"
cat >"$WORK/oversized.psv" <<'PSV'
JobID|JobIDRaw|JobName|User|Account|Partition|QOS|State|ExitCode|Submit|Start|End|Elapsed|Timelimit|NNodes|NCPUS|ReqCPUS|ReqMem|ReqTRES|AllocTRES|TotalCPU|UserCPU|SystemCPU|MaxRSS|AveRSS|MaxDiskRead|MaxDiskWrite|TRESUsageInMax|Comment
900|900|oversized|alice|testacct|debug|normal|COMPLETED|0:0|2026-12-02T10:00:00|2026-12-02T10:00:00|2026-12-02T11:00:00|01:00:00|04:00:00|1|4|4|16G|billing=4,cpu=4,mem=16G,node=1|billing=4,cpu=4,mem=16G,node=1|00:30:00|00:30:00|00:00:00||||||
900.batch|900.batch|batch||testacct|||COMPLETED|0:0|2026-12-02T10:00:00|2026-12-02T10:00:00|2026-12-02T11:00:00|01:00:00||1|4|4|||cpu=4,mem=16G,node=1|00:30:00|00:30:00|00:00:00|600M|500M|0.01M|0.00M||
901|901|notebook|carol|testacct|gpu|normal|COMPLETED|0:0|2026-12-02T10:00:00|2026-12-02T10:00:00|2026-12-02T22:00:00|12:00:00|1-00:00:00|1|4|4|32G|billing=4,cpu=4,gres/gpu=1,mem=32G,node=1|billing=4,cpu=4,gres/gpu:a100=1,gres/gpu=1,mem=32G,node=1|02:00:00|02:00:00|00:00:00||||||
901.batch|901.batch|batch||testacct|||COMPLETED|0:0|2026-12-02T10:00:00|2026-12-02T10:00:00|2026-12-02T22:00:00|12:00:00||1|4|4|||cpu=4,gres/gpu=1,mem=32G,node=1|02:00:00|02:00:00|00:00:00|3G|2G|0.01M|0.00M|cpu=02:00:00,gres/gpumem=500M,gres/gpuutil=0,mem=3G|
PSV
for f in "$FIXTURES/mixed.psv" "$FIXTURES/oom-cgroup-v1.psv" "$WORK/oversized.psv"; do
  run_rs --db "$WORK/serve.db" ingest sacct --cluster rstest "$f"
  expect_eq "ingest $(basename "$f")" "$RC" 0
done

"$RS" --db "$WORK/serve.db" serve --listen 127.0.0.1:0 >"$WORK/serve.out" 2>"$WORK/serve.err" &
server=$!
agent=""
job=""
cleanup() {
  for p in $job $agent $server; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
port=$(listening_port "$WORK/serve.out")
[ -n "$port" ] || { fail "server did not start: $(cat "$WORK/serve.err")"; finish; }

SLURM_JOB_ID=4712 SLURM_JOB_USER=alice SLURM_JOB_NAME=spin SLURM_CPUS_ON_NODE=2 \
  SLURM_MEM_PER_NODE=2048 "$HOT_LOOP" 300 >/dev/null &
job=$!
# Job 4714 changes along the way: 20 s small, then 20 s holding 300 MiB more; once it has ended
# its page shows two phases.
SLURM_JOB_ID=4714 SLURM_JOB_USER=alice SLURM_JOB_NAME=twophase SLURM_CPUS_ON_NODE=2 \
  SLURM_MEM_PER_NODE=2048 python3 -c 'import time
time.sleep(20)
held = b"x" * (300 << 20)
time.sleep(20)' &
job="$job $!"
"$RS" agent --server "http://127.0.0.1:$port" --cluster webtest --interval 0.5 --ship-interval 1 \
  --spool "$WORK/spool" 2>"$WORK/agent.err" &
agent=$!

set +e
BASE_URL="http://127.0.0.1:$port" LIVE_CLUSTER=webtest LIVE_JOB=4712 PHASES_JOB=4714 SACCT_CLUSTER=rstest \
  SCREENSHOT_DIR="$SHOTS" node "$TESTDIR/web/job_page_test.mjs"
rc=$?
set -e
expect_eq "the job page checks in Chromium (screenshots in $SHOTS)" "$rc" 0
[ "$rc" -eq 0 ] || echo "agent: $(tail -5 "$WORK/agent.err")"
finish
