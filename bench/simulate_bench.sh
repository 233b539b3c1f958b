#!/usr/bin/env bash
# `rightsize simulate` on 300,000-odd jobs: COPIES back-to-back copies of TRACE (default: the
# KTH-SP2 fixture, 11 copies), each shifted past the previous one's last submit, simulated
# three times per policy; prints the medians of the whole command's wall and CPU time (read,
# parse, simulate, report) and of the simulation's own seconds from --json.
# Usage: simulate_bench.sh RIGHTSIZE [TRACE.swf.gz] [COPIES]
set -euo pipefail
RS=$1
SRC=$(cd "$(dirname "$0")/.." && pwd)
TRACE=${2:-$SRC/test/data/swf/KTH-SP2-1996-2.1-cln.swf.gz}
COPIES=${3:-11}
WORK=$(mktemp -d /tmp/rightsize-simbench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
python3 - "$TRACE" "$COPIES" "$WORK/big.swf" <<'PY'
import gzip, sys
src, copies, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
header, rows = [], []
for line in gzip.open(src, "rt"):
    if line.startswith(";"):
        if "MaxProcs" in line or "MaxNodes" in line:
            header.append(line)
        continue
    f = line.split()
    if len(f) >= 18:
        rows.append(f)
span = max(int(f[1]) for f in rows) + 1
with open(out, "w") as o:
    o.writelines(header)
    for c in range(copies):
        for f in rows:
            g = list(f)
            g[0] = str(int(f[0]) + c * 10**7)
            g[1] = str(int(f[1]) + c * span)
            o.write(" ".join(g) + "\n")
PY
echo "trace: $(grep -vc '^;' "$WORK/big.swf") jobs ($COPIES copies of $(basename "$TRACE"))"
python3 - "$RS" "$WORK/big.swf" <<'PY'
import json, resource, statistics, subprocess, sys, time
rs, trace = sys.argv[1], sys.argv[2]
for policy in ("easy", "easy++"):
    walls, cpus, sims = [], [], []
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        out = subprocess.run([rs, "simulate", trace, "--policy", policy, "--json"],
                             check=True, capture_output=True, text=True).stdout
        walls.append(time.monotonic() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        sims.append(json.loads(out)["scenarios"][0]["seconds"])
    print(f"{policy}: median of 3: wall {statistics.median(walls):.2f} s, "
          f"CPU (user+sys) {statistics.median(cpus):.2f} s, "
          f"simulation alone {statistics.median(sims):.2f} s")
PY
