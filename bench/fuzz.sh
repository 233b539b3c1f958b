#!/usr/bin/env bash
# The long fuzzing campaign (issue 31's acceptance: 10 million executions per reader with no
# crash, leak or sanitizer report): every libFuzzer target for RUNS executions (default
# 10,000,000), one at a time, at nice 19 so a shared machine keeps its other work. Prints the
# table of scripts/fuzz.sh (executions, exec/s, peak RSS, findings) and the machine; the
# figures of record are in docs/reliability.md.
#
# Usage: bench/fuzz.sh [RUNS [TARGET...]]   e.g. bench/fuzz.sh 10000000 swf sacct
# (no TARGET: all ten, the webhook's and the server config's included)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-10000000}
shift || true
[ $# -eq 0 ] && set -- all
echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)," \
  "$(clang++ --version | head -1)"
start=$(date +%s)
nice -n 19 bash scripts/fuzz.sh "$RUNS" "$@"
echo "wall: $(( $(date +%s) - start )) s"
