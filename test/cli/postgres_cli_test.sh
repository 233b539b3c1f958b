#!/usr/bin/env bash
# A user's path on PostgreSQL (--db postgresql://…): ingest real traces, report, train and
# predict, and `rightsize serve` answering the job list and storing a real agent's telemetry, on a
# real PostgreSQL 15 the test starts (test/cli/postgres.sh). Exit 77 (skipped) only where
# postgresql-15 is not installed.
set -euo pipefail
source "$(dirname "$0")/lib.sh" "$@"
source "$(dirname "$0")/postgres.sh"
set +e
pg_start
rc=$?
set -e
[ "$rc" -eq 0 ] || exit "$rc"
trap 'pg_stop; rm -rf "$WORK"' EXIT
export RIGHTSIZE_DB=$RIGHTSIZE_PG_URL
KTH=$TESTDIR/data/swf/KTH-SP2-1996-2.1-cln.swf.gz
SLURM22=$TESTDIR/data/sacct/slurm22/mixed.psv
HPC2N=$SRCDIR/data/traces/HPC2N-excerpt-alea.swf.gz
SCRIPTS=$TESTDIR/data/scripts

# --- ingest: every record lands once, the header is kept ---
run_rs ingest swf "$KTH" --json
expect_eq "swf ingest into PostgreSQL exits 0" "$RC" 0
expect_eq "swf records stored" "$(json_get "$OUT" 'd["stored"]')" 28489
run_rs ingest swf "$KTH"
expect_contains "the summary" "$OUT" "28,489 jobs stored in cluster 'KTH-SP2-1996-2.1-cln'"
expect_eq "re-ingest does not duplicate" "$(pg_psql 'select count(*) from jobs')" 28489
expect_eq "the SWF header is kept as metadata" \
  "$(pg_psql "select value from cluster_meta where key='swf.MaxProcs'")" 100
run_rs ingest sacct "$SLURM22" --cluster lab
expect_eq "sacct ingest exits 0" "$RC" 0
expect_contains "sacct summary" "$OUT" "10 jobs stored in cluster 'lab'"

# --- a large file is a bulk load, split over several connections: two at once, then again ---
zcat "$KTH" >"$WORK/kth.swf"
"$RS" ingest swf "$WORK/kth.swf" --cluster bulk >"$WORK/bulk.out" 2>&1 &
FIRST=$!
run_rs ingest swf "$WORK/kth.swf" --cluster bulk
wait "$FIRST" && FIRST_RC=0 || FIRST_RC=$?
expect_eq "two ingests of one large file at once both succeed" "$RC $FIRST_RC" "0 0"
run_rs ingest swf "$WORK/kth.swf" --cluster bulk
expect_contains "a large file again replaces its jobs" "$OUT" "(0 new, 28,489 replaced"
expect_eq "each job of the large file is stored once" \
  "$(pg_psql "select count(*), count(distinct job_id) from jobs where cluster='bulk'")" "28489|28489"

# --- report ---
run_rs report --json --cluster KTH-SP2-1996-2.1-cln
expect_eq "report exits 0" "$RC" 0
expect_eq "report counts the cluster's jobs" "$(json_get "$OUT" 'd["jobs"]')" 28489
run_rs report --cluster lab
expect_eq "text report exits 0" "$RC" 0
expect_contains "the text report names the cluster" "$OUT" "lab"

# --- train and predict ---
run_rs ingest swf "$HPC2N" --cluster hpc2n
expect_eq "ingest HPC2N" "$RC" 0
run_rs train --cluster hpc2n
expect_eq "train exits 0" "$RC" 0
expect_contains "train names the version" "$OUT" "cluster hpc2n: model version 1 from 3,170 jobs"
run_rs predict "$SCRIPTS/mpi_job.sh" --user user8 --cluster hpc2n --json
expect_eq "predict exits 0" "$RC" 0
expect_eq "the stored model answers" "$(json_get "$OUT" 'd["targets"]["runtime"]["source"]')" model
expect_eq "model version 1" "$(json_get "$OUT" 'd["model"]["version"]')" 1
expect_eq "the model is in PostgreSQL" "$(pg_psql "select count(*) from models where cluster='hpc2n'")" 1

# --- serve: the API on PostgreSQL, and a real agent's telemetry ---
cat >"$WORK/config.json" <<'JSON'
{"agent_tokens": ["agent-secret"], "user_tokens": {"ops-token": "ops"}, "admins": ["ops"]}
JSON
"$RS" serve --listen 127.0.0.1:0 --config "$WORK/config.json" >"$WORK/serve.out" 2>"$WORK/serve.err" &
SERVER=$!
PORT=""
for _ in $(seq 1 100); do
  PORT=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$WORK/serve.out" | cut -d: -f2 || true)
  [ -n "$PORT" ] && break
  sleep 0.1
done
[ -n "$PORT" ] || { fail "serve did not start: $(cat "$WORK/serve.err")"; finish; }
URL=http://127.0.0.1:$PORT
OPS=(-H 'Authorization: Bearer ops-token')
BODY=$(curl -s "${OPS[@]}" "$URL/api/v1/jobs?cluster=lab&limit=4")
expect_eq "the job list pages lab's jobs" "$(json_get "$BODY" 'len(d["jobs"])')" 4
NEXT=$(json_get "$BODY" 'd["next_cursor"]')
BODY=$(curl -s "${OPS[@]}" "$URL/api/v1/jobs?cluster=lab&limit=4&cursor=$NEXT")
expect_eq "its second page" "$(json_get "$BODY" 'len(d["jobs"])')" 4

SLURM_JOB_ID=9001 SLURM_JOB_USER=alice SLURM_JOB_NAME=wait sleep 60 &
job=$!
"$RS" agent --server "$URL" --token agent-secret --cluster c1 --interval 0.5 --ship-interval 1 \
  --spool "$WORK/spool" 2>"$WORK/agent.err" &
agent=$!
seen=""
for _ in $(seq 1 60); do
  BODY=$(curl -s "${OPS[@]}" "$URL/api/v1/jobs/c1/9001/series?metric=cpu_cores")
  if [ "$(json_get "$BODY" "len(d.get('series', {}).get('cpu_cores', []))" 2>/dev/null || echo 0)" -ge 2 ]; then
    seen=yes
    break
  fi
  sleep 0.5
done
expect_eq "the agent's samples reach the server and come back" "$seen" yes
BODY=$(curl -s "${OPS[@]}" "$URL/api/v1/jobs/c1/9001")
expect_contains "the running job's card" "$BODY" '"state":"RUNNING"'
expect_eq "its samples are in PostgreSQL" \
  "$(pg_psql "select count(*) > 0 from series_chunks where job_id='9001'")" t
expect_eq "the agent's last batch is counted" "$(pg_psql "select last_seq > 0 from agents")" t
kill "$agent" "$job" 2>/dev/null || true
wait "$agent" "$job" 2>/dev/null || true
kill "$SERVER"
wait "$SERVER" 2>/dev/null || true

# --- a database that cannot be reached: a clear error without the password ---
run_rs --db "postgresql://postgres:hunter2@127.0.0.1:1/none" report
expect_eq "an unreachable database exits non-zero" "$([ "$RC" -ne 0 ] && echo yes)" yes
expect_contains "the error names the URL" "$ERR" "postgresql://postgres:***@127.0.0.1:1/none"
expect_eq "but not the password" "$(grep -c hunter2 <<<"$ERR" || true)" 0
finish
