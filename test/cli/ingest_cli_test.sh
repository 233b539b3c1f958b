#!/usr/bin/env bash
# Whole-program tests of `rightsize ingest`: real files in, what a user sees out.
set -euo pipefail
source "$(dirname "$0")/lib.sh" "$@"
KTH=$TESTDIR/data/swf/KTH-SP2-1996-2.1-cln.swf.gz
SLURM22=$TESTDIR/data/sacct/slurm22/mixed.psv

# SWF: every record lands, and a second ingest does not duplicate.
run_rs ingest swf "$KTH" --json
expect_eq "swf ingest exit" "$RC" 0
expect_eq "swf records stored" "$(json_get "$OUT" 'd["stored"]')" 28489
run_rs ingest swf "$KTH"
expect_contains "human summary" "$OUT" "28,489 jobs stored in cluster 'KTH-SP2-1996-2.1-cln'"
run_rs report --json
expect_eq "re-ingest does not duplicate" "$(json_get "$OUT" 'd["jobs"]')" 28489
expect_eq "header kept as metadata" \
  "$(sqlite3 "$RIGHTSIZE_DB" "select value from cluster_meta where key='swf.MaxProcs'")" 100

# sacct from a real SLURM 22.05: steps merged into jobs.
run_rs ingest sacct "$SLURM22" --cluster lab
expect_eq "sacct ingest exit" "$RC" 0
expect_contains "sacct summary" "$OUT" "10 jobs stored in cluster 'lab'"
# Without --cluster, sacct's Cluster column names where the jobs go, and the summary says so.
printf 'JobID|JobIDRaw|Cluster|User|JobName|State|Submit|Start|End|Elapsed|Timelimit|NCPUS|ReqMem\n%s\n%s\n' \
  '7|7|north|alice|a|COMPLETED|2026-12-04T10:00:00|2026-12-04T10:00:01|2026-12-04T10:00:06|00:00:05|01:00:00|1|1G' \
  '8|8|south|bob|b|FAILED|2026-12-04T10:00:00|2026-12-04T10:00:01|2026-12-04T10:00:09|00:00:08|01:00:00|1|1G' \
  >"$WORK/two_clusters.psv"
run_rs --db "$WORK/two.db" ingest sacct "$WORK/two_clusters.psv"
expect_contains "the summary names the clusters the jobs went to" "$OUT" \
  "2 jobs stored in clusters 'north', 'south'"
run_rs --db "$WORK/two.db" ingest sacct "$WORK/two_clusters.psv" --json
expect_eq "and the JSON lists them" "$(json_get "$OUT" 'd["files"][0]["clusters"]')" "['north', 'south']"
run_rs job 2 --cluster lab --json
expect_eq "job card exit" "$RC" 0
expect_eq "peak memory from the batch step" "$(json_get "$OUT" 'd["job"]["usage"]["peak_memory_bytes"]')" \
  $((214496 * 1024))

# stdin, another delimiter, no header: the same jobs.
COLS=$(head -1 "$SLURM22" | tr '|' ',')
run_rs --db "$WORK/b.db" ingest sacct - --delimiter ';' --columns "$COLS" --cluster lab \
  --json <"$TESTDIR/data/sacct/slurm22/mixed-noheader-semicolon.txt"
expect_eq "stdin ingest" "$(json_get "$OUT" 'd["stored"]')" 10

# --print-format is what ingest slurm asks sacct for.
run_rs ingest sacct --print-format
expect_contains "print-format" "$OUT" "JobID,JobIDRaw,Cluster"

# A malformed line is reported with file, line and field, skipped and counted.
BAD=$WORK/bad.psv
printf 'JobID|State|Elapsed|MaxRSS\n1|COMPLETED|00:01:00|\n2|COMPLETED|00:01:00|12X\n3|COMPLETED|00:02:00|\n' >"$BAD"
run_rs --db "$WORK/c.db" ingest sacct "$BAD" --cluster x
expect_eq "bad line does not stop the batch" "$RC" 0
expect_contains "error names file line field" "$ERR" "$BAD:3: field MaxRSS: expected a memory size like 4000M, 4G or 2.50T, got '12X'"
expect_contains "summary counts skipped" "$OUT" "2 jobs stored in cluster 'x', 1 malformed lines skipped"
run_rs --db "$WORK/c.db" ingest sacct "$BAD" --cluster x --strict
expect_eq "--strict fails with exit 2" "$RC" 2
expect_contains "--strict says why" "$ERR" "--strict stops at the first error"

