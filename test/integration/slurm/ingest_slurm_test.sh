#!/usr/bin/env bash
# `rightsize ingest slurm` against a real SLURM 22.05 cluster (started here, stopped after):
# real sbatch jobs, real sacct, steps merged, re-runs idempotent.
# Usage: ingest_slurm_test.sh RIGHTSIZE TESTDIR SRCDIR   (as root; installs SLURM if missing)
set -euo pipefail
source "$2/cli/lib.sh" "$@"
CLUSTER_SH=$TESTDIR/integration/slurm/cluster.sh
bash "$CLUSTER_SH" up
trap 'bash "$CLUSTER_SH" down >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

tag="rs$$"
mem_job=$(sbatch --parsable -J "${tag}_mem" -t 00:05:00 --mem=400M \
  --wrap "/usr/bin/python3 -c 'import time; x=b\"x\"*(150*1024*1024); time.sleep(3)'")
fail_job=$(sbatch --parsable -J "${tag}_fail" -t 00:05:00 --mem=100M --wrap "exit 3")
array_job=$(sbatch --parsable -J "${tag}_arr" -t 00:05:00 --mem=100M --array=1-2 --wrap "sleep 1")
for _ in $(seq 1 300); do
  [ -z "$(squeue -h -n "${tag}_mem,${tag}_fail,${tag}_arr")" ] && break
  sleep 0.5
done
sleep 2  # slurmdbd receives job ends asynchronously

run_rs ingest slurm --since 1h --json
expect_eq "ingest slurm exit" "$RC" 0
stored=$(json_get "$OUT" 'd["stored"]')
if [ "$stored" -ge 4 ]; then pass "ingest slurm stored $stored jobs"; else fail "stored $stored"; fi

run_rs job "$mem_job" --json
expect_eq "the memory job is there" "$RC" 0
expect_eq "its cluster comes from sacct" "$(json_get "$OUT" 'd["job"]["cluster"]')" rstest
peak=$(json_get "$OUT" 'd["job"]["usage"]["peak_memory_bytes"] or 0')
if [ "$peak" -gt $((140 * 1024 * 1024)) ] && [ "$peak" -lt $((400 * 1024 * 1024)) ]; then
  pass "peak memory from the batch step ($peak bytes)"; else fail "peak memory $peak"; fi
expect_eq "requested memory" "$(json_get "$OUT" 'd["job"]["request"]["memory_bytes"]')" $((400 * 1024 * 1024))
run_rs job "$fail_job" --json
expect_eq "failed job state" "$(json_get "$OUT" 'd["job"]["outcome"]["state"]')" FAILED
expect_eq "failed job exit code" "$(json_get "$OUT" 'd["job"]["outcome"]["exit_code"]')" 3
run_rs job "${array_job}_2" --json
expect_eq "array task is its own job" "$RC" 0

# The partitions, from the real sinfo: the node's cores and memory, as slurm.conf gives them.
expect_eq "the default partition is kept" \
  "$(sqlite3 "$RIGHTSIZE_DB" "select value from cluster_meta where cluster = 'rstest' and key = 'default_partition'")" debug
expect_eq "its nodes' cores" \
  "$(sqlite3 "$RIGHTSIZE_DB" "select value from cluster_meta where cluster = 'rstest' and key = 'partition.debug.cpus_per_node'")" \
  "$(scontrol show node -o | grep -o 'CPUTot=[0-9]*' | head -1 | cut -d= -f2)"
expect_eq "its nodes' memory" \
  "$(sqlite3 "$RIGHTSIZE_DB" "select value from cluster_meta where cluster = 'rstest' and key = 'partition.debug.memory_per_node'")" \
  "$(($(scontrol show node -o | grep -o 'RealMemory=[0-9]*' | head -1 | cut -d= -f2) * 1048576))"
# A script without -p is read against the default partition's nodes.
printf '#!/bin/bash\n#SBATCH -n 1\n#SBATCH -t 00:05:00\nsleep 1\n' >"$WORK/nop.sh"
run_rs predict "$WORK/nop.sh" --user root --json
expect_eq "predict without -p" "$RC" 0
expect_contains "says it used the default partition" "$OUT" "the cluster's default, debug"

before=$(sqlite3 "$RIGHTSIZE_DB" "select count(*) from jobs")
run_rs ingest slurm --since 1h
expect_contains "ingest slurm lists the partition" "$OUT" "partition debug (default)"
after=$(sqlite3 "$RIGHTSIZE_DB" "select count(*) from jobs")
expect_eq "re-running ingest slurm does not duplicate" "$after" "$before"
expect_eq "no step stored as a job" "$(sqlite3 "$RIGHTSIZE_DB" "select count(*) from jobs where job_id like '%.%'")" 0

run_rs ingest slurm --since 1h --sinfo /nonexistent/sinfo
expect_eq "a missing sinfo still ingests the jobs" "$RC" 0
expect_contains "and warns" "$ERR" "cannot run /nonexistent/sinfo"

run_rs ingest slurm --since 1h --sacct /nonexistent/sacct
expect_eq "missing sacct is a clear error" "$RC" 2
expect_contains "missing sacct message" "$ERR" "cannot run /nonexistent/sacct"
finish
