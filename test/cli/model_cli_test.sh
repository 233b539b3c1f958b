#!/usr/bin/env bash
# `rightsize train`, `predict` and `eval` as a user runs them, on the bundled HPC2N trace.
set -euo pipefail
source "$(dirname "$0")/lib.sh" "$@"
TRACE=$SRCDIR/data/traces/HPC2N-excerpt-alea.swf.gz
SCRIPTS=$TESTDIR/data/scripts
run_rs ingest swf "$TRACE" --cluster hpc2n
expect_eq "ingest the trace" "$RC" 0

# Before any training: the baseline, labelled as such, not an error.
run_rs predict "$SCRIPTS/mpi_job.sh" --user user8
expect_eq "predict without a model exits 0" "$RC" 0
expect_contains "says there is no model" "$OUT" "no model for cluster hpc2n yet"
# A plain text file is not a job script: exit 2, as the README says.
printf 'Dear all,\nthe meeting moves to Friday.\n' >"$WORK/note.txt"
run_rs predict "$WORK/note.txt" --user user8
expect_eq "predict on plain text exits 2" "$RC" 2
expect_contains "says why" "$ERR" "not a batch script"
run_rs predict "$SCRIPTS/mpi_job.sh" --user user8 --json
expect_eq "baseline source" "$(json_get "$OUT" 'd["targets"]["runtime"]["source"]')" "baseline:last2"
expect_eq "no model in JSON" "$(json_get "$OUT" 'd["model"]')" "None"

run_rs train
expect_eq "train exits 0" "$RC" 0
expect_contains "train names the version" "$OUT" "cluster hpc2n: model version 1 from 3,170 jobs"
# HPC2N's jobs keep the cores they ask for busy: the request beats the trees, and train says so.
expect_contains "train says the point is the request" "$OUT" "point = request (the trees lost to it)"
run_rs train --json
TRAIN_JSON=$OUT
expect_eq "retraining makes version 2" "$(json_get "$OUT" 'd["models"][0]["version"]')" 2
expect_eq "runtime trained" "$(json_get "$OUT" 'd["models"][0]["targets"]["runtime"]["trained"]')" True

run_rs predict "$SCRIPTS/mpi_job.sh" --user user8 --json
expect_eq "predict exits 0" "$RC" 0
expect_eq "model answers" "$(json_get "$OUT" 'd["targets"]["runtime"]["source"]')" model
expect_eq "model version" "$(json_get "$OUT" 'd["model"]["version"]')" 2
expect_eq "128 cores kept busy by the user's past runs are not too few" \
  "$(json_get "$OUT" 'd["targets"]["cpu_cores"]["prob_request_too_small"] < 0.05')" True
expect_eq "quantiles ordered, the median within the 12 h request" \
  "$(json_get "$OUT" 'd["targets"]["runtime"]["p10"] <= d["targets"]["runtime"]["p50"] <= d["targets"]["runtime"]["p90"] and d["targets"]["runtime"]["p50"] <= 43200')" True
expect_eq "request from the script" "$(json_get "$OUT" 'd["targets"]["runtime"]["request"]')" 43200.0
expect_eq "a probability" "$(json_get "$OUT" '0 <= d["targets"]["runtime"]["prob_request_too_small"] <= 1')" True
expect_eq "suggestion in whole minutes" "$(json_get "$OUT" 'd["targets"]["runtime"]["suggested_request"] % 60')" 0.0
expect_eq "says why" "$(json_get "$OUT" 'len(d["targets"]["runtime"]["why"]) > 0')" True
expect_eq "each reason in words" \
  "$(json_get "$OUT" 'all(w["description"] and "_" not in w["description"] for w in d["targets"]["runtime"]["why"])')" True
expect_eq "similar jobs are the user's" "$(json_get "$OUT" 'all(j["user"] == "user8" for j in d["similar_jobs"]) and len(d["similar_jobs"]) == 3')" True
run_rs predict "$SCRIPTS/mpi_job.sh" --user user8
if grep -q "had not seen before" <<<"$OUT"; then fail "a user with history is called new: $OUT"
else pass "a user with history is not called new"; fi
# user8 never ran lammps-melt: the trees start from the mean of the user's last two runs.
expect_contains "the text says where the prediction starts" "$OUT" \
  "runtime: from the mean of your last two jobs ("

