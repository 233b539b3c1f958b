#!/usr/bin/env bash
# Issue 28: jobs the agent saw end before accounting did. `rightsize agent` watches three
# "SLURM jobs" started by hand (found by SLURM_JOB_ID, as under proctrack/linuxproc): one dies of
# MemoryError (exit 1) with 16 GiB asked for and its output in slurm-N.out, one exits 3, one
# completes. Their records say how they ended (state, exit code, `state_source: agent`), the
# failed one is diagnosed from its output file, and `rightsize job` does not advise the job that
# ran out of memory to ask for less.
# Usage: agent_outcome_cli_test.sh RIGHTSIZE TESTDIR SRCDIR
set -euo pipefail
source "$2/cli/lib.sh" "$@"

OOM=71$$1
FAIL=71$$2
OK=71$$3
cd "$WORK"
SLURM_JOB_ID=$OOM SLURM_JOB_NAME=memerr SLURM_MEM_PER_NODE=16384 python3 -c "
import time
x = bytearray(64 * 1024 * 1024)
for i in range(0, len(x), 4096):
    x[i] = 1
time.sleep(3)
print('loading the data set', flush=True)
y = bytearray(1 << 62)
" >"$WORK/slurm-$OOM.out" 2>&1 &
oom=$!
SLURM_JOB_ID=$FAIL sh -c 'sleep 3; exit 3' &
failed=$!
SLURM_JOB_ID=$OK python3 -c "import time; time.sleep(3)" &
ok=$!
"$RS" --db "$WORK/agent.db" agent --cluster testnode --interval 0.3 2>"$WORK/agent.err" &
agent=$!
trap 'kill "$agent" 2>/dev/null || true; cd /; rm -rf "$WORK"' EXIT
set +e
wait "$oom" "$failed" "$ok"
set -e
sleep 1.5
kill -TERM "$agent"
wait "$agent" || true

run_rs --db "$WORK/agent.db" job "$OOM" --json
expect_eq "job $OOM is in the store" "$RC" 0
expect_eq "its state, from the agent" "$(json_get "$OUT" "d['job']['outcome']['state']")" FAILED
expect_eq "its exit code" "$(json_get "$OUT" "d['job']['outcome']['exit_code']")" 1
expect_eq "who said so" "$(json_get "$OUT" "d['job']['outcome']['state_source']")" agent
expect_eq "diagnosed from its output" "$(json_get "$OUT" "(d['diagnosis'] or {}).get('class')")" \
  host_oom
expect_eq "the output file read" \
  "$(json_get "$OUT" "','.join(l['file'] for l in (d['diagnosis'] or {}).get('logs', []))")" \
  "$WORK/slurm-$OOM.out"
run_rs --db "$WORK/agent.db" job "$OOM"
expect_contains "the card says it failed" "$OUT" "state FAILED (exit 1)"
expect_contains "and weighs the 16G asked for" "$OUT" "Memory  16G"
# Any --mem it suggests is more than the 16G asked for, never less.
mem_flag=$(grep -o -- '--mem=[0-9]*G' <<<"$OUT" | head -1)
if [ -n "$mem_flag" ] && [ "${mem_flag//[^0-9]/}" -gt 16 ]; then
  pass "a larger --mem for a job that ran out of memory ($mem_flag)"
else
  fail "a job that ran out of memory is not told to ask for more than 16G: $OUT"
fi
expect_contains "it is told to ask for more" "$OUT" "ask for more"

run_rs --db "$WORK/agent.db" job "$FAIL" --json
expect_eq "exit 3: FAILED" "$(json_get "$OUT" "d['job']['outcome']['state']")" FAILED
expect_eq "exit 3: its code" "$(json_get "$OUT" "d['job']['outcome']['exit_code']")" 3
run_rs --db "$WORK/agent.db" job "$OK" --json
expect_eq "exit 0: COMPLETED" "$(json_get "$OUT" "d['job']['outcome']['state']")" COMPLETED
expect_eq "exit 0: agent" "$(json_get "$OUT" "d['job']['outcome']['state_source']")" agent
expect_contains "the agent said it diagnosed the failure" "$(cat "$WORK/agent.err")" "$OOM FAILED"
finish
