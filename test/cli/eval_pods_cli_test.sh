#!/usr/bin/env bash
# `rightsize eval pods`: the figures it prints are recomputed from the data by an independent
# script, the text shows the JSON's figures, and bad input gets a clear error.
set -euo pipefail
source "$(dirname "$0")/lib.sh" "$1" "$2" "$3"
DATA=$TESTDIR/data/pods/alibaba-genai-excerpt.csv.gz

run_rs eval pods --gpu-memory "$DATA" --json
expect_eq "eval pods --json exits 0" "$RC" 0
printf '%s' "$OUT" >"$WORK/pods.json"
expect_eq "schema" "$(json_get "$OUT" 'd["schema"]')" "rightsize.eval_pods/v1"
expect_eq "pods" "$(json_get "$OUT" 'd["data"]["pods"]')" 6
if python3 "$TESTDIR/cli/check_eval_pods.py" "$DATA" "$WORK/pods.json" >"$WORK/check" 2>&1; then
  pass "every method's pod-hours, under-provisioned hours and freed GiB-hours recomputed from the CSV"
else
  fail "recomputed figures differ: $(cat "$WORK/check")"
fi
expect_eq "dev + blind = all pod-hours" \
  "$(json_get "$OUT" 'd["dev"]["pod_hours"] + d["blind"]["pod_hours"]')" \
  "$(json_get "$OUT" 'd["all"]["pod_hours"]')"

run_rs eval pods --gpu-memory "$DATA"
expect_eq "eval pods exits 0" "$RC" 0
JSON=$(cat "$WORK/pods.json")
for m in rightsize vpa krr; do
  line=$(json_get "$JSON" "next(f'{x[\"method\"]:<10} {x[\"under_hours\"]:>8} ({100*x[\"under_share\"]:>5.1f}%) {x[\"freed_gib_hours\"]:>11.1f} ({100*x[\"freed_share\"]:>5.1f}%)' for x in d['blind']['methods'] if x['method']=='$m')")
  expect_contains "text shows $m's blind figures" "$OUT" "$line"
done
expect_contains "text names the baseline" "$OUT" "against the pod's peak so far"

run_rs eval pods --gpu-memory "$WORK/missing.csv"
expect_eq "missing file fails" "$([ "$RC" -ne 0 ] && echo yes)" yes
expect_contains "missing file named" "$ERR" "missing.csv"
printf 'time,used\n1,2\n' >"$WORK/bad.csv"
run_rs eval pods --gpu-memory "$WORK/bad.csv"
expect_contains "bad header explained" "$ERR" "bad.csv:1: expected a header of three columns"
printf 'timestamp,value,pod\n60,abc,p\n' >"$WORK/badnum.csv"
run_rs eval pods --gpu-memory "$WORK/badnum.csv"
expect_contains "bad number names its line" "$ERR" "badnum.csv:2: value is not a non-negative number"
run_rs eval pods
expect_eq "--gpu-memory is required" "$([ "$RC" -ne 0 ] && echo yes)" yes
finish