# sbatch options after -- override the script, as sbatch does.
run_rs predict "$SCRIPTS/mpi_job.sh" --user user8 --json -- --time=30
expect_eq "command-line --time overrides #SBATCH -t" "$(json_get "$OUT" 'd["targets"]["runtime"]["request"]')" 1800.0
expect_eq "median capped at the new request" "$(json_get "$OUT" 'd["targets"]["runtime"]["p50"] <= 1800')" True

# --risk is a share of all jobs: a long request is cut where the cut frees the most, at more
# than that risk for this one job, and predict says so (job_risk, a note).
run_rs predict "$SCRIPTS/mpi_job.sh" --user user8 --risk 0.05 --json -- --time=1440
expect_eq "a 24 h request is cut" "$(json_get "$OUT" 'd["targets"]["runtime"]["suggested_request"] < 86400')" True
expect_eq "at more than 5 % for this job" "$(json_get "$OUT" '0.075 < d["targets"]["runtime"]["job_risk"] < 0.5')" True
expect_eq "and says why" \
  "$(json_get "$OUT" 'any("a share of all jobs" in n for n in d["notes"])')" True
run_rs predict "$SCRIPTS/mpi_job.sh" --user user8 --risk 0.05 --per-job-risk --json -- --time=1440
expect_eq "--per-job-risk bounds this job's own chance" \
  "$(json_get "$OUT" 'd["per_job_risk"] and d["targets"]["runtime"]["job_risk"] <= 0.05')" True
expect_eq "with no note about a share" \
  "$(json_get "$OUT" 'any("a share of all jobs" in n for n in d["notes"])')" False

# The partitions, from saved sinfo output: a script without -p runs in the default one, and a
# GPU request without a type gets the partition's GPUs.
printf 'batch*|120|28|125000|(null)\ngpu|4|48|500000|gpu:a100:4(S:0-1)\n' >"$WORK/sinfo.txt"
run_rs ingest sinfo "$WORK/sinfo.txt" --cluster hpc2n
expect_eq "ingest sinfo" "$RC" 0
expect_contains "lists the default partition" "$OUT" "partition batch (default): 120 nodes of 28 cores"
printf '#!/bin/bash\n#SBATCH -n 4\n#SBATCH -t 1:00:00\nsrun ./a.out\n' >"$WORK/nop.sh"
run_rs predict "$WORK/nop.sh" --user user8
expect_contains "a script without -p is read in the default partition" "$OUT" "the cluster's default, batch"
run_rs predict "$SCRIPTS/mpi_job.sh" --user user8
if grep -q "the cluster's default" <<<"$OUT"; then fail "a script with -p is read in the default"
else pass "a script with -p is read in its own partition"; fi
printf 'batch*|120|many|125000|(null)\n' >"$WORK/bad_sinfo.txt"
run_rs ingest sinfo "$WORK/bad_sinfo.txt" --cluster hpc2n
expect_eq "bad sinfo output" "$RC" 2
expect_contains "names the line and field" "$ERR" "bad_sinfo.txt:1: CPUs per node (%c) is \"many\""

# A new user still gets an answer, and is told it is less certain.
run_rs predict "$SCRIPTS/mpi_job.sh" --user nobody-here
expect_eq "new user exits 0" "$RC" 0
expect_contains "new user is told" "$OUT" "has no finished jobs"
run_rs predict "$SCRIPTS/mpi_job.sh" --user nobody-here --json
expect_eq "new user's history" "$(json_get "$OUT" 'd["targets"]["runtime"]["history"]')" none
# HPC2N's held-out weeks hold two new users, too few to bound a new user's p90; the older weeks'
# new users, each predicted by trees that never saw them, bound it: wider than a known user's.
expect_eq "train calibrates new users' intervals on enough users to bound a p90" \
  "$(json_get "$TRAIN_JSON" 'd["models"][0]["targets"]["runtime"]["interval_evidence"]["none"]["users"] >= 9')" True
