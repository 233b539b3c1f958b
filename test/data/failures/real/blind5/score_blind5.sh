#!/bin/sh
# Score the blind5 set once (issue 26). Run from the repository root after building:
#   sh test/data/failures/real/blind5/score_blind5.sh [build/rightsize [--no-learned]]
# Copies the set into a scratch corpus in the usual real/<set>/<class>/<name>.log layout
# (so the normal test scan of test/data/failures never sees it) and runs
# scripts/diagnosis_accuracy.py on it; the set is reported as "real-blind5".
# Publish only the totals; keep per-case misdiagnoses away from the rule tuners.
set -eu
RS=${1:-build/rightsize}
[ $# -gt 0 ] && shift
SRC=test/data/failures/real/blind5
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/real/blind5"
cp -r "$SRC"/logs/* "$T/real/blind5/"
sed 's#real/blind5/logs/#real/blind5/#' "$SRC/cases.real.blind5.tsv" > "$T/cases.real.blind5.tsv"
python3 scripts/diagnosis_accuracy.py "$RS" "$T" "$@"
