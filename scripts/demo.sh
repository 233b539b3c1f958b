#!/usr/bin/env bash
# The demo behind `make demo`: ingest the bundled real trace into a fresh store, print the
# waste report, and write report.html. Usage: scripts/demo.sh path/to/rightsize
set -euo pipefail
RS=${1:-build/rightsize}
cd "$(dirname "$0")/.."
DB=build/demo.db
rm -f "$DB" "$DB-wal" "$DB-shm"
TRACE=data/traces/HPC2N-excerpt-alea.swf.gz
echo "== rightsize ingest swf $TRACE"
"$RS" --db "$DB" ingest swf "$TRACE" --cluster HPC2N
echo
echo "== rightsize report"
"$RS" --db "$DB" report
"$RS" --db "$DB" report --format html -o report.html
echo
echo "== rightsize job 995 (one job's card)"
"$RS" --db "$DB" job 995
echo
echo "== rightsize train (prediction models from the same history)"
"$RS" --db "$DB" train
echo
echo "== rightsize predict examples/lammps.sbatch --user user8"
"$RS" --db "$DB" predict examples/lammps.sbatch --user user8
echo
echo "Open report.html in a browser for the charts. The store is $DB."
