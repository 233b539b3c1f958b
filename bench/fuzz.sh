#!/usr/bin/env bash
# The long fuzzing campaign (issue 31's acceptance: 10 million executions per reader with no
# crash, leak or sanitizer report): every libFuzzer target for RUNS executions (default
# 10,000,000), one at a time, at nice 19 so a shared machine keeps its other work. Prints the
# table of scripts/fuzz.sh (executions, exec/s, peak RSS, findings) and the machine; the
# figures of record are in docs/reliability.md.
#
# Usage: bench/fuzz.sh [RUNS [TARGET...]]   e.g. bench/fuzz.sh 10000000 swf sacct
# (no TARGET: all ten, the webhook's and the server config's included)
# Builds in its own tree, CAMPAIGN_BUILD (default build-fuzz-campaign), so that a `make test`
# beside a campaign (whose fuzz-short rebuilds build-fuzz) cannot replace a running binary;
# the working corpora grow in CAMPAIGN_BUILD/fuzz-corpus/.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-10000000}
shift || true
[ $# -eq 0 ] && set -- all
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%FT%TZ)"
echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)," \
  "$(clang++ --version | head -1)"
start=$(date +%s)
nice -n 19 bash scripts/fuzz.sh -b "${CAMPAIGN_BUILD:-build-fuzz-campaign}" "$RUNS" "$@"
echo "wall: $(( $(date +%s) - start )) s"
