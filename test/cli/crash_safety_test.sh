#!/usr/bin/env bash
# Killing an ingest mid-way loses nothing that was stored before, and leaves a sound store.
set -euo pipefail
source "$(dirname "$0")/lib.sh" "$@"
KTH=$TESTDIR/data/swf/KTH-SP2-1996-2.1-cln.swf.gz

# Data already in the store.
run_rs ingest sacct "$TESTDIR/data/sacct/slurm22/mixed.psv" --cluster lab
expect_eq "first ingest" "$RC" 0

# A big trace (KTH x 20 = 569,780 jobs, fresh ids), killed with SIGKILL once batches land.
BIG=$WORK/big.swf
zcat "$KTH" | grep -v '^;' | awk '{ for (c = 0; c < 20; c++) { $1 = c * 100000 + NR; print } }' >"$BIG"
"$RS" ingest swf "$BIG" --cluster big >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 200); do
  n=$(sqlite3 "$RIGHTSIZE_DB" "select count(*) from jobs where cluster='big'" 2>/dev/null || echo 0)
  [ "${n:-0}" -gt 0 ] && break
  sleep 0.05
done
kill -9 "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true

expect_eq "store is sound after the kill" "$(sqlite3 "$RIGHTSIZE_DB" 'pragma integrity_check')" ok
expect_eq "earlier data kept" "$(sqlite3 "$RIGHTSIZE_DB" "select count(*) from jobs where cluster='lab'")" 10
partial=$(sqlite3 "$RIGHTSIZE_DB" "select count(*) from jobs where cluster='big'")
# Batches of 1,000, 2,000, 4,000, 8,000 records, then 10,000 each (ingest.cc): whole batches end
# at 1,000, 3,000, 7,000, 15,000, 25,000, 35,000, ...
whole=no
sum=0
size=1000
while [ "$sum" -lt 569780 ]; do
  sum=$((sum + size))
  [ "$sum" -gt 569780 ] && sum=569780
  [ "$partial" -eq "$sum" ] && whole=yes
  size=$((size * 2 > 10000 ? 10000 : size * 2))
done
if [ "$whole" = yes ]; then
  pass "only whole batches were committed ($partial jobs)"
else
  fail "a partial batch was committed: $partial"
fi
# Running it again completes the work without duplicates.
run_rs ingest swf "$BIG" --cluster big
expect_eq "re-run exit" "$RC" 0
expect_eq "re-run stores all, once" \
  "$(sqlite3 "$RIGHTSIZE_DB" "select count(*) from jobs where cluster='big'")" 569780
finish
