#!/usr/bin/env bash
# Jobs that fail on a real SLURM 22.05 cluster in cgroup v1 mode (proctrack/cgroup, task/cgroup:
# the kernel OOM-kills a job over its --mem), watched end to end:
#   - `rightsize agent --server` finds the jobs by their cgroup v1 paths and measures a job with
#     a known peak memory and CPU use, and an array of them;
#   - the server follows sacct in-process (`serve --follow-slurm`, the same code as `rightsize
#     ingest slurm --follow`) while the jobs end: it stores each job once and
#     diagnoses each failure (OOM kill, time limit, segfault, node failure) from the job's output
#     file, which the job_submit.lua record names; the diagnosis is what `rightsize diagnose`,
#     `rightsize job` and the dashboard's API show, with a concrete fix.
# Usage: failures_slurm_test.sh RIGHTSIZE TESTDIR SRCDIR   (as root; installs SLURM if missing)
set -euo pipefail
source "$2/cli/lib.sh" "$@"
source "$TESTDIR/integration/slurm/lib_e2e.sh"
CLUSTER_SH=$TESTDIR/integration/slurm/cluster.sh
SERVER="" AGENT=""
cleanup() {
  for p in $AGENT $SERVER; do stop_pid "$p"; done
  rm -f /etc/slurm/rightsize.conf
  scontrol update nodename="$(hostname -s)" state=resume 2>/dev/null || true
  # our jobs must not outlive the cluster: slurmctld would recover them at the next start
  scancel -n rs_work,rs_tl,rs_oom,rs_segv,rs_arr,rs_nf 2>/dev/null || true
  for _ in $(seq 1 40); do [ -z "$(squeue -h -n rs_work,rs_tl,rs_oom,rs_segv,rs_arr,rs_nf 2>/dev/null)" ] && break; sleep 0.5; done
  bash "$CLUSTER_SH" down >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
hook_conf "mode = off"
SLURM_CGROUP=v1 RS_JOB_SUBMIT_LUA=$SRCDIR/deploy/slurm/job_submit.lua bash "$CLUSTER_SH" up
cd "$WORK"
# The server diagnoses the jobs as they end, following sacct in-process.
start_server --follow-slurm --follow-since 10m --follow-interval 3
start_agent
hook_conf "server = $URL" "budget_ms = 200" "mode = advise"

# The job of known use first, alone on the node (2 CPUs), then the failures and an array.
write_work_script work.sbatch 10
work=$(sbatch --parsable -J rs_work -o "$WORK/slurm-%j.out" work.sbatch)
wait_jobs 60 "$work"
cat >tl.sbatch <<'SH'
#!/bin/bash
#SBATCH --time=1
#SBATCH --mem=100M
echo "starting"
for i in $(seq 1 600); do echo "step $i/600"; sleep 1; done
SH
tl=$(sbatch --parsable -J rs_tl -o "$WORK/slurm-%j.out" tl.sbatch)
cat >oom.sbatch <<'SH'
#!/bin/bash
#SBATCH --mem=100M
#SBATCH --time=5
/usr/bin/python3 -c 'import time; x = b"\1" * (400 * 1024 * 1024); time.sleep(20)'
SH
oom=$(sbatch --parsable -J rs_oom -o "$WORK/slurm-%j.out" oom.sbatch)
cat >segv.sbatch <<'SH'
#!/bin/bash
#SBATCH --mem=200M
#SBATCH --time=5
echo "reading the input"
/usr/bin/python3 -c 'import ctypes; ctypes.string_at(0)'
SH
segv=$(sbatch --parsable -J rs_segv -o "$WORK/slurm-%j.out" segv.sbatch)
arr=$(sbatch --parsable -J rs_arr --array=1-2 --mem=200M -t 5 -o "$WORK/slurm-%A_%a.out" \
  --wrap "/usr/bin/python3 -c 'import time; x = b\"\\1\" * (100 * 1024 * 1024); time.sleep(3)'")

# --- the agent on cgroup v1: the work job against its own measurements
for _ in $(seq 1 40); do
  api "/api/v1/jobs/rstest/$work"
  [ -n "$BODY" ] && [ "$(json_get "$BODY" 'd["job"].get("end_time") is not None')" = True ] && break
  sleep 0.5
done
cat "slurm-$work.out"
truth_mem=$(($(truth "slurm-$work.out" parent_hwm_bytes) + $(truth "slurm-$work.out" child_hwm_bytes)))
# The follower may store the sacct record (end time) before the agent's last batches land:
# read the series until it stops growing.
# (three equal reads a second apart: on a loaded machine a batch can take over a second)
last="" same=0
for _ in $(seq 1 30); do
  api "/api/v1/jobs/rstest/$work/series?metric=memory_bytes,cpu_cores"
  now=$(json_get "${BODY:-{\}}" 'sum(p[1] for p in d.get("series", {}).get("cpu_cores", []))')
  if [ -n "$last" ] && [ "$now" = "$last" ] && [ "$now" != 0 ]; then same=$((same + 1)); else same=0; fi
  [ "$same" -ge 2 ] && break
  last=$now
  sleep 1
done
in_range "agent (cgroup v1): peak memory from the series" \
  "$(json_get "$BODY" 'max(p[2] for p in d["series"]["memory_bytes"])')" "$truth_mem" 0.05
# CPU seconds: the cores series integrated over the job, against what the job measured itself
# (on a busy machine two spinning processes get less than 2 cores)
in_range "agent (cgroup v1): CPU seconds from the cores series" \
  "$(json_get "$BODY" 'sum(p[1] for p in d["series"]["cpu_cores"]) * d["step"]')" \
  "$(truth "slurm-$work.out" cpu_s)" 0.10

wait_jobs 200 "$tl" "$oom" "$segv" "$arr"
# NODE_FAIL: the node goes down under a running job (not requeued), then comes back.
NODE=$(hostname -s)
nf=$(sbatch --parsable -J rs_nf --no-requeue -t 5 --mem=100M -o "$WORK/slurm-%j.out" \
  --wrap "echo computing; sleep 120")
for _ in $(seq 1 40); do [ "$(squeue -h -j "$nf" -o %T)" = RUNNING ] && break; sleep 0.5; done
# slurmctld refuses a state change while the node is still completing earlier jobs
# ("Invalid node state specified"): retry for a few seconds.
down=""
for _ in $(seq 1 40); do
  if scontrol update nodename="$NODE" state=down reason=rightsize-node-fail-test 2>/dev/null; then
    down=yes
    break
  fi
  sleep 0.5
done
expect_eq "the node could be set down under the running job" "$down" yes
wait_jobs 60 "$nf"
for _ in $(seq 1 40); do
  scontrol update nodename="$NODE" state=resume 2>/dev/null && break
  sinfo -h -n "$NODE" -o %t | grep -q '^idle' && break  # already back
  sleep 0.5
done
for _ in $(seq 1 20); do  # slurmdbd records the end a little later
  [ "$(sacct -X -n -P -j "$nf" -o State)" = NODE_FAIL ] && break
  sleep 0.5
done
expect_eq "the job's state" "$(sacct -X -n -P -j "$nf" -o State)" NODE_FAIL
# the server's next sacct passes (every 3 s; slurmdbd records ends a little late)
# (the accounting database may hold failed jobs of earlier runs too: wait for ours)
for _ in $(seq 1 60); do
  n=0
  for j in "$tl" "$oom" "$segv" "$nf"; do grep -q "\"diagnosed\":\"$j\"" "$WORK/serve.out" && n=$((n + 1)); done
  [ "$n" -eq 4 ] && break
  sleep 1
done
echo "--- the server's diagnoses"; grep diagnosed "$WORK/serve.out" || true

check_diag() { # check_diag WHAT JOBID CLASS FIX-NEEDLE
  local body
  body=$(curl -sf "$URL/api/v1/jobs/rstest/$2" || true)
  if [ -z "$body" ] || [ "$(json_get "$body" 'd["diagnosis"] is None')" = True ]; then
    fail "$1: job $2 has no diagnosis"; return
  fi
  expect_eq "$1: class (API)" "$(json_get "$body" 'd["diagnosis"]["class"]')" "$3"
  expect_contains "$1: a concrete fix" "$(json_get "$body" 'd["diagnosis"]["fixes"][0]["text"]')" "$4"
}
expect_eq "the OOM job's state" "$(sacct -X -n -P -j "$oom" -o State)" OUT_OF_MEMORY
check_diag "OOM kill" "$oom" host_oom "--mem"
check_diag "time limit" "$tl" timeout "--time"
check_diag "segfault" "$segv" segfault ""
check_diag "node failure" "$nf" node_failure ""
run_rs diagnose "$oom" --cluster rstest --json --no-save
expect_eq "rightsize diagnose agrees" "$(json_get "$OUT" 'd["class"]')" host_oom
run_rs job "$tl" --cluster rstest
expect_contains "rightsize job shows the diagnosis" "$OUT" "timeout"

expect_eq "each job stored once" \
  "$(sqlite3 "$RIGHTSIZE_DB" "select count(*) from jobs where cluster='rstest' and job_id in ('$work','$tl','$oom','$segv','$nf','${arr}_1','${arr}_2')")" 7
expect_eq "no steps stored as jobs" "$(sqlite3 "$RIGHTSIZE_DB" "select count(*) from jobs where job_id like '%.%'")" 0
finish