# An over-long line is one skipped line, not the end of the file.
{ echo "1 0 0 10 1 -1 -1 1 60 -1 1 1 1 -1 -1 -1 -1 -1"; head -c 3000000 /dev/zero | tr '\0' 'x'; echo
  echo "2 0 0 10 1 -1 -1 1 60 -1 1 1 1 -1 -1 -1 -1 -1"; } >"$WORK/long.swf"
run_rs --db "$WORK/l.db" ingest swf "$WORK/long.swf"
expect_eq "over-long line exit" "$RC" 0
expect_contains "over-long line reported" "$ERR" "$WORK/long.swf:2: line longer than 1 MiB"
expect_contains "lines around it stored" "$OUT" "2 jobs stored"

# ClusterCockpit job tables (data/usage/): every job lands under its own cluster, with notes on
# what was left unknown.
CC=$SRCDIR/data/usage/clustercockpit
run_rs --db "$WORK/cc.db" ingest clustercockpit "$CC/fau-alex-fritz-2023-02_jobs.csv.gz" \
  "$CC/fau-emmy-woody-2020_jobs.csv.gz" --json
expect_eq "clustercockpit ingest exit" "$RC" 0
expect_eq "clustercockpit jobs stored" "$(json_get "$OUT" 'd["stored"]')" $((544 + 4689))
expect_contains "clustercockpit notes" "$(json_get "$OUT" 'd["files"][1]["notes"]')" \
  "2,721 rows flagged is_running = 1"
expect_eq "clustercockpit clusters" \
  "$(sqlite3 "$WORK/cc.db" "select group_concat(c) from (select cluster || ':' || count(*) as c
     from jobs group by cluster order by cluster)")" "alex:303,emmy:2780,fritz:241,woody:1909"
run_rs --db "$WORK/cc.db" job 679784 --cluster alex --json
expect_eq "GPU memory read as MiB" \
  "$(json_get "$OUT" 'd["job"]["usage"]["peak_gpu_memory_bytes"]')" 671994301383
printf 'job_id,cluster,duration_s\n1,x,60\n2,x,1 min\n3,x,60\n' >"$WORK/bad.csv"
run_rs --db "$WORK/cc2.db" ingest clustercockpit "$WORK/bad.csv"
expect_contains "clustercockpit error names file line field" "$ERR" \
  "$WORK/bad.csv:3: field duration_s: expected a number of seconds, got '1 min'"
expect_contains "clustercockpit good rows land" "$OUT" "2 jobs stored"

# Files that are not accounting at all.
: >"$WORK/empty.psv"
run_rs --db "$WORK/d.db" ingest sacct "$WORK/empty.psv"
expect_eq "empty file exit" "$RC" 2
expect_contains "empty file message" "$ERR" "the file is empty"
head -1 "$SLURM22" >"$WORK/header.psv"
run_rs --db "$WORK/d.db" ingest sacct "$WORK/header.psv"
expect_eq "header-only exit" "$RC" 2
expect_contains "header-only message" "$ERR" "no job records"
run_rs --db "$WORK/d.db" ingest swf "$RS"
expect_eq "binary file exit" "$RC" 2
expect_contains "binary file message" "$ERR" "binary data"
run_rs --db "$WORK/d.db" ingest swf "$WORK/does-not-exist.swf"
expect_eq "missing file exit" "$RC" 2
expect_contains "missing file message" "$ERR" "No such file or directory"

# A truncated gzip: a clear error, and the records before the cut are kept.
zcat "$KTH" | gzip -1 >"$WORK/whole.swf.gz"
head -c 60000 "$WORK/whole.swf.gz" >"$WORK/cut.swf.gz"
run_rs --db "$WORK/e.db" ingest swf "$WORK/cut.swf.gz" --json
expect_eq "truncated gzip exit" "$RC" 2
expect_contains "truncated gzip message" "$(json_get "$OUT" 'd["files"][0]["error"]')" "truncated"
kept=$(sqlite3 "$WORK/e.db" "select count(*) from jobs")
if [ "$kept" -gt 1000 ]; then pass "records before the cut are stored ($kept)"; else fail "kept $kept"; fi

# A 2 GB file of binary zeros: refused quickly, in bounded memory.
truncate -s 2G "$WORK/huge.swf"
rss_kb=$(python3 -c '
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.stderr.strip()[:200])
' "$RS" --db "$WORK/f.db" ingest swf "$WORK/huge.swf")
expect_eq "2 GB binary file exit" "$(cut -d' ' -f1 <<<"$rss_kb")" 2
expect_contains "2 GB binary message" "$rss_kb" "binary data"
if [ "$(cut -d' ' -f2 <<<"$rss_kb")" -lt 200000 ]; then pass "2 GB file read in bounded memory"; else
  fail "max RSS $(cut -d' ' -f2 <<<"$rss_kb") KB"; fi