# Well-known users' requests are cut on more jobs than the held-out ones.
expect_eq "train cuts well-known users' requests on older jobs' errors too" \
  "$(json_get "$TRAIN_JSON" 'd["models"][0]["targets"]["runtime"]["interval_evidence"]["much"]["request_jobs"] > 2 * d["models"][0]["targets"]["runtime"]["interval_evidence"]["much"]["jobs"]')" True
NEW_JSON=$OUT
run_rs predict "$SCRIPTS/mpi_job.sh" --user user8 --json
expect_eq "a new user's p90 is bounded, its interval wider than a known user's" \
  "$(python3 -c 'import json, sys
n, k = (json.loads(a)["targets"]["runtime"] for a in sys.argv[1:])
print(n["p90"] is not None and n["p90"] / n["p10"] > k["p90"] / k["p10"])' "$NEW_JSON" "$OUT")" True

# A job run 60 times with steady use (sacct, as the SLURM tests ingest it), submitted again as
# a script: predicted near its past use, under its request, and its user is not called new.
(
  export RIGHTSIZE_DB=$WORK/repeated.db
  python3 "$TESTDIR/integration/slurm/make_history.py" rstest root rs_work 60 310 1.9 20 >"$WORK/h.psv"
  "$RS" ingest sacct "$WORK/h.psv" >/dev/null && "$RS" train >/dev/null
  printf '#!/bin/bash\n#SBATCH -J rs_work\n#SBATCH --mem=2G\n#SBATCH -c 2\n#SBATCH -t 60\nsleep 1\n' >"$WORK/work.sbatch"
  "$RS" predict "$WORK/work.sbatch" --user root --cluster rstest --risk 0.05 --json >"$WORK/repeated.json"
)
OUT=$(cat "$WORK/repeated.json")
expect_eq "repeated job: memory p50 within 10% of the 310 MiB it used" \
  "$(json_get "$OUT" 'abs(d["targets"]["peak_memory"]["p50"] / (310 * 2**20) - 1) < 0.1')" True
expect_eq "repeated job: p90 and suggestion cover the use, under the 2 GiB request" \
  "$(json_get "$OUT" '310 * 2**20 <= d["targets"]["peak_memory"]["p90"] <= d["targets"]["peak_memory"]["suggested_request"] < 2 * 2**30')" True
expect_eq "repeated job: run time p50 within 20% of its 20 s" \
  "$(json_get "$OUT" 'abs(d["targets"]["runtime"]["p50"] / 20 - 1) < 0.2')" True
expect_eq "repeated job: the user is not called new" \
  "$(json_get "$OUT" 'any("has no finished jobs" in n for n in d["notes"])')" False

# Jobs that suddenly run three times as long as they used to: the next `train` finds that the
# previous model's requests at a 5 % risk would have killed most of them, and lowers the risk
# its own requests are made at; `predict` says so.
python3 - "$WORK/steady.swf" "$WORK/longer.swf" <<'PY'
import random, sys
random.seed(3)
for path, first, factor in ((sys.argv[1], 0, 1.0), (sys.argv[2], 1000, 3.0)):
    with open(path, "w") as f:
        f.write("; MaxProcs: 64\n")
        for i in range(first, first + 1000):
            u = i % 20
            typical = 600 * (1 + u % 5)
            run = min(int(typical * random.lognormvariate(0, 0.3) * factor), 4 * typical)
            f.write("%d %d 0 %d 4 -1 -1 4 %d -1 1 %d 1 %d 1 1 -1 -1\n"
                    % (i + 1, 1600000000 + 600 * i, run, 4 * typical, u + 1, u % 7 + 1))
PY
(
  export RIGHTSIZE_DB=$WORK/drift.db
  "$RS" ingest swf "$WORK/steady.swf" --cluster drift >/dev/null
  "$RS" train --json >"$WORK/train1.json"
  "$RS" ingest swf "$WORK/longer.swf" --cluster drift >/dev/null
  "$RS" train --json >"$WORK/train2.json"
  printf '#!/bin/bash\n#SBATCH -n 4\n#SBATCH -t 2:40:00\nsrun ./a.out\n' >"$WORK/drift.sh"
  "$RS" predict "$WORK/drift.sh" --user user2 --risk 0.05 --json >"$WORK/drift.json"
)
expect_eq "first model: requests at the risk asked for" \
  "$(json_get "$(cat "$WORK/train1.json")" 'd["models"][0]["targets"]["runtime"]["risk_factors"]["0.05"]')" 1.0
