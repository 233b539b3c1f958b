#!/bin/sh
# Score the blind4 set once (issue 26). Run from the repository root after building:
#   sh test/data/failures/real/blind4/score_blind4.sh [build/rightsize [--no-learned]]
# Copies the set into a scratch corpus in the usual real/<set>/<class>/<name>.log layout
# (so the normal test scan of test/data/failures never sees it) and runs
# scripts/diagnosis_accuracy.py on it; the set is reported as "real-blind4".
# Publish only the totals; keep per-case misdiagnoses away from the rule tuners.
set -eu
RS=${1:-build/rightsize}
[ $# -gt 0 ] && shift
SRC=test/data/failures/real/blind4
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/real/blind4"
cp -r "$SRC"/logs/* "$T/real/blind4/"
sed 's#real/blind4/logs/#real/blind4/#' "$SRC/cases.real.blind4.tsv" > "$T/cases.real.blind4.tsv"
python3 scripts/diagnosis_accuracy.py "$RS" "$T" "$@"
