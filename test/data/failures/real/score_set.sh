#!/bin/sh
# Scores one set of real logs kept apart from the test corpus (blind4, blind5, ...) once
# (issue 26). Run from the repository root after building:
#   sh test/data/failures/real/score_set.sh SET [build/rightsize [--no-learned]]
# SET is a folder here with logs/<class>/<name>.log and cases.real.SET.tsv. Copies the set into
# a scratch corpus in the usual real/<set>/<class>/<name>.log layout (so the normal test scan of
# test/data/failures never sees it) and runs scripts/diagnosis_accuracy.py on it; the set is
# reported as "real-SET". Publish only the totals; keep per-case misdiagnoses away from the
# rule tuners.
set -eu
SET=${1:?usage: score_set.sh SET [RIGHTSIZE [--no-learned]]}
shift
RS=${1:-build/rightsize}
[ $# -gt 0 ] && shift
SRC=test/data/failures/real/$SET
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/real/$SET"
cp -r "$SRC"/logs/* "$T/real/$SET/"
sed "s#real/$SET/logs/#real/$SET/#" "$SRC/cases.real.$SET.tsv" > "$T/cases.real.$SET.tsv"
python3 scripts/diagnosis_accuracy.py "$RS" "$T" "$@"
