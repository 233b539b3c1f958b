#!/bin/bash
# `rightsize ingest slurm --follow` and `rightsize diagnose JOBID` on one SLURM job's evidence,
# with small shell scripts standing in for sacct, scontrol and sinfo (they print real SLURM
# 22.05 output: test/data/sacct/slurm22/), as test/slurm/follower_test.cc does. Issue 28: the
# follower's --json output was not JSON Lines; `diagnose JOBID` did not look for the job's
# output file where the follower does and replaced the follower's diagnosis with a weaker one.
set -euo pipefail
source "$(dirname "$0")/lib.sh" "$1" "$2" "$3"

B=$WORK/bin
mkdir -p "$B" "$WORK/jobout" "$WORK/logs" "$WORK/work"
DATA=$TESTDIR/data/sacct/slurm22
{ cat "$DATA/mixed.psv"; tail -n +2 "$DATA/oom-cgroup-v1.psv"; } >"$WORK/sacct.psv"
# The follower's columns: job 11 carries the job_submit.lua hook's record with out=; job 4 has
# no record (its log is in the log folder).
cat >"$WORK/finished.txt" <<TXT
11|11|OUT_OF_MEMORY|rs_v1_oom|root|$WORK/work|rightsize:v1 mode=advise mem_mb=150,256,100 cpus=1,1,1 time_min=1,2,5 changed=mem out=$WORK/jobout/job-%j.log
4|4|FAILED|rs_overmem|root|/nonexistent|
TXT
cat >"$B/sacct" <<SH
#!/bin/sh
case "\$*" in
  *AdminComment*) cat "$WORK/finished.txt" ;;
  *) cat "$WORK/sacct.psv" ;;
esac
SH
cat >"$B/scontrol" <<'SH'
#!/bin/sh
case "$1 $2" in
  'show config') echo 'ClusterName             = rstest' ;;
  *) exit 1 ;;
esac
SH
printf '#!/bin/sh\necho "debug*|1|2|23000|(null)"\n' >"$B/sinfo"
chmod +x "$B/sacct" "$B/scontrol" "$B/sinfo"
echo "slurmstepd: error: Detected 1 oom_kill event in StepId=11.batch. Some of the step tasks have been OOM Killed." >"$WORK/jobout/job-11.log"
echo "slurmstepd: error: Job 4 exceeded memory limit (110000 > 102400), being killed" >"$WORK/logs/slurm-4.out"
export PATH="$B:$PATH"  # `diagnose` runs sacct and scontrol by their names

# 1. --json following is JSON Lines: every line of stdout is one JSON object.
run_rs ingest slurm --follow --passes 1 --no-diagnose --json
expect_eq "follow --no-diagnose exits 0" "$RC" 0
LINES=$(python3 -c '
import json, sys
n = 0
for line in sys.stdin:
    assert line.strip(), "an empty line"
    assert isinstance(json.loads(line), dict)
    n += 1
print(n)' <<<"$OUT" 2>&1 || true)
expect_eq "the follower's --json output is one JSON object per line" "$LINES" 1

# 2. `diagnose JOBID` finds the output file as the follower does: sacct's row of the job, the
#    hook's out= (here), scontrol, the log folder.
run_rs diagnose 11 --json
expect_eq "diagnose 11 exits 0" "$RC" 0
expect_eq "diagnose 11 read the file named by the hook's out=" \
  "$(json_get "$OUT" "','.join(l['file'] for l in d['logs'])")" "$WORK/jobout/job-11.log"
expect_eq "diagnose 11: host_oom" "$(json_get "$OUT" "d['class']")" host_oom

# 3. The follower diagnoses job 4 from the log folder; each diagnosis is one JSON line.
run_rs ingest slurm --follow --passes 1 --json --log-dir "$WORK/logs"
expect_eq "follow exits 0" "$RC" 0
expect_eq "every line is JSON" \
  "$(python3 -c 'import json,sys; [json.loads(l) for l in sys.stdin]; print("ok")' <<<"$OUT" 2>&1)" ok
DIAG4=$(grep '"diagnosed":"4"' <<<"$OUT" || true)
expect_contains "the follower diagnosed job 4" "$DIAG4" '"diagnosed":"4"'
CLASS4=$(json_get "$DIAG4" "d['class']")
CONF4=$(json_get "$DIAG4" "d['confidence']")

# 4. `diagnose 4` again: the log the follower read is found again (its stored diagnosis names
#    it), so the class is the follower's.
run_rs diagnose 4 --json
expect_eq "diagnose 4 reads the follower's log" \
  "$(json_get "$OUT" "','.join(l['file'] for l in d['logs'])")" "$WORK/logs/slurm-4.out"
expect_eq "diagnose 4 agrees with the follower" "$(json_get "$OUT" "d['class']")" "$CLASS4"

# 5. The log is gone: this run knows less, and the stored diagnosis is kept (and shown).
rm "$WORK/logs/slurm-4.out"
run_rs diagnose 4 --json
expect_eq "diagnose 4 without its log exits 0" "$RC" 0
expect_eq "the stronger stored diagnosis is shown" "$(json_get "$OUT" "d['class']")" "$CLASS4"
expect_contains "and the weaker one is named" "$ERR" "is kept"
STORED=$(python3 - "$RIGHTSIZE_DB" <<'PY'
import sqlite3, sys
row = sqlite3.connect(sys.argv[1]).execute(
    "SELECT class, confidence FROM diagnoses WHERE job_id = '4'").fetchone()
print(f"{row[0]} {row[1]}")
PY
)
expect_eq "the store still holds the follower's diagnosis" "$STORED" "$CLASS4 $CONF4"

finish