rm -f "$WORK/huge.swf"

# A progress bar on a terminal (script(1) gives the command one), none when piped.
script -qec "$RS --db $WORK/g.db ingest swf $KTH" "$WORK/tty.log" >/dev/null
expect_contains "progress bar on a terminal" "$(cat "$WORK/tty.log")" "] 100%"
run_rs --db "$WORK/g2.db" ingest swf "$KTH"
if grep -q '\[#' <<<"$ERR"; then fail "progress bar drawn into a pipe"; else pass "no progress bar when piped"; fi

# Runs with their code: `run --script` reads the job script's code (test/data/code), and
# `ingest runs` stores each run's record with its script's facts, read again from --code-root,
# and the script's request where the record has none.
mkdir -p "$WORK/runs/a" "$WORK/runs/b"
for r in a b; do cp "$SRCDIR/test/data/code/text_classifier/train.py" "$WORK/runs/$r/"; done
printf '#!/bin/bash\n#SBATCH -J tc\npython train.py --batch_size 8\n' >"$WORK/runs/a/job.sbatch"
printf '#!/bin/bash\n#SBATCH -J tc\n#SBATCH --time=00:30:00\n#SBATCH --mem=4G\npython train.py --batch_size 16\n' \
  >"$WORK/runs/b/job.sbatch"
run_rs run --json --no-cgroup --script "$WORK/runs/a/job.sbatch" -- true
DOC=$(sed -n '/^{/,$p' <<<"$OUT")
expect_eq "run --json: the script's batch size" \
  "$(json_get "$DOC" 'd["code"]["facts"]["facts"]["batch_size"]["value"]')" 8
expect_eq "run --json: the program" "$(json_get "$DOC" 'd["code"]["program"]')" train.py
python3 - "$DOC" >"$WORK/runs.jsonl" <<'PY'
import json, sys
doc = json.loads(sys.argv[1])
for k, run in enumerate(("a", "b")):
    d = dict(doc)
    d["record"] = dict(doc["job"], job_id=f"r{k}", cluster="corpus",
                       request=dict(doc["job"]["request"], user="u1", job_name="tc"))
    d["corpus"] = {"id": f"r{k}", "script": f"{run}/job.sbatch", "change_kind": "batch"}
    print(json.dumps(d))
print("{not json")
PY
run_rs --db "$WORK/runs.db" ingest runs "$WORK/runs.jsonl" --code-root "$WORK/runs"
expect_eq "ingest runs exit" "$RC" 0
expect_contains "ingest runs summary" "$OUT" "ingested 2 runs (2 with their code's facts"
expect_contains "malformed line named" "$ERR" "runs.jsonl:3:"
stored=$(python3 -c "
import json, sqlite3
db = sqlite3.connect('$WORK/runs.db')
for job, program, facts in db.execute('SELECT job_id, program, facts FROM job_code ORDER BY job_id'):
    print(job, program, json.loads(facts)['facts']['batch_size']['value'])")
expect_eq "each run's own facts stored" "$stored" "r0 train.py 8
r1 train.py 16"
requests=$(python3 -c "
import sqlite3
db = sqlite3.connect('$WORK/runs.db')
for row in db.execute('SELECT job_id, time_limit_s, req_mem_bytes FROM jobs ORDER BY job_id'):
    print(*row)")
expect_eq "each run's script's request stored" "$requests" "r0 None None
r1 1800 4294967296"
run_rs --db "$WORK/runs2.db" ingest runs "$WORK/runs.jsonl" --code-root "$WORK/runs" --strict
expect_eq "ingest runs --strict exit" "$RC" 2
# Compressed, as a corpus of thousands of runs is kept: the same runs, the same bad line named.
gzip -c "$WORK/runs.jsonl" >"$WORK/runs.jsonl.gz"
run_rs --db "$WORK/runs3.db" ingest runs "$WORK/runs.jsonl.gz" --code-root "$WORK/runs"
expect_eq "ingest runs .gz exit" "$RC" 0
expect_contains "ingest runs .gz summary" "$OUT" "ingested 2 runs (2 with their code's facts"
expect_contains "malformed line named in the .gz" "$ERR" "runs.jsonl.gz:3:"

# Usage errors exit 1.
run_rs ingest
expect_eq "missing subcommand exit" "$RC" 1
run_rs report --format pdf
expect_eq "bad option value exit" "$RC" 1

finish
