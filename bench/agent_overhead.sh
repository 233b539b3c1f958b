#!/usr/bin/env bash
# The agent's own cost: 20 jobs of 20 processes each (400 processes, found by SLURM_JOB_ID as
# under proctrack/linuxproc), `rightsize agent --interval 1` for DURATION seconds; reports the
# agent's CPU time per wall second and its max RSS. Usage: bench/agent_overhead.sh RIGHTSIZE [DURATION]
set -euo pipefail
RS=$1
DURATION=${2:-60}
WORK=$(mktemp -d /tmp/rightsize-agent-bench.XXXXXX)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
for job in $(seq 1 20); do
  for _ in $(seq 1 20); do
    SLURM_JOB_ID=$((900000 + job)) sleep $((DURATION + 30)) &
    pids+=($!)
  done
done
sleep 1
/usr/bin/time -f "%U %S %e %M" -o "$WORK/time" "$RS" --db "$WORK/a.db" agent --interval 1 \
  --listen 127.0.0.1:0 2>"$WORK/err" &
agent=$!
sleep "$DURATION"
port=$(grep -o '/metrics on 127.0.0.1:[0-9]*' "$WORK/err" | cut -d: -f2)
jobs=$(python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$port/metrics').read().decode())" | awk '/^rightsize_agent_jobs /{print $2}')
pkill -TERM -P $agent 2>/dev/null || kill -TERM $agent
wait $agent 2>/dev/null || true
read -r user sys wall rss <"$WORK/time"
python3 - "$user" "$sys" "$wall" "$rss" "$jobs" <<'PY'
import sys
user, sys_, wall, rss, jobs = map(float, sys.argv[1:])
print(f"agent: {int(jobs)} jobs, 400 processes, {wall:.0f} s: CPU {user + sys_:.2f} s "
      f"= {100 * (user + sys_) / wall:.2f}% of one core, max RSS {rss / 1024:.1f} MiB")
PY