expect_eq "after the jobs grew: requests at a lower risk than asked" \
  "$(json_get "$(cat "$WORK/train2.json")" 'd["models"][0]["targets"]["runtime"]["risk_factors"]["0.05"] < 0.5')" True
OUT=$(cat "$WORK/drift.json")
expect_eq "predict makes the request at the lower risk" \
  "$(json_get "$OUT" 'd["targets"]["runtime"]["risk_used"] < 0.025')" True
expect_eq "and says why" \
  "$(json_get "$OUT" 'any("outgrew their suggested requests more often" in n for n in d["notes"])')" True

# A user with more finished jobs than predict reads (2,500): it reads the newest, says so, and
# still predicts from them (their runs were 20 minutes, the older ones 2 hours).
python3 - "$WORK/busy.swf" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("; MaxProcs: 64\n")
    for i in range(3000):
        run = 7200 if i < 400 else 1200
        f.write("%d %d 0 %d 4 -1 -1 4 14400 -1 1 1 1 1 1 1 -1 -1\n" % (i + 1, 1600000000 + 600 * i, run))
PY
(
  export RIGHTSIZE_DB=$WORK/busy.db
  "$RS" ingest swf "$WORK/busy.swf" --cluster busy >/dev/null && "$RS" train >/dev/null
  printf '#!/bin/bash\n#SBATCH -n 4\n#SBATCH -t 4:00:00\n#SBATCH -J exe1\nsrun ./a.out\n' >"$WORK/busy.sh"
  "$RS" predict "$WORK/busy.sh" --user user1 --json >"$WORK/busy.json"
)
OUT=$(cat "$WORK/busy.json")
expect_eq "a busy user's history is read from its newest 2,500 jobs, and predict says so" \
  "$(json_get "$OUT" 'any("user user1 has more than 2,500 finished jobs" in n for n in d["notes"])')" True
expect_eq "and predicts from them: the median near their 20 minutes" \
  "$(json_get "$OUT" 'abs(d["targets"]["runtime"]["p50"] / 1200 - 1) < 0.2')" True

