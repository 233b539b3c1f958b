#!/usr/bin/env bash
# `rightsize ingest swf|sacct` into PostgreSQL: records per second and CPU per record.
#
# Starts a PostgreSQL 15 as the tests do (test/cli/postgres.sh: a temporary cluster, fsync off),
# then ingests two traces into an empty store, RUNS times each (the store emptied before each):
#   SWF:   KTH-SP2 x10, each copy with fresh job ids (284,890 jobs, 19 MB)
#   sacct: the UB CCR XDMoD export x30, fresh ids (128,550 jobs)
# and prints, per run: wall seconds and records/s, CPU seconds and microseconds per record of
# the client (`rightsize`, every thread), of the ingest's PostgreSQL backends (polled from
# /proc) and of all of PostgreSQL (postmaster and every child, exited ones included), and the
# load average before and after. The machine and the PostgreSQL version come first; a summary
# per trace (median records/s, CPU per record from-to) comes last.
#
# Usage: bench/pg_ingest.sh [BUILD_DIR] [RUNS]   (default build, 2 runs; well under a minute on an
# idle 2-core machine). AGAIN=1 also ingests each file a second time into the filled store (every
# job replaced, none changed). IDS=ascending numbers the copies so that their job ids, compared as
# text (the store's key), ascend through the file, as a real scheduler's do (SWF 1,000,000 + copy x
# 100,000 + line, sacct 10,000,000 + copy x 1,000,000 + id); the default prefixes the copy number
# ("12" + "163485"), which scatters the copies through the text order of the keys (copy 10 sorts
# before copy 1), so most inserts into the (cluster, job_id) index land mid-index instead of at
# its right edge.
# Environment: PG_BIN (default /usr/lib/postgresql/15/bin).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$SRC/build}
RUNS=${2:-2}
RS=$BUILD/rightsize
[ -x "$RS" ] || { echo "no $RS: build the rightsize target first" >&2; exit 1; }
WORK=$(mktemp -d /tmp/rightsize-pgbench.XXXXXX)
# shellcheck source=../test/cli/postgres.sh
source "$SRC/test/cli/postgres.sh"
trap 'pg_stop; rm -rf "$WORK"' EXIT
chmod 755 "$WORK"

IDS=${IDS:-prefixed}
case $IDS in
  prefixed) swf_id='c * 100000 + NR' sacct_id='c $1' ;;
  ascending) swf_id='1000000 + c * 100000 + NR' sacct_id='10000000 + c * 1000000 + $1' ;;
  *) echo "IDS: expected prefixed or ascending, got $IDS" >&2; exit 2 ;;
esac
zcat "$SRC/test/data/swf/KTH-SP2-1996-2.1-cln.swf.gz" | grep -v '^;' >"$WORK/one.swf"
for c in $(seq 0 9); do awk -v c="$c" "{ \$1 = $swf_id; print }" "$WORK/one.swf"; done \
  >"$WORK/kth10.swf"
zcat "$SRC/test/data/sacct/sites/ub-ccr-phillips_slurm-2016-12-2017-01.psv.gz" >"$WORK/one.psv"
{ head -1 "$WORK/one.psv"; for c in $(seq 1 30); do
  awk -F'|' -v OFS='|' -v c="$c" "NR > 1 { id = $sacct_id; \$1 = id; \$2 = id; print }" \
    "$WORK/one.psv"; done; } >"$WORK/ccr30.psv"

pg_start || exit $?
PG_POSTMASTER=$(head -1 "$PG_ROOT/data/postmaster.pid")
echo "machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(free -g | awk '/^Mem:/ { print $2 }') GiB"
echo "postgresql: $("$PG_BIN/postgres" --version) (test/cli/postgres.sh settings: fsync=off, synchronous_commit=off, full_page_writes=off)"
echo "rightsize: $RS (source tree at $(git -C "$SRC" rev-parse --short HEAD)$(git -C "$SRC" diff --quiet HEAD -- src || echo ' with changes'))"
echo "job ids: $IDS (IDS=prefixed|ascending)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"

