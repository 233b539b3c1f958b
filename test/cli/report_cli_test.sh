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

# Issue 28, the manager headline, on the bundled FAU data (Alex GPU and Fritz CPU clusters in
# one store). The report covers one cluster: Alex, the one with the most jobs among those with
# current data, and says how to pick the other or mix them.
FAU=$SRCDIR/data/usage/clustercockpit/fau-alex-fritz-2023-02_jobs.csv.gz
run_rs --db "$WORK/fau.db" ingest clustercockpit "$FAU"
expect_eq "FAU ingest exit" "$RC" 0
run_rs --db "$WORK/fau.db" report
expect_eq "FAU report exit" "$RC" 0
FAU_TEXT=$OUT
expect_eq "first line names one cluster" "$(head -1 <<<"$FAU_TEXT" | cut -c1-33)" "rightsize report: cluster alex, j"
flat=$(tr '\n' ' ' <<<"$FAU_TEXT" | tr -s ' ')
expect_contains "says which cluster and how to pick another" "$flat" "Not included: fritz (241 jobs, last ended 2023-02-10). Pick one with --cluster NAME, or mix them with --all-clusters."
run_rs --db "$WORK/fau.db" report --json
FAU_JSON=$OUT
# The issue's figures: $3,141 of $11,973 wasted in 2.9 days.
expect_eq "allocated and wasted dollars of Alex" \
  "$(json_get "$FAU_JSON" '"%.0f %.0f %.1f" % (d["cost"]["allocated_dollars"], d["cost"]["wasted_dollars"], d["window"]["days"])')" "11973 3141 2.9"
# Per year: the window's upper bound x 365 / days (printed to three significant digits).
year=$(json_get "$FAU_JSON" '"${:,.0f}".format(float("%.3g" % (d["recoverable"]["upper_bound"]["dollars"] * 365 / d["window"]["days"])))')
month=$(json_get "$FAU_JSON" '"${:,.0f}".format(float("%.3g" % (d["recoverable"]["upper_bound"]["dollars"] * 365 / 12 / d["window"]["days"])))')
expect_eq "JSON headline per year = upper bound x 365 / days" \
  "$(json_get "$FAU_JSON" 'abs(d["headline"]["per_year_dollars"] / (d["recoverable"]["upper_bound"]["dollars"] * 365 / d["window"]["days"]) - 1) < 1e-4')" True
