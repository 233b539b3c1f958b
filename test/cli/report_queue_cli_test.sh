#!/usr/bin/env bash
# `rightsize report`'s "What the queue would have done" on the predictsim SDSC-SP2 excerpt
# (test/data/sim): the section in text, JSON and HTML (with its chart), its users' run equal to
# `rightsize simulate --store`'s, and what it says when the cluster's size is unknown.
# Usage: report_queue_cli_test.sh RIGHTSIZE TESTDIR SRCDIR
set -euo pipefail
source "$2/cli/lib.sh" "$@"
TRACE=$TESTDIR/data/sim/SDSC-SP2.easy-sim.first3000.swf.gz

run_rs ingest swf "$TRACE"
expect_eq "ingest exits 0" "$RC" 0
run_rs report
expect_eq "report exits 0" "$RC" 0
expect_contains "the section" "$OUT" "What the queue would have done"
expect_contains "the jobs and the machine" "$OUT" "3000 jobs replayed through EASY backfilling on 128 CPUs"

run_rs report --json
Q='d["queue"]'
expect_eq "simulated" "$(json_get "$OUT" "$Q['simulated'], $Q['machine_cpus'], $Q['jobs']")" "True 128 3000"
expect_eq "some limits right-sized" "$(json_get "$OUT" "$Q['right_sized'] > 0")" True
BEFORE=$(json_get "$OUT" "round($Q['before']['mean_wait_s'], 3)")
AFTER=$(json_get "$OUT" "round($Q['after']['avebsld'], 3), $Q['after']['killed']")
run_rs simulate --store --json
expect_eq "before = simulate's users' run" \
  "$(json_get "$OUT" 'round(d["scenarios"][0]["metrics"]["mean_wait_s"], 3)')" "$BEFORE"

run_rs report --format html
expect_contains "html heading" "$OUT" "<h2>What the queue would have done</h2>"
expect_contains "html chart" "$OUT" '<svg class="queue"'
expect_contains "chart's before bar" "$OUT" "<title>mean wait users' limits"
expect_contains "the rule" "$OUT" "Right-sized time limit: at submission, 1.2x the longest run"
echo "after (AVEbsld, killed): $AFTER"

# A cluster whose size the store does not know: said, not guessed.
export RIGHTSIZE_DB=$WORK/sacct.db
SACCT=$TESTDIR/data/sacct/sites/ub-ccr-phillips_slurm-2016-12-2017-01.psv.gz
run_rs ingest sacct "$SACCT"
run_rs report
expect_eq "report exits 0" "$RC" 0
expect_contains "says why" "$OUT" "Not simulated: the cluster's CPU count is not known"
finish