measure() { # measure FORMAT FILE CASE: one ingest (CASE "empty": into an emptied store), one line
  [ "$3" = again ] || pg_psql "TRUNCATE jobs, clusters, cluster_meta" >/dev/null 2>&1 || true
  pg_psql "CHECKPOINT" >/dev/null
  python3 - "$PG_POSTMASTER" "$RS" "$RIGHTSIZE_PG_URL" "$1" "$2" "$PG_BIN/psql" "$3" <<'EOF'
import os, subprocess, sys, time
postmaster, rs, url, fmt, path, psql, case = int(sys.argv[1]), *sys.argv[2:]
tick = os.sysconf("SC_CLK_TCK")

def stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    return s[s.rindex(")") + 2:].split()  # fields from 3 (state) on

def children(pid):
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out

def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""

def all_pg():  # postmaster, its reaped children, its live children (CPU seconds)
    s = stat(postmaster)
    total = sum(int(x) for x in s[11:15])
    for c in children(postmaster):
        try:
            cs = stat(c)
            total += int(cs[11]) + int(cs[12])
        except OSError:
            pass
    return total / tick

def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]

load0 = loadavg()
pg0 = all_pg()
t0 = time.monotonic()
proc = subprocess.Popen([rs, "--db", url, "ingest", fmt, path, "--cluster", "c"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
backends = {}  # pid -> last CPU seconds seen, of the ingest's backends (not parallel workers)
while True:
    pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
    if pid != 0:
        break
    for c in children(postmaster):
        line = cmdline(c)
        if "postgres: " in line and " rightsize " in line:
            try:
                cs = stat(c)
                backends[c] = (int(cs[11]) + int(cs[12])) / tick
            except OSError:
                pass
    time.sleep(0.02)
wall = time.monotonic() - t0
for _ in range(250):  # until the backends have exited and been reaped
    if not any(" rightsize " in cmdline(c) for c in children(postmaster)):
        break
    time.sleep(0.02)
pg = all_pg() - pg0
if status != 0:
    sys.exit(f"ingest failed: {proc.stderr.read().decode()}")
n = int(subprocess.run([psql, "-qAtX", url, "-c", "SELECT count(*) FROM jobs"],
                       capture_output=True, text=True, check=True).stdout)
client = ru.ru_utime + ru.ru_stime
backend = sum(backends.values())
us = lambda s: s / n * 1e6
print(f"{fmt:5} {case:5} {n:7d} jobs: {wall:6.2f} s = {n / wall:7.0f} records/s | CPU s (us/record): "
      f"client {client:5.2f} ({us(client):4.1f}), backends({len(backends)}) {backend:5.2f} "
      f"({us(backend):4.1f}), all PostgreSQL {pg:5.2f} ({us(pg):4.1f}), total "
      f"{us(client + pg):4.1f} | load {load0} -> {loadavg()}")
EOF
}

for run in $(seq 1 "$RUNS"); do
  for trace in "swf $WORK/kth10.swf" "sacct $WORK/ccr30.psv"; do
    read -r format file <<<"$trace"
    measure "$format" "$file" empty
    if [ -n "${AGAIN:-}" ]; then measure "$format" "$file" again; fi
  done
done | tee "$WORK/runs.txt"

# Per trace and case: the median records/s and the range of CPU per record, for the docs.
python3 - "$WORK/runs.txt" <<'EOF'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\w+) +(\w+) .* = +(\d+) records/s .*client +[\d.]+ \( *([\d.]+)\).* all PostgreSQL "
                 r"+[\d.]+ \( *([\d.]+)\), total +([\d.]+)", line)
    if m:
        runs.setdefault((m[1], m[2]), []).append([float(x) for x in m.groups()[2:]])
for (fmt, case), rs in runs.items():
    col = list(zip(*rs))
    span = lambda i: f"{min(col[i]):.1f}-{max(col[i]):.1f}"
    print(f"{fmt:5} {case:5} median {statistics.median(col[0]):7.0f} records/s ({len(rs)} runs) | "
          f"CPU us/record: client {span(1)}, all PostgreSQL {span(2)}, total {span(3)}")
EOF
