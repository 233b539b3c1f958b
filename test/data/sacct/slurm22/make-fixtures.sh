#!/usr/bin/env bash
# make-fixtures.sh - regenerate the real SLURM 22.05 sacct fixtures in this folder.
# Needs a running test cluster (test/integration/slurm/cluster.sh up, default mode) whose
# accounting DB holds no other jobs from the last hour. Takes about 2-3 minutes (the
# TIMEOUT job). Writes mixed.psv and mixed-noheader-semicolon.txt next to this script.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${RS_FIXTURE_JOBOUT:-/tmp/rs-fixture-jobs}
mkdir -p "$OUT"
PY=/usr/bin/python3
FMT=JobID,JobIDRaw,JobName,User,Account,Partition,QOS,State,ExitCode,Submit,Start,End,Elapsed,Timelimit,NNodes,NCPUS,ReqCPUS,ReqMem,ReqTRES,AllocTRES,TotalCPU,UserCPU,SystemCPU,MaxRSS,AveRSS,MaxDiskRead,MaxDiskWrite,TRESUsageInMax,Comment
sub() { sbatch --parsable -o "$OUT/%x-%j.out" "$@"; }

# 1 CPU, sleeps past its 1 min limit -> TIMEOUT (ends at limit + 15..30 s); start it first
timeout_job=$(sub -J rs_timeout -t 00:01:00 --mem=50M --wrap 'sleep 300')
# touches 200 MiB (b"x"*N writes every page; bytearray(N) alone would stay untouched/zero pages)
mem_job=$(sub -J rs_mem200 -t 00:05:00 --mem=500M \
  --wrap "$PY -c 'import time; x=b\"x\"*(200*1024*1024); time.sleep(3)'")
# exits 3 -> FAILED 3:0
fail_job=$(sub -J rs_fail -t 00:05:00 --mem=50M --wrap 'echo about to fail; sleep 1; exit 3')
# touches 400 MiB with --mem=100M -> killed by the 1 s OverMemoryKill poll
overmem_job=$(sub -J rs_overmem -t 00:05:00 --mem=100M \
  --wrap "$PY -c 'import time; x=b\"x\"*(400*1024*1024); time.sleep(10)'")
# 3-task array ($SLURM_ARRAY_TASK_ID expands inside the job)
# shellcheck disable=SC2016
array_job=$(sub -J rs_array -t 00:05:00 --mem=50M --array=1-3 -o "$OUT/%x-%A_%a.out" \
  --wrap 'echo task $SLURM_ARRAY_TASK_ID; sleep 2')
# batch script with one srun step (.0) that touches 50 MiB; steps .batch .extern .0
steps_job=$(sub -J rs_steps -t 00:05:00 --mem=200M \
  --wrap "srun $PY -c 'import time; x=b\"x\"*(50*1024*1024); time.sleep(3)'; echo after srun")
# 2 CPUs burning for ~4 s
cpu_job=$(sub -J rs_cpu2 -c 2 -t 00:05:00 --mem=100M \
  --wrap 'for i in 1 2; do timeout 4 sh -c "while :; do :; done" & done; wait')
# cancelled while running
cancel_job=$(sub -J rs_cancel -t 00:05:00 --mem=50M --wrap 'sleep 120')
echo "submitted: timeout=$timeout_job mem200=$mem_job fail=$fail_job overmem=$overmem_job" \
  "array=$array_job steps=$steps_job cpu2=$cpu_job cancel=$cancel_job"

until [ "$(squeue -h -j "$cancel_job" -o %T)" = RUNNING ]; do sleep 1; done
sleep 3; scancel "$cancel_job"; echo "cancelled $cancel_job while RUNNING"

while [ -n "$(squeue -h -o %i)" ]; do sleep 2; done
sleep 3   # let slurmctld hand the last records to slurmdbd
echo "all jobs done at $(date -Is)"

sacct -P -a --starttime=now-1hour --format="$FMT" >"$HERE/mixed.psv"
sacct -P -a --starttime=now-1hour --format="$FMT" --noheader --delimiter=';' \
  >"$HERE/mixed-noheader-semicolon.txt"
wc -l "$HERE/mixed.psv" "$HERE/mixed-noheader-semicolon.txt"
