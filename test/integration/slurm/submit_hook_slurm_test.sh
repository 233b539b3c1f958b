#!/usr/bin/env bash
# rightsize at submission and while jobs run, on a real SLURM 22.05 cluster (default mode:
# proctrack/linuxproc, so the agent finds jobs by SLURM_JOB_ID in their environment):
#   - deploy/slurm/job_submit.lua inside slurmctld asks a real `rightsize serve` for each job:
#     advice on sbatch's stderr, the prediction in the job's admin comment, enforce lowering an
#     over-request, the opt-outs, and failing open (server stopped, server answering after 5 s)
#     within its budget;
#   - `rightsize agent --server` measures a job with a known peak memory and CPU use;
#   - `rightsize ingest slurm --follow` stores each job once and attaches the hook's prediction;
#   - `rightsize submit` shows the suggested changes as a diff and submits with them (--apply).
# Usage: submit_hook_slurm_test.sh RIGHTSIZE TESTDIR SRCDIR   (as root; installs SLURM if missing)
set -euo pipefail
source "$2/cli/lib.sh" "$@"
source "$TESTDIR/integration/slurm/lib_e2e.sh"
CLUSTER_SH=$TESTDIR/integration/slurm/cluster.sh
SERVER="" AGENT="" SLOW="" FOLLOW=""
cleanup() {
  for p in $FOLLOW $AGENT $SERVER $SLOW; do stop_pid "$p"; done
  rm -f /etc/slurm/rightsize.conf
  # our jobs must not outlive the cluster: slurmctld would recover them at the next start
  scancel -n rs_work,rs_arr,work.sbatch 2>/dev/null || true
  for _ in $(seq 1 40); do [ -z "$(squeue -h -n rs_work,rs_arr,work.sbatch 2>/dev/null)" ] && break; sleep 0.5; done
  bash "$CLUSTER_SH" down >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
hook_conf "mode = off"
RS_JOB_SUBMIT_LUA=$SRCDIR/deploy/slurm/job_submit.lua bash "$CLUSTER_SH" up
cd "$WORK"

# A past for the job: 60 runs of rs_work that used about 310 MiB, 1.9 cores and 20 s, each
# asking for 2 GiB, 2 CPUs and an hour, among 240 jobs of others. Trained, the model suggests a
# much smaller request (at risk 0.05: at 0.01 this small a past keeps the request).
python3 "$TESTDIR/integration/slurm/make_history.py" rstest root rs_work 60 310 1.9 20 >history.psv
run_rs ingest sacct history.psv
expect_eq "the past ingested" "$RC" 0
run_rs train
expect_eq "trained" "$RC" 0
start_server
start_agent
pass "server at $URL, agent $AGENT"

write_work_script work.sbatch 12
hook_conf "server = $URL" "budget_ms = 200" "mode = advise" "mode.partition.debug = enforce" \
  "floor_time_min = 5" "risk = 0.05"

# One prediction before the first job: a cold server (model and history not in the page cache
# yet) can take most of the 200 ms budget on its first answer.
curl -s -o /dev/null --max-time 5 -H 'Content-Type: application/json' \
  -d '{"script": "#!/bin/bash\nsleep 1\n", "user": "root"}' "$URL/api/v1/predict" || true

# --- enforce: the over-request is lowered, the user is told, the job keeps the record
t0=$(date +%s%N)
work=$(sbatch --parsable -J rs_work -o "$WORK/slurm-%j.out" work.sbatch 2>sbatch.err)
echo "sbatch (enforce, server up) took $(ms_since "$t0") ms"
cat sbatch.err
expect_contains "advice reached the user" "$(cat sbatch.err)" "rightsize: predicted use: memory"
expect_contains "the suggested request too" "$(cat sbatch.err)" "rightsize: suggested request: --mem="
expect_contains "enforce says what it lowered" "$(cat sbatch.err)" "rightsize: enforced: memory 2.0G -> "
shown=$(scontrol show job "$work")
expect_contains "the job holds the prediction (scontrol)" "$shown" "AdminComment=rightsize:v1 mode=enforce mem_mb="
mem_mb=$(grep -o 'MinMemoryNode=[0-9.]*[MG]' <<<"$shown" | cut -d= -f2 | numfmt --from=iec | awk '{print $1 / 1048576}')
if [ "${mem_mb:-2048}" -lt 2048 ] && [ "${mem_mb:-0}" -ge 512 ]; then
  pass "memory lowered to ${mem_mb}M: under the 2G asked, within max_cut (at least 512M)"
else fail "MinMemoryNode $mem_mb"; fi
wait_jobs 60 "$work"
cat "slurm-$work.out"
expect_contains "the job ran to the end" "$(cat "slurm-$work.out")" "truth cpu_s="

# --- the agent's view of that job against the job's own measurements
for _ in $(seq 1 40); do
  api "/api/v1/jobs/rstest/$work"
  [ -n "$BODY" ] && [ "$(json_get "$BODY" 'd["job"].get("end_time") is not None')" = True ] && break
  sleep 0.5
done
echo "agent record: $(json_get "$BODY" 'd["job"]["usage"]')"
truth_mem=$(($(truth "slurm-$work.out" parent_hwm_bytes) + $(truth "slurm-$work.out" child_hwm_bytes)))
# (The truth is what the job measured itself: on a busy machine two spinning processes get less
# than 2 cores.)
in_range "agent: peak memory (linuxproc)" "$(json_get "$BODY" 'd["job"]["usage"]["peak_memory_bytes"]')" "$truth_mem" 0.05
in_range "agent: CPU seconds (linuxproc)" "$(json_get "$BODY" 'd["job"]["usage"]["cpu_time_s"]')" \
  "$(truth "slurm-$work.out" cpu_s)" 0.10
truth_cores=$(python3 -c "print($(truth "slurm-$work.out" cpu_s) / $(truth "slurm-$work.out" wall_s))")
in_range "agent: cores (CPU seconds / elapsed)" \
  "$(json_get "$BODY" 'd["job"]["usage"]["cpu_time_s"] / d["job"]["usage"]["elapsed_s"]')" "$truth_cores" 0.10
api "/api/v1/jobs/rstest/$work/series?metric=cpu_cores,memory_bytes"
in_range "agent: peak memory in the series" \
  "$(json_get "$BODY" 'max(p[2] for p in d["series"]["memory_bytes"])')" "$truth_mem" 0.05

# --- the same through curl (http_client = curl; the default uses LuaSocket when installed)
hook_conf "server = $URL" "budget_ms = 200" "mode = advise" "risk = 0.05" "http_client = curl"
t0=$(date +%s%N)
curl_job=$(sbatch --parsable -J rs_work -o /dev/null --wrap true 2>sbatch.err)
echo "sbatch (advise through curl) took $(ms_since "$t0") ms"
expect_contains "through curl: advice reached the user" "$(cat sbatch.err)" "rightsize: predicted use: memory"
expect_contains "through curl: the record" "$(scontrol show job "$curl_job")" "AdminComment=rightsize:v1 mode=advise"
hook_conf "server = $URL" "budget_ms = 200" "mode = advise" "mode.partition.debug = enforce" \
  "floor_time_min = 5" "risk = 0.05"

# --- opt-outs
sbatch --parsable -J rs_work --comment=rightsize:advise -o /dev/null --wrap "true" >/dev/null 2>sbatch.err
adv=$(squeue -h -o %i -n rs_work | tail -1 || true)
expect_contains "advise opt-out: advice still given" "$(cat sbatch.err)" "rightsize: predicted use"
if grep -q "enforced" sbatch.err; then fail "advise opt-out changed the job"; else pass "advise opt-out: nothing changed"; fi
off=$(sbatch --parsable -J rs_work --comment=rightsize:off -o /dev/null --wrap "true" 2>sbatch.err)
expect_eq "off opt-out: nothing said" "$(cat sbatch.err)" ""
if scontrol show job "$off" | grep -q 'AdminComment=rightsize'; then fail "off opt-out has a record"
else pass "off opt-out: no record"; fi

# --- an array: each task gets the record
arr=$(sbatch --parsable -J rs_arr --array=1-2 --mem=1G -t 5 -o "$WORK/slurm-%A_%a.out" --wrap "sleep 1" 2>sbatch.err)
expect_contains "array: advice given" "$(cat sbatch.err)" "rightsize:"
wait_jobs 90 "$arr" "$off" ${adv:+"$adv"}

# --- ingest --follow: each job once; the hook's prediction attached to the job
set +e; "$RS" ingest slurm --since 1h --follow --interval 2 --passes 3 >follow.out 2>follow.err; rc=$?; set -e
sacct -P -a -S "$(date -d '-1 hour' +%Y-%m-%dT%H:%M:%S)" -E now -o JobID,JobName,State,ReqMem,ReqTRES,AllocTRES | grep '?' || true
cat follow.out follow.err
expect_eq "ingest slurm --follow --passes 2" "$rc" 0
run_rs job "$work" --cluster rstest --json
expect_eq "the sacct record replaced the agent's" "$(json_get "$OUT" 'd["job"]["source"]')" sacct
expect_eq "ingested once" "$(sqlite3 "$RIGHTSIZE_DB" "select count(*) from jobs where job_id='$work'")" 1
expect_eq "array tasks are jobs" "$(sqlite3 "$RIGHTSIZE_DB" "select count(*) from jobs where job_id in ('${arr}_1','${arr}_2')")" 2
expect_eq "no steps stored as jobs" "$(sqlite3 "$RIGHTSIZE_DB" "select count(*) from jobs where job_id like '%.%'")" 0
# Known gap (agent): an array task's SLURM_JOB_ID is its own raw id, so the agent's record and
# samples of task 1 sit under that id, beside sacct's "A_1". Reported here, not failed.
orphans=$(sqlite3 "$RIGHTSIZE_DB" "select group_concat(job_id, ' ') from jobs where cluster='rstest' and source='agent'")
[ -n "$orphans" ] && echo "note: agent records not matched by sacct (array tasks by raw id?): $orphans"
"$RS" ingest slurm --since 1h --follow --interval 1 --passes 1 >/dev/null 2>&1
expect_eq "a second --follow run adds nothing" \
  "$(sqlite3 "$RIGHTSIZE_DB" "select count(*) from jobs where cluster='rstest' and job_id not like '9000%'")" \
  "$(sqlite3 "$RIGHTSIZE_DB" "select count(distinct job_id) from jobs where cluster='rstest' and job_id not like '9000%'")"
peak=$(json_get "$OUT" 'd["job"]["usage"]["peak_memory_bytes"]')
in_range "sacct MaxRSS of the batch step folded in" "$peak" "$truth_mem" 0.10
api "/api/v1/jobs/rstest/$work"
expect_eq "the prediction made at submit is with the job" "$(json_get "$BODY" 'd["prediction"]["source"]')" job_submit.lua
sugg=$(json_get "$BODY" 'int(d["prediction"]["targets"]["peak_memory"]["suggested_request"])')
if [ "$sugg" -lt $((2 * 1024 * 1024 * 1024)) ]; then
  pass "after the past runs, the suggestion ($sugg) is under the 2G request"; else fail "suggestion $sugg"; fi
# After 60 steady runs the suggestion must also cover the real use (issue 7), not only the
# hook's bounds (max_cut 0.75 of 2G: at least 512M).
if [ "$sugg" -ge "$truth_mem" ]; then pass "the suggestion covers the real use ($truth_mem)"
else fail "the model's suggestion $sugg is under the real use $truth_mem"; fi
expect_eq "the job ran with what enforce set, and completed" \
  "$(sacct -X -n -P -j "$work" -o ReqMem,State)" "${mem_mb}M|COMPLETED"

# --- rightsize submit: the diff, then --apply
run_rs submit --dry-run --risk 0.05 work.sbatch
echo "$OUT"
expect_contains "submit shows a diff of the script" "$OUT" "-#SBATCH --mem=2G"
expect_contains "with the new line" "$OUT" "+#SBATCH --mem="
hook_conf "server = $URL" "mode = off"
run_rs submit --apply --json --risk 0.05 work.sbatch --hold -o /dev/null
expect_eq "submit --apply exit" "$RC" 0
sub=$(json_get "$OUT" 'd["job_id"]')
sub_bytes=$(scontrol show job "$sub" | grep -o 'MinMemoryNode=[0-9.]*[MG]' | cut -d= -f2 | numfmt --from=iec)
expect_eq "submitted with the suggested memory" "$sub_bytes" \
  "$(json_get "$OUT" 'int(d["prediction"]["targets"]["peak_memory"]["suggested_request"])')"
expect_eq "named after the script" "$(squeue -h -j "$sub" -o %j)" work.sbatch
scancel "$sub"

# --- fails open: server stopped, then a server that answers after 5 s; through LuaSocket and
# through curl
stop_pid "$SERVER"; SERVER=""
python3 -c '
import http.server, time
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        time.sleep(5)
        try:
            self.send_response(200); self.end_headers(); self.wfile.write(b"{}")
        except OSError:
            pass
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True); s.serve_forever()' >slow.port &
SLOW=$!
for _ in $(seq 1 50); do [ -s slow.port ] && break; sleep 0.1; done
for client in socket curl; do
  for case in stopped slow; do
    server=$URL
    [ "$case" = slow ] && server=http://127.0.0.1:$(cat slow.port)
    hook_conf "server = $server" "budget_ms = 200" "mode = enforce" "http_client = $client"
    t0=$(date +%s%N)
    set +e; id=$(sbatch --parsable -J rs_work --mem=2G -t 60 -o /dev/null --wrap true 2>sbatch.err); rc=$?; set -e
    ms=$(ms_since "$t0")
    what="server $case ($client)"
    expect_eq "$what: sbatch succeeds" "$rc" 0
    if [ "$ms" -lt 1000 ]; then pass "$what: sbatch took $ms ms (budget 200 ms)"
    else fail "$what: sbatch took $ms ms"; fi
    expect_eq "$what: nothing told, nothing changed" "$(cat sbatch.err)" ""
    expect_contains "$what: memory as asked" "$(scontrol show job "$id")" "MinMemoryNode=2G"
  done
done
expect_contains "slurmctld logs why" "$(grep 'rightsize: job' /var/log/slurm/slurmctld.log | tail -2)" \
  "no prediction"
finish