head5=$(head -8 <<<"$FAU_TEXT" | tr '\n' ' ' | tr -s ' ')
expect_contains "first lines: recoverable per month and per year" "$head5" "Recoverable at list prices: about $month a month, $year a year"
expect_contains "says the year is the window scaled" "$head5" "window's \$1,205 scaled to a year (x 365 / 2.9)"
expect_contains "one sentence on wasted vs recoverable" "$flat" "GPUs come in whole units"
# Idle GPUs: jobs of Alex below 10% mean GPU utilisation, counted from the CSV itself.
want_idle=$(zcat "$FAU" | python3 -c '
import csv, sys
rows = [r for r in csv.DictReader(sys.stdin) if r["cluster"] == "alex" and int(r["num_acc"]) > 0]
print(sum(float(r["acc_utilization_avg_pct"]) < 10 for r in rows), len(rows))')
expect_eq "idle GPU jobs counted as the CSV says" "$want_idle" "111 303"
expect_contains "headline lists the idle-GPU jobs" "$flat" "Idle GPUs: 111 of 303 GPU jobs sat at 0-10% GPU utilisation"
# The issue's example: the idle 8 x A40 job that ran longest (2 h 42 m), found in the CSV.
a40=$(zcat "$FAU" | python3 -c '
import csv, sys
rows = [r for r in csv.DictReader(sys.stdin) if r["cluster"] == "alex" and r["num_acc"] == "8"
        and r["subcluster"] == "a40" and float(r["acc_utilization_avg_pct"]) < 10]
r = max(rows, key=lambda r: int(r["duration_s"]))
m = round(int(r["duration_s"]) / 60)
print(r["job_id"], r["hpc_user"], "8 x a40", "%dh %02dm" % (m // 60, m % 60))')
expect_eq "the CSV's idle 8 x A40 job ran 2 h 42 m" "$(cut -d' ' -f6- <<<"$a40")" "2h 42m"
expect_contains "the idle-GPU list shows it" "$(tr -s ' ' <<<"$FAU_TEXT")" " $a40 0.0% "
expect_eq "JSON idle list: all counted, the costliest first" \
  "$(json_get "$FAU_JSON" 'd["idle_gpu"]["jobs"], len(d["idle_gpu"]["list"]), [j["gpu_dollars"] for j in d["idle_gpu"]["list"]] == sorted([j["gpu_dollars"] for j in d["idle_gpu"]["list"]], reverse=True)')" "111 100 True"
run_rs --db "$WORK/fau.db" report --cluster fritz --json
expect_eq "--cluster picks the other" "$(json_get "$OUT" 'd["clusters"], d["cluster_choice"]')" "['fritz'] None"
run_rs --db "$WORK/fau.db" report --all-clusters --json
expect_eq "--all-clusters mixes them" "$(json_get "$OUT" 'd["clusters"], d["jobs"]')" "['alex', 'fritz'] 544"
run_rs --db "$WORK/fau.db" report --format csv
expect_eq "csv without --showback is a usage error" "$RC" 1

# Issue 30, showback: per account and per user, in every format, the totals equal the
# report's to the cent and the rows add up to them exactly (integer cents).
check_showback() {  # DB REPORT-FLAGS...
  local db=$1
  shift
  run_rs --db "$db" report --json "$@"
  local report=$OUT
  for by in account user; do
    run_rs --db "$db" report --showback $by --json "$@"
    expect_eq "showback $by $* exit" "$RC" 0
    python3 - "$report" "$OUT" <<'PY' && pass "showback $by $*: JSON totals and rows to the cent" || fail "showback $by $*"
import json, sys
rep, sb = json.loads(sys.argv[1]), json.loads(sys.argv[2])
c = lambda v: round(v * 100)
assert sb["schema"] == "rightsize.showback/v1", sb["schema"]
want = {"allocated_dollars": rep["cost"]["allocated_dollars"], "used_dollars": rep["cost"]["used_dollars"],
        "wasted_dollars": rep["cost"]["wasted_dollars"],
        "recoverable_dollars": rep["recoverable"]["upper_bound"]["dollars"]}
for k, v in want.items():
    if v is None:
        assert sb["total"][k] is None, k
        continue
    # The report's JSON carries 4 decimals: its figure rounds to this total (to the cent).
    assert abs(sb["total"][k] * 100 - v * 100) <= 0.5 + 1e-6, (k, sb["total"][k], v)
    assert sum(c(r[k]) for r in sb["rows"]) == c(sb["total"][k]), k
assert sum(r["jobs"] for r in sb["rows"]) == rep["jobs"]
assert c(sb["total"]["right_sized_dollars"]) == c(sb["total"]["allocated_dollars"]) - c(sb["total"]["recoverable_dollars"])
PY
    run_rs --db "$db" report --showback $by --format csv "$@"
    python3 - "$report" "$OUT" <<'PY' && pass "showback $by $*: CSV columns add up to the report" || fail "showback $by $* csv"
import csv, io, json, sys
rep = json.loads(sys.argv[1])
rows = list(csv.reader(io.StringIO(sys.argv[2])))
head, body, total = rows[0], rows[1:-1], rows[-1]
assert total[0] == "total", total
col = head.index("allocated_USD")
cents = lambda s: round(float(s) * 100)
assert sum(cents(r[col]) for r in body) == cents(total[col])
assert abs(cents(total[col]) - rep["cost"]["allocated_dollars"] * 100) <= 0.5 + 1e-6
PY
  done
  run_rs --db "$db" report --showback account --format html -o "$WORK/showback.html" "$@"
  expect_eq "showback html $*" "$RC:$(grep -c '<table>' "$WORK/showback.html")" "0:1"
}
check_showback "$WORK/fau.db"
check_showback "$WORK/fau.db" --all-clusters
check_showback "$WORK/fau.db" --cluster fritz
check_showback "$WORK/h.db"
check_showback "$RIGHTSIZE_DB"  # KTH: no usage recorded, so used and wasted are null
run_rs --db "$WORK/fau.db" report --showback account
expect_contains "showback text has a total row" "$OUT" "total"

finish
