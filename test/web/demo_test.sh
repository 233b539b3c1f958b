#!/usr/bin/env bash
# The demo's pages in a real browser (issue 28): the store `make demo` builds
# (scripts/demo-store.sh, the same script), served by a real `rightsize serve`, with one of the
# demo's live jobs (scripts/demo_workload.py, found as SLURM job 1001 by its environment) watched
# by a real `rightsize agent` with stack sampling. The checks are in demo_test.mjs; the
# screenshots land in SHOTS.
# Usage: demo_test.sh RIGHTSIZE TESTDIR SRCDIR WEB_BUILD SHOTS
set -euo pipefail
source "$2/cli/lib.sh" "$@"
export RIGHTSIZE_WEB_BUILD=$4
SHOTS=$5
mkdir -p "$SHOTS"

if ! bash "$SRCDIR/scripts/demo-store.sh" "$RS" "$WORK/demo.db" >"$WORK/store.out" 2>&1; then
  fail "scripts/demo-store.sh: $(tail -5 "$WORK/store.out")"
  finish
fi
pass "scripts/demo-store.sh built the demo store"

"$RS" --db "$WORK/demo.db" serve --listen 127.0.0.1:0 >"$WORK/serve.out" 2>"$WORK/serve.err" &
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

# Long enough for the whole browser session; killed at the end.
SLURM_JOB_ID=1001 SLURM_JOB_USER=alice SLURM_JOB_NAME=train-model SLURM_CPUS_ON_NODE=4 \
  SLURM_MEM_PER_NODE=8192 python3 "$SRCDIR/scripts/demo_workload.py" crunch 300 &
job=$!
"$RS" agent --server "http://127.0.0.1:$port" --cluster demo --interval 0.5 --ship-interval 1 \
  --stacks --spool "$WORK/spool" 2>"$WORK/agent.err" &
agent=$!
# Until the live job has stacks: -f, so that the 404 of a job not yet seen (a JSON error, letters
# too) does not end the wait.
for _ in $(seq 1 60); do
  if curl -sf "http://127.0.0.1:$port/api/v1/jobs/demo/1001/stacks" | grep -q '[a-z]'; then
    break
  fi
  sleep 0.5
done

set +e
BASE_URL="http://127.0.0.1:$port" LIVE_CLUSTER=demo LIVE_JOB=1001 SCREENSHOT_DIR="$SHOTS" \
  node "$TESTDIR/web/demo_test.mjs"
rc=$?
set -e
expect_eq "the demo store's pages in Chromium (screenshots in $SHOTS)" "$rc" 0
[ "$rc" -eq 0 ] || echo "agent: $(tail -5 "$WORK/agent.err")"
finish
