#!/usr/bin/env bash
# `rightsize simulate` end to end on the predictsim SDSC-SP2 excerpt (test/data/sim): the EASY
# validation a user runs, the JSON document, the what-if with `eval --jobs`-shaped predictions,
# and the errors for bad input.
# Usage: simulate_cli_test.sh RIGHTSIZE TESTDIR SRCDIR
set -euo pipefail
source "$2/cli/lib.sh" "$@"
TRACE=$TESTDIR/data/sim/SDSC-SP2.easy-sim.first3000.swf.gz

run_rs simulate "$TRACE" --validate
expect_eq "simulate exits 0" "$RC" 0
expect_contains "machine from the header" "$OUT" "3000 jobs on 128 processors (MaxProcs), policy easy"
expect_contains "reproduces the EASY simulation" "$OUT" "validation: 3000 of 3000 jobs (100.00%)"
expect_contains "a users' row" "$OUT" "users"

run_rs simulate "$TRACE" --validate --json
expect_eq "schema" "$(json_get "$OUT" 'd["schema"]')" "rightsize.simulate/v1"
expect_eq "share >= 0.99" "$(json_get "$OUT" 'd["validation"]["share"] >= 0.99')" True
expect_eq "machine" "$(json_get "$OUT" 'd["machine"]["size"], d["machine"]["from"]')" "128 MaxProcs"
EASY_WAIT=$(json_get "$OUT" 'd["scenarios"][0]["metrics"]["mean_wait_s"]')

run_rs ingest swf "$TRACE"
expect_eq "ingest exits 0" "$RC" 0
run_rs simulate --store --validate
expect_eq "simulate --store exits 0" "$RC" 0
expect_contains "the store's jobs on its total CPUs" "$OUT" "store: 3000 jobs on 128 processors (store)"
expect_contains "the store's jobs reproduce it too" "$OUT" "validation: 3000 of 3000 jobs (100.00%)"

run_rs simulate "$TRACE" --policy fcfs --json
expect_eq "fcfs exits 0" "$RC" 0
expect_eq "FCFS waits longer than EASY" \
  "$(json_get "$OUT" "d['scenarios'][0]['metrics']['mean_wait_s'] > $EASY_WAIT")" True

