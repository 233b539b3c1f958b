#!/usr/bin/env bash
# What deploy/slurm/job_submit.lua adds to sbatch, on the real test cluster: N submissions
# (default 1000) each of the hook in mode off (the baseline: loaded, returns at once), advise
# with `rightsize serve` up (a model trained on 80 past runs of the job), and advise with the
# server down. Jobs are submitted held (--hold) and cancelled, so none runs.
# Prints p50/p90/p99/max of sbatch's wall time per case and what the hook adds (case - off).
# Usage: bench/slurm_hook_bench.sh RIGHTSIZE [N]   (as root; starts and stops the cluster)
set -euo pipefail
RS=$(realpath "$1")
N=${2:-1000}
SRC=$(cd "$(dirname "$0")/.." && pwd)
CLUSTER_SH=$SRC/test/integration/slurm/cluster.sh
WORK=$(mktemp -d /tmp/rightsize-hook-bench.XXXXXX)
export RIGHTSIZE_DB=$WORK/store.db
SERVER=""
cleanup() {
  [ -n "$SERVER" ] && kill -TERM "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
  scancel -n rs_bench 2>/dev/null || true
  rm -f /etc/slurm/rightsize.conf
  bash "$CLUSTER_SH" down >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
echo "mode = off" >/etc/slurm/rightsize.conf
RS_JOB_SUBMIT_LUA=$SRC/deploy/slurm/job_submit.lua bash "$CLUSTER_SH" up >/dev/null
cd "$WORK"
python3 "$SRC/test/integration/slurm/make_history.py" rstest root rs_bench 60 310 1.9 20 >history.psv
"$RS" ingest sacct history.psv >/dev/null
"$RS" train >/dev/null
"$RS" serve --listen 127.0.0.1:0 >serve.out 2>serve.err &
SERVER=$!
for _ in $(seq 1 100); do grep -q 'listening on' serve.out && break; sleep 0.1; done
URL=http://127.0.0.1:$(grep -o 'listening on 127.0.0.1:[0-9]*' serve.out | cut -d: -f2)
cat >job.sbatch <<'SH'
#!/bin/bash
#SBATCH --mem=2G
#SBATCH --cpus-per-task=2
#SBATCH --time=60
python3 train.py --epochs 3
SH

run_case() { # run_case NAME CONF-LINES…: N held submissions, the wall time of each in ms
  local name=$1
  shift
  printf '%s\n' "$@" >/etc/slurm/rightsize.conf
  sbatch --hold -J rs_bench -o /dev/null job.sbatch >/dev/null 2>&1  # warm-up
  python3 - "$N" >"times.$name" <<'PY'
import subprocess, sys, time
for _ in range(int(sys.argv[1])):
    t0 = time.perf_counter()
    subprocess.run(["sbatch", "--hold", "-J", "rs_bench", "-o", "/dev/null", "job.sbatch"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print("%.3f" % (1000 * (time.perf_counter() - t0)))
PY
  scancel -n rs_bench
  sleep 1
}
run_case off "mode = off"
run_case up "server = $URL" "mode = advise" "risk = 0.05"
kill -TERM "$SERVER"; wait "$SERVER" 2>/dev/null || true; SERVER=""
run_case down "server = $URL" "mode = advise" "risk = 0.05"

python3 - "$N" <<'PY'
import statistics, sys
def q(v, p): v = sorted(v); return v[min(len(v) - 1, int(p * len(v)))]
cases = {c: [float(x) for x in open("times." + c)] for c in ("off", "up", "down")}
print("sbatch wall time over %s submissions (ms)" % sys.argv[1])
print("%-26s %8s %8s %8s %8s" % ("case", "p50", "p90", "p99", "max"))
for c, label in (("off", "hook mode off (baseline)"), ("up", "advise, server up"),
                 ("down", "advise, server down")):
    v = cases[c]
    print("%-26s %8.1f %8.1f %8.1f %8.1f" % (label, q(v, .5), q(v, .9), q(v, .99), max(v)))
for c in ("up", "down"):
    print("hook adds (%s): p50 %.1f ms, p99 %.1f ms" % (c, q(cases[c], .5) - q(cases["off"], .5),
                                                      q(cases[c], .99) - q(cases["off"], .99)))
PY
echo "machine: $(nproc) CPUs, $(uname -r), $(sbatch --version)"