# A target with too few jobs for a model (peak memory measured for 34 of 100 jobs, 60 needed,
# all ann's; the second job is carl's, without a peak):
# train names the baseline predict answers with instead, the one closest on those 34 jobs.
# The user's peaks are 2 GiB three times, then 8 GiB: the mean of them all (116/34 GiB) beats
# the last two, the 16 GiB request and VPA's upper bound.
python3 - "$WORK/mem.psv" <<'PY'
import sys, time
fmt = "%Y-%m-%dT%H:%M:%S"
with open(sys.argv[1], "w") as f:
    f.write("JobID|User|JobName|State|Submit|Start|End|Elapsed|Timelimit|NCPUS|ReqMem|TotalCPU|MaxRSS\n")
    for i in range(100):
        start = 1600000000 + 3600 * i
        peak = ("%dK" % ((8 if (i // 3) % 4 == 3 else 2) * 2**20)) if i % 3 == 0 else ""
        f.write("%d|%s|fit|COMPLETED|%s|%s|%s|00:20:00|01:00:00|2|16G|00:36:00|%s\n" % (
            i + 1, "carl" if i == 1 else "ann", time.strftime(fmt, time.gmtime(start - 5)), time.strftime(fmt, time.gmtime(start)),
            time.strftime(fmt, time.gmtime(start + 1200)), peak))
PY
(
  export RIGHTSIZE_DB=$WORK/mem.db TZ=UTC
  "$RS" ingest sacct "$WORK/mem.psv" --cluster mem >/dev/null
  "$RS" train >"$WORK/mem_train.txt"
  printf '#!/bin/bash\n#SBATCH -J fit\n#SBATCH --mem=16G\n#SBATCH -c 2\n#SBATCH -t 60\n./fit\n' >"$WORK/fit.sh"
  "$RS" predict "$WORK/fit.sh" --user ann --cluster mem --json >"$WORK/mem.json"
)
expect_contains "train names the baseline a target without a model answers with" \
  "$(cat "$WORK/mem_train.txt")" "peak_memory  not trained: peak_memory: 34 jobs with a value, 60 needed to train; predict answers with the user_mean baseline"
OUT=$(cat "$WORK/mem.json")
expect_eq "predict answers with it" "$(json_get "$OUT" 'd["targets"]["peak_memory"]["source"]')" baseline:user_mean
expect_eq "the user's mean peak, 116/34 GiB" \
  "$(json_get "$OUT" 'abs(d["targets"]["peak_memory"]["p50"] / (116 / 34 * 2**30) - 1) < 0.001')" True
expect_eq "and says so" \
  "$(json_get "$OUT" 'any("peak_memory: too few finished jobs for a model yet; p50 is the user_mean baseline" in n for n in d["notes"])')" True
# The cluster has had two users: a third one's run time cannot be bounded from two new users'
# errors, and predict says so rather than borrow the narrow ones of ann's many jobs.
(
  export RIGHTSIZE_DB=$WORK/mem.db TZ=UTC
  "$RS" predict "$WORK/fit.sh" --user bob --cluster mem --json >"$WORK/bob.json"
  "$RS" predict "$WORK/fit.sh" --user bob --cluster mem >"$WORK/bob.txt"
)
OUT=$(cat "$WORK/bob.json")
expect_eq "new user's p90 is unbounded (null)" "$(json_get "$OUT" 'd["targets"]["runtime"]["p90"]')" None
expect_eq "and the note says why" \
  "$(json_get "$OUT" 'any("runtime: p90 is unbounded: too few users the cluster had not seen before" in n for n in d["notes"])')" True
expect_contains "the text shows it unbounded" "$(cat "$WORK/bob.txt")" "unbounded"

# Bad input: a binary file is a clear error; bad values are warnings with line numbers.
run_rs predict "$SCRIPTS/binary.bin"
expect_eq "binary script exits 2" "$RC" 2
expect_contains "binary script named" "$ERR" "binary.bin"
run_rs predict "$SCRIPTS/bad_values.sh" --user user8 --json
expect_eq "bad values still predict" "$RC" 0
expect_eq "warnings carry line numbers" "$(json_get "$OUT" 'all(w["line"] > 0 for w in d["warnings"]) and len(d["warnings"]) > 0')" True
run_rs predict "$WORK/missing.sh"
expect_eq "missing script exits non-zero" "$([ "$RC" -ne 0 ] && echo yes)" yes

# eval: the replay prints the model beside every baseline.
run_rs eval --trace "$TRACE" --retrain-every 14d --json
expect_eq "eval exits 0" "$RC" 0
for k in 'd["targets"]["runtime"]["model"]["mae"]' 'd["targets"]["runtime"]["model"]["coverage80"]' \
         'd["targets"]["runtime"]["baselines"]["last2"]["aea"]' 'd["targets"]["runtime"]["baselines"]["request"]["underestimation"]' \
         'd["targets"]["runtime"]["baselines"]["user_mean"]["mae"]' 'd["targets"]["runtime"]["saving_curve"][0]["last2_killed"]'; do
  expect_eq "eval has $k" "$(json_get "$OUT" "$k is not None")" True
done
expect_eq "the risk correction moves every hour between retrains" "$(json_get "$OUT" 'd["correct_every_s"]')" 3600
expect_eq "four kill risks" "$(json_get "$OUT" '[c["risk"] for c in d["targets"]["runtime"]["saving_curve"]]')" "[0.005, 0.01, 0.02, 0.05]"
# Coverage per history group: the groups' jobs add up to the jobs with an interval, and the
# coverage of all is their weighted mean.
expect_eq "coverage per history group adds up" "$(json_get "$OUT" '
(lambda m: abs(sum(g["n"] * g["coverage80"] for g in m["by_history"]) / sum(g["n"] for g in m["by_history"]) - m["coverage80"]) < 1e-9
 and [g["history"] for g in m["by_history"]] == ["none", "some", "much"])(d["targets"]["runtime"]["model"])')" True
# --jobs: every scored job, one JSON object a line; the document's scores are the lines', and
# each line's job is the trace's (check_eval_jobs.py).
CHECK_JOBS=$TESTDIR/cli/check_eval_jobs.py
run_rs eval --trace "$TRACE" --retrain-every 14d --json --jobs "$WORK/jobs.jsonl"
expect_eq "eval --jobs exits 0" "$RC" 0
printf '%s' "$OUT" >"$WORK/eval.json"
expect_eq "every scored job is a line with the scores of the document" \
  "$(python3 "$CHECK_JOBS" "$WORK/eval.json" "$WORK/jobs.jsonl" "$TRACE")" ok
# The trace's first 400 jobs: the first scored ones come before any model, from a baseline.
zcat "$TRACE" | awk '/^;/ { print; next } n++ < 400' | gzip >"$WORK/first400.swf.gz"
run_rs eval --trace "$WORK/first400.swf.gz" --format swf --retrain-every 1d --test-fraction 0.9 \
  --json --jobs "$WORK/jobs400.jsonl"
printf '%s' "$OUT" >"$WORK/eval400.json"
expect_eq "jobs answered before any model are lines too, named by their baseline" \
  "$(json_get "$OUT" 'd["targets"]["runtime"]["fallback_jobs"] > 0'):$(python3 "$CHECK_JOBS" \
     "$WORK/eval400.json" "$WORK/jobs400.jsonl" "$WORK/first400.swf.gz")" True:ok
run_rs eval --trace "$TRACE" --retrain-every 14d --jobs "$WORK/no/such/dir/jobs.jsonl"
expect_eq "an unwritable --jobs file fails" "$([ "$RC" -ne 0 ] && echo yes)" yes
expect_contains "and names it" "$ERR" "no/such/dir/jobs.jsonl"
# A user name that is not UTF-8 (Latin-1 "é"): written with a replacement character, not a crash.
PHILLIPS=$TESTDIR/data/sacct/sites/ub-ccr-phillips_slurm-2016-12-2017-01.psv.gz
zcat "$PHILLIPS" | sed "\$s/|[^|]*|\([0-9]*\)|201/|nor$(printf '\351')r|\1|201/" >"$WORK/latin1.psv"
run_rs eval --trace "$WORK/latin1.psv" --format sacct --jobs "$WORK/latin1.jsonl"
expect_eq "a Latin-1 user name does not stop --jobs" \
  "$RC:$(grep -q "\"user\":\"nor$(printf '\357\277\275')r\"" "$WORK/latin1.jsonl" && echo written)" "0:written"
run_rs predict "$SCRIPTS/mpi_job.sh" --user "nor$(printf '\351')r" --json
expect_eq "predict --json for a Latin-1 user name is JSON" \
  "$RC:$(json_get "$OUT" 'ascii(d["user"])')" "0:'nor\ufffdr'"
echo kept >"$WORK/kept.jsonl"
run_rs eval --trace "$SCRIPTS/mpi_job.sh" --format swf --jobs "$WORK/kept.jsonl"
expect_eq "a replay that fails leaves an earlier --jobs file as it was" \
  "$RC:$(cat "$WORK/kept.jsonl"):$(ls "$WORK" | grep -c partial || true)" "2:kept:0"
run_rs eval --store --retrain-every 14d
expect_eq "eval --store exits 0" "$RC" 0
expect_contains "text says how often the correction moves" "$OUT" "risk correction every 01:00:00"
expect_contains "text names the baselines" "$OUT" "last2"
expect_contains "text gives coverage per history group" "$OUT" "by the user's past jobs of this target: none"
run_rs eval
expect_eq "eval without input is a usage error" "$RC" 1
run_rs eval --trace "$SCRIPTS/mpi_job.sh" --format swf
expect_eq "eval of a non-trace exits 2" "$RC" 2
finish
