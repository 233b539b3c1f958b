#!/usr/bin/env bash
# `rightsize submit` without a cluster: a fake sbatch records what it was given. The suggested
# changes as a diff, --dry-run, --apply (script lines, added lines, command-line options),
# --json, the prediction kept with the job id, a failing sbatch.
# Usage: submit_cli_test.sh RIGHTSIZE TESTDIR SRCDIR
set -euo pipefail
source "$2/cli/lib.sh" "$@"
cd "$WORK"
python3 "$TESTDIR/integration/slurm/make_history.py" rstest alice rs_work 60 310 1.9 20 >history.psv
run_rs ingest sacct history.psv
run_rs train
expect_eq "trained" "$RC" 0

cat >fake-sbatch <<SH
#!/bin/bash
# records its arguments and the script it was given; fails when FAKE_SBATCH_FAIL is set
printf '%s\n' "\$@" >"$WORK/sbatch.args"
for a in "\$@"; do [ -f "\$a" ] && cp "\$a" "$WORK/sbatch.script"; done
if [ -n "\${FAKE_SBATCH_FAIL:-}" ]; then echo "sbatch: error: invalid partition" >&2; exit 1; fi
echo "Submitted batch job 4242"
SH
chmod +x fake-sbatch
cat >job.sbatch <<'SH'
#!/bin/bash
#SBATCH --mem=2G   # plenty
#SBATCH -c 2
#SBATCH --time=60
python3 train.py
SH
cp job.sbatch original.sbatch

# The suggested memory is the model's (it moves with the time of day the history ends at).
run_rs submit --dry-run --json --user alice --risk 0.05 --sbatch ./fake-sbatch job.sbatch
mem_to=$(json_get "$OUT" '[c["to"] for c in d["changes"] if c["option"] == "--mem"][0]')
expect_eq "the --mem change is on line 2" \
  "$(json_get "$OUT" '[c["line"] for c in d["changes"] if c["option"] == "--mem"][0]')" 2
run_rs submit --dry-run --user alice --risk 0.05 --sbatch ./fake-sbatch job.sbatch
echo "$OUT"
expect_eq "dry run exit" "$RC" 0
expect_contains "the diff removes the old line" "$OUT" "-#SBATCH --mem=2G   # plenty"
expect_contains "and adds the new one, keeping the comment" "$OUT" "+#SBATCH --mem=$mem_to   # plenty"
expect_contains "the time line too" "$OUT" "+#SBATCH --time="
expect_contains "a hunk header" "$OUT" "@@ -1,5 +1,5 @@"
if [ -e sbatch.args ]; then fail "dry run ran sbatch"; else pass "dry run: sbatch not run"; fi

run_rs submit --user alice --risk 0.05 --sbatch ./fake-sbatch job.sbatch --partition=debug
expect_eq "submit without --apply exit" "$RC" 0
expect_contains "sbatch's answer shown" "$OUT" "Submitted batch job 4242"
expect_eq "without --apply: the script as it is" "$(tail -1 sbatch.args)" job.sbatch
expect_eq "sbatch options before the script" "$(head -1 sbatch.args)" --partition=debug

run_rs submit --apply --json --user alice --risk 0.05 --sbatch ./fake-sbatch job.sbatch -t 120
expect_eq "submit --apply exit" "$RC" 0
expect_eq "job id" "$(json_get "$OUT" 'd["job_id"]')" 4242
expect_eq "the time option on the command line is rewritten there" \
  "$(json_get "$OUT" '[c["where"] for c in d["changes"] if c["option"] == "--time"][0]')" "command line"
expect_eq "sbatch got the new time" "$(sed -n 2p sbatch.args)" \
  "$(json_get "$OUT" '[c["to"] for c in d["changes"] if c["option"] == "--time"][0]')"
# (-t 120 is another request, so its suggested memory may differ from the dry run's.)
applied_mem=$(json_get "$OUT" '[c["to"] for c in d["changes"] if c["option"] == "--mem"][0]')
expect_contains "sbatch got the new memory in the script" "$(cat sbatch.script)" "#SBATCH --mem=$applied_mem"
expect_contains "named after the script" "$(cat sbatch.args)" "--job-name=job.sbatch"
if cmp -s job.sbatch original.sbatch; then pass "the script file is not changed"; else fail "script changed"; fi
if [ -e "$(tail -1 sbatch.args)" ]; then fail "the temporary copy was left"; else pass "the temporary copy is removed"; fi
expect_eq "the prediction is kept with the job" \
  "$(sqlite3 "$RIGHTSIZE_DB" "select count(*) from predictions where job_id='4242'")" 1

# A script without a --mem line: one is added after the last directive.
printf '#!/bin/bash\n#SBATCH --time=60\n#SBATCH -J rs_work\nsleep 1\n' >nomem.sbatch
run_rs submit --dry-run --json --user alice --risk 0.05 --sbatch ./fake-sbatch nomem.sbatch --mem=2G
expect_eq "--mem from the command line is changed there" \
  "$(json_get "$OUT" '[c["where"] for c in d["changes"] if c["option"] == "--mem"][0]')" "command line"

FAKE_SBATCH_FAIL=1 run_rs submit --user alice --sbatch ./fake-sbatch job.sbatch
expect_eq "a failing sbatch exits 2" "$RC" 2
expect_contains "and says so" "$ERR" "exited with status 1"
run_rs submit --dry-run missing.sbatch
expect_eq "a missing script exits 2" "$RC" 2
finish
