#!/usr/bin/env bash
# The dashboard in a real browser (Debian's Chromium, headless, driven by playwright-core)
# against a real `rightsize serve`, fed by a real `rightsize agent` watching a real process
# (hot_loop, found as SLURM job 4711 by its environment) with stack sampling on. The checks are
# in dashboard_test.mjs; the screenshots land in SHOTS.
# Usage: dashboard_test.sh RIGHTSIZE TESTDIR SRCDIR HOT_LOOP WEB_BUILD SHOTS
set -euo pipefail
source "$2/cli/lib.sh" "$@"
HOT_LOOP=$4
export RIGHTSIZE_WEB_BUILD=$5
SHOTS=$6
mkdir -p "$SHOTS"

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

# Long enough for the whole browser session; killed at the end.
SLURM_JOB_ID=4711 SLURM_JOB_USER=alice SLURM_JOB_NAME=spin SLURM_CPUS_ON_NODE=2 \
  SLURM_MEM_PER_NODE=2048 "$HOT_LOOP" 300 >/dev/null &
job=$!
"$RS" agent --server "http://127.0.0.1:$port" --cluster webtest --interval 0.5 --ship-interval 1 \
  --stacks --spool "$WORK/spool" 2>"$WORK/agent.err" &
agent=$!
# The flame graph needs the sampled stacks to have reached the server.
for _ in $(seq 1 40); do
  if curl -s "http://127.0.0.1:$port/api/v1/jobs/webtest/4711/stacks" | grep -q rightsize_test_hot_loop; then
    break
  fi
  sleep 0.5
done

set +e
BASE_URL="http://127.0.0.1:$port" JOB_CLUSTER=webtest JOB_ID=4711 HOT_FUNCTION=rightsize_test_hot_loop \
  SCREENSHOT_DIR="$SHOTS" node "$TESTDIR/web/dashboard_test.mjs"
rc=$?
set -e
expect_eq "the dashboard checks in Chromium (screenshots in $SHOTS)" "$rc" 0
[ "$rc" -eq 0 ] || echo "agent: $(tail -5 "$WORK/agent.err")"
finish
