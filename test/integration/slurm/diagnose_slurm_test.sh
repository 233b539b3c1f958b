#!/usr/bin/env bash
# `rightsize diagnose` on real SLURM failures (cluster started here, stopped after): a job
# killed at its time limit and a job killed over its memory limit, each diagnosed end to end
# from its slurm-N.out and its sacct record.
# Usage: diagnose_slurm_test.sh RIGHTSIZE TESTDIR SRCDIR   (as root; installs SLURM if missing)
set -euo pipefail
source "$2/cli/lib.sh" "$@"
CLUSTER_SH=$TESTDIR/integration/slurm/cluster.sh
bash "$CLUSTER_SH" up
trap 'bash "$CLUSTER_SH" down >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

tag="rsd$$"
cat >"$WORK/tl.sbatch" <<'SH'
#!/bin/bash
#SBATCH --time=1
echo "starting"
for i in $(seq 1 600); do echo "step $i/600"; sleep 1; done
SH
tl_job=$(sbatch --parsable -J "${tag}_tl" -o "$WORK/slurm-%j.out" "$WORK/tl.sbatch")
cat >"$WORK/mem.sbatch" <<'SH'
#!/bin/bash
#SBATCH --mem=100M
#SBATCH --time=5
/usr/bin/python3 -c 'import time; x = bytearray(400 * 1024 * 1024); time.sleep(20)'
SH
mem_job=$(sbatch --parsable -J "${tag}_mem" -o "$WORK/slurm-%j.out" "$WORK/mem.sbatch")
for _ in $(seq 1 400); do
  [ -z "$(squeue -h -n "${tag}_tl,${tag}_mem")" ] && break
  sleep 0.5
done
sleep 2  # slurmdbd receives job ends asynchronously
run_rs ingest slurm --since 1h
expect_eq "ingest slurm" "$RC" 0

echo "--- slurm-$tl_job.out (end)"; tail -n 3 "$WORK/slurm-$tl_job.out"
run_rs diagnose "$tl_job" --log "$WORK/slurm-$tl_job.out" --script "$WORK/tl.sbatch" --json
expect_eq "time-limit kill is timeout" "$(json_get "$OUT" 'd["class"]')" timeout
expect_eq "the job record says TIMEOUT" "$(json_get "$OUT" 'd["job"]["state"]')" TIMEOUT
progress=$(json_get "$OUT" 'd["facts"]["progress"]')
if python3 -c "import sys; sys.exit(0 if 0.05 < $progress < 0.3 else 1)"; then
  pass "progress read from the log ($progress)"; else fail "progress $progress"; fi
expect_eq "the fix names the --time line" "$(json_get "$OUT" 'd["fixes"][0]["change"]["line"]')" 2
expect_contains "and asks for more time" "$(json_get "$OUT" 'd["fixes"][0]["change"]["to"]')" \
  "#SBATCH --time="
run_rs diagnose --log "$WORK/slurm-$tl_job.out"
expect_contains "from the log alone too" "$OUT" "what:  timeout"

echo "--- slurm-$mem_job.out"; cat "$WORK/slurm-$mem_job.out"
run_rs diagnose "$mem_job" --log "$WORK/slurm-$mem_job.out" --script "$WORK/mem.sbatch" --json
expect_eq "memory-limit kill is host_oom" "$(json_get "$OUT" 'd["class"]')" host_oom
expect_eq "the fix names the --mem line" "$(json_get "$OUT" 'd["fixes"][0]["change"]["line"]')" 2
expect_eq "the limit SLURM printed" "$(json_get "$OUT" 'd["facts"]["memory_limit_bytes"]')" $((100 * 1024 * 1024))
expect_contains "and asks for more" "$(json_get "$OUT" 'd["fixes"][0]["change"]["to"]')" "#SBATCH --mem="
want=$(json_get "$OUT" 'd["facts"]["suggested_memory_bytes"]')
peak=$(json_get "$OUT" 'd["facts"]["peak_memory_bytes"]')
if [ "$want" -ge $((150 * 1024 * 1024)) ] && [ "$want" -gt "$peak" ]; then
  pass "suggested $want bytes: over 1.5x the limit and the ${peak}-byte peak"; else fail "suggested $want (peak $peak)"; fi
run_rs diagnose --log "$WORK/slurm-$mem_job.out" --json
expect_eq "from the log alone: the limit in bytes (22.05 wording)" \
  "$(json_get "$OUT" 'd["facts"]["memory_limit_bytes"]')" $((100 * 1024 * 1024))
finish