# Predictions shaped as `eval --jobs` writes them, for the first 100 jobs: rightsize suggests
# the run time itself (no job is killed), last2 half of it (every one is).
python3 - "$TRACE" "$WORK/jobs.jsonl" <<'PY'
import gzip, json, sys
rows = [l.split() for l in gzip.open(sys.argv[1], "rt") if not l.startswith(";")]
with open(sys.argv[2], "w") as out:
    for f in rows[:100]:
        run = int(f[3])
        out.write(json.dumps({"target": "runtime", "job_id": f[0], "actual": run,
                              "suggested": [{"risk": 0.01, "request": run}],
                              "baselines": {"last2": max(1, run // 2 - 1)}}) + "\n")
PY
run_rs simulate "$TRACE" --predictions "$WORK/jobs.jsonl" --json
expect_eq "what-if exits 0" "$RC" 0
expect_eq "scenarios" "$(json_get "$OUT" '[s["requests"] for s in d["scenarios"]]')" \
  "['users', 'rightsize@0.01', 'last2']"
expect_eq "rightsize: 100 new limits, none killed" \
  "$(json_get "$OUT" 'd["scenarios"][1]["jobs_with_new_limit"], d["scenarios"][1]["metrics"]["killed"]')" "100 0"
expect_eq "last2: all 100 killed, time lost" \
  "$(json_get "$OUT" 'd["scenarios"][2]["metrics"]["killed"], d["scenarios"][2]["metrics"]["lost_proc_hours"] > 0')" "100 True"
expect_eq "last2 lowered all 100 limits" "$(json_get "$OUT" 'd["scenarios"][2]["limits_lowered"]')" 100
run_rs simulate "$TRACE" --predictions "$WORK/jobs.jsonl"
expect_contains "text table names the scenario" "$OUT" "rightsize@0.01"

# EASY++ planned on rightsize's own run-time quantile: the users' and rightsize's limits again,
# each scored job backfilled on its p10 (a tenth of its run, so every one is under-predicted
# and corrected to its limit).
python3 - "$WORK/jobs.jsonl" "$WORK/plan.jsonl" <<'PY'
import json, sys
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        j = json.loads(line)
        j.update(point=j["actual"], p10=max(1, j["actual"] // 10), p90=j["actual"] * 2)
        out.write(json.dumps(j) + "\n")
PY
run_rs simulate "$TRACE" --policy easy++ --predictions "$WORK/plan.jsonl" --plan p10 --json
expect_eq "plan exits 0" "$RC" 0
expect_eq "plan rows" "$(json_get "$OUT" '[(s["requests"], s["plan"]) for s in d["scenarios"]]')" \
  "[('users', 'last2'), ('rightsize@0.01', 'last2'), ('last2', 'last2'), ('users', 'p10'), ('rightsize@0.01', 'p10')]"
expect_eq "100 jobs planned on p10, none killed" \
  "$(json_get "$OUT" 'd["scenarios"][4]["jobs_planned"], d["scenarios"][4]["metrics"]["killed"]')" "100 0"
expect_eq "the plan moves the queue" \
  "$(json_get "$OUT" 'd["scenarios"][3]["metrics"]["mean_wait_s"] != d["scenarios"][0]["metrics"]["mean_wait_s"]')" True
run_rs simulate "$TRACE" --policy easy++ --predictions "$WORK/plan.jsonl" --plan p10 --head-guard --json
expect_eq "head guard exits 0 and says so" "$RC $(json_get "$OUT" 'd["head_guard"]')" "0 True"
run_rs simulate "$TRACE" --head-guard
expect_eq "a head guard without easy++: usage error" "$RC" 1
expect_contains "says it needs easy++" "$ERR" "give --policy easy++"
run_rs simulate "$TRACE" --policy easy++ --predictions "$WORK/plan.jsonl" --plan point --correct p90
expect_contains "text names the plan and its corrections" "$OUT" "point>p90"
run_rs simulate "$TRACE" --predictions "$WORK/plan.jsonl" --plan p10
expect_eq "a plan without easy++: usage error" "$RC" 1
expect_contains "says what it needs" "$ERR" "needs --policy easy++ and --predictions"
run_rs simulate "$TRACE" --policy easy++ --predictions "$WORK/plan.jsonl" --plan p50
expect_eq "an unknown quantile: usage error" "$RC" 1
expect_contains "lists the quantiles" "$ERR" "p2_5, p10, point, p90, p97_5"

run_rs simulate "$TRACE" --predictions "$WORK/jobs.jsonl" --risk 0.05
expect_eq "a risk the file lacks: usage error" "$RC" 1
expect_contains "names the risks it holds" "$ERR" "the predictions hold suggested requests at 0.01 only"

run_rs simulate "$TRACE" --processors 16
expect_contains "jobs larger than --processors counted" "$OUT" "larger than the machine left out"

printf '{"target":"runtime","job_id":"no-such-job","baselines":{"last2":5}}\n' >"$WORK/other.jsonl"
run_rs simulate "$TRACE" --predictions "$WORK/other.jsonl"
expect_eq "predictions of another trace exit 2" "$RC" 2
expect_contains "says none matches" "$ERR" "none of its 1 jobs is a job of"

SACCT=$TESTDIR/data/sacct/sites/ub-ccr-phillips_slurm-2016-12-2017-01.psv.gz
run_rs simulate "$SACCT"
expect_eq "sacct without a machine size: usage error" "$RC" 1
expect_contains "asks for it" "$ERR" "give --processors N"
run_rs simulate "$SACCT" --processors 512 --nodes --json
expect_eq "sacct in nodes exits 0" "$RC" 0
expect_eq "sacct jobs and unit" "$(json_get "$OUT" 'd["jobs"], d["machine"]["unit"]')" "4024 nodes"
expect_contains "says what it left out" "$OUT" "261 jobs without a run time of at least 1 s left out"

run_rs simulate "$WORK/missing.swf"
expect_eq "missing file exits 2" "$RC" 2
expect_contains "names the file" "$ERR" "missing.swf"

printf 'not a trace\n' >"$WORK/bad.swf"
run_rs simulate "$WORK/bad.swf"
expect_eq "garbage exits 2" "$RC" 2
expect_contains "says why" "$ERR" "no job records"

run_rs simulate "$TRACE" --policy sjf
expect_eq "unknown policy exits 1" "$RC" 1
expect_contains "lists the policies" "$ERR" "expected fcfs, easy or easy++"

run_rs simulate
expect_eq "no input exits 1" "$RC" 1
expect_contains "asks for a trace" "$ERR" "give a TRACE file or --store"

finish
