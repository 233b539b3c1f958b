#!/usr/bin/env bash
# Whole-program tests of `rightsize report`: figures checked against independent computations.
set -euo pipefail
source "$(dirname "$0")/lib.sh" "$@"
KTH=$TESTDIR/data/swf/KTH-SP2-1996-2.1-cln.swf.gz
HPC2N=$SRCDIR/data/traces/HPC2N-excerpt-alea.swf.gz

run_rs ingest swf "$KTH"
run_rs report --json
expect_eq "report exit" "$RC" 0
# Allocated core-hours = sum(processors x run time) over jobs with both known, computed by awk.
want=$(zcat "$KTH" | awk '!/^;/ && $4 > 0 && $5 > 0 { s += $5 * $4 } END { printf "%.3f", s / 3600 }')
got=$(json_get "$OUT" '"%.3f" % d["cpu"]["allocated_core_hours"]')
expect_eq "allocated core-hours equal sum(procs x run) / 3600" "$got" "$want"
want_time=$(zcat "$KTH" | awk '!/^;/ && $4 > 0 && $9 > 0 { s += $4 } END { printf "%.3f", s / 3600 }')
expect_eq "elapsed hours of jobs with a limit" \
  "$(json_get "$OUT" '"%.3f" % d["time"]["elapsed_hours"]')" "$want_time"
expect_eq "no CPU usage in this trace gives null, not 0" \
  "$(json_get "$OUT" 'd["cpu"]["used_core_hours"]')" None
expect_eq "jobs counted" "$(json_get "$OUT" 'd["jobs"]')" 28489
for key in memory.allocated_gb_hours time.requested_hours recoverable cost; do
  expect_eq "json has $key" "$(json_get "$OUT" "'${key}'.split('.')[0] in d")" True
done

# A trace with CPU usage: used core-hours = sum(avg CPU time per proc x procs) / 3600.
run_rs --db "$WORK/h.db" ingest swf "$HPC2N"
run_rs --db "$WORK/h.db" report --json
want_used=$(zcat "$HPC2N" | awk '!/^;/ && $4 > 0 && $5 > 0 && $6 >= 0 { s += $6 * $5 } END { printf "%.3f", s / 3600 }')
expect_eq "used core-hours from SWF average CPU time" \
  "$(json_get "$OUT" '"%.3f" % d["cpu"]["used_core_hours"]')" "$want_used"

# Text: the summary sentence and aligned tables; --by groups.
run_rs --db "$WORK/h.db" report --by user
expect_eq "text exit" "$RC" 0
expect_contains "text names the jobs" "$OUT" "3,170 jobs"
expect_contains "text has the recoverable rule" "$OUT" "1.2"
run_rs --db "$WORK/h.db" report --json --by account --since 1990-01-01 --until 2100-01-01
# A window keeps the jobs with a known end (run time >= 0); jobs that never ran have none.
ended=$(zcat "$HPC2N" | awk '!/^;/ && NF >= 18 && $4 >= 0' | wc -l)
expect_eq "window filter keeps every job that ended" "$(json_get "$OUT" 'd["jobs"]')" "$ended"
run_rs --db "$WORK/h.db" report --json --until 1990-01-01
expect_eq "window filter before the trace" "$(json_get "$OUT" 'd["jobs"]')" 0

# HTML: one self-contained file with charts, no external resources.
run_rs --db "$WORK/h.db" report --format html -o "$WORK/report.html"
expect_eq "html exit" "$RC" 0
html=$(cat "$WORK/report.html")
expect_contains "html has charts" "$html" "<svg"
if grep -qE '(src|href)="(https?:)?//' "$WORK/report.html"; then fail "html loads external resources"; else
  pass "html is self-contained"; fi

# Prices: a custom table changes the dollars; a broken one is a clear error.
cat >"$WORK/prices.json" <<'JSON'
{"schema": "rightsize.prices/v1", "currency": "USD",
 "cpu_core_hour": {"price": 1.0, "source": "test"},
 "memory_gb_hour": {"price": 0.0, "source": "test"},
 "default_gpu_hour": {"price": 0.0, "source": "test"}, "gpus": {}}
JSON
run_rs --db "$WORK/h.db" report --json --prices "$WORK/prices.json"
expect_eq "dollars follow --prices" \
  "$(json_get "$OUT" '"%.2f" % d["cost"]["allocated_dollars"]')" \
  "$(json_get "$OUT" '"%.2f" % d["cpu"]["allocated_core_hours"]')"
echo '{"cpu_core_hour": "cheap"}' >"$WORK/bad-prices.json"
run_rs --db "$WORK/h.db" report --prices "$WORK/bad-prices.json"
expect_eq "bad price file exit" "$RC" 2
expect_contains "bad price file names the field" "$ERR" "cpu_core_hour"

# Accounting whose user and job name are Latin-1, not UTF-8: the JSON carries U+FFFD where the
# bad byte was, instead of an internal error.
PHILLIPS=$TESTDIR/data/sacct/sites/ub-ccr-phillips_slurm-2016-12-2017-01.psv.gz
E=$(printf '\351')
zcat "$PHILLIPS" | sed "\$s/|[^|]*|\([0-9]*\)|201/|nor${E}r|\1|201/; \$s/|[^|]*\$/|caf${E}/" >"$WORK/latin1.psv"
LAST=$(tail -1 "$WORK/latin1.psv" | cut -d'|' -f1)
run_rs --db "$WORK/l.db" ingest sacct "$WORK/latin1.psv"
expect_eq "Latin-1 accounting is stored" "$RC" 0
run_rs --db "$WORK/l.db" report --json
expect_eq "report --json of it is JSON" "$RC:$(json_get "$OUT" 'd["jobs"] > 0')" "0:True"
run_rs --db "$WORK/l.db" job "$LAST" --json
expect_eq "the job's card names its user and job name with U+FFFD" \
  "$RC:$(json_get "$OUT" 'ascii((d["job"]["request"]["user"], d["job"]["request"]["job_name"]))')" "0:('nor\ufffdr', 'caf\ufffd')"

finish
