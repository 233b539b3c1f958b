#!/usr/bin/env bash
# The pipeline's input: LINES lines "KEY<TAB>payload-N", keys pseudo-random from a fixed seed.
# Usage: make_input.sh LINES OUT
set -euo pipefail
mawk -v n="$1" 'BEGIN { srand(42); for (i = 0; i < n; i++) printf "%08d\tpayload-%d-%d\n", int(rand() * 1e8), i, int(rand() * 1e9) }' >"$2"
