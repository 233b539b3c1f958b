# Helpers for the SLURM end-to-end tests (sourced after test/cli/lib.sh): a rightsize server and
# agent next to the test cluster, the job_submit.lua settings, waiting for jobs.

# start_server [ARGS]: `rightsize serve ARGS` on a free port of the test store; sets $SERVER
# (pid), $URL.
start_server() {
  "$RS" serve --listen 127.0.0.1:0 "$@" >"$WORK/serve.out" 2>"$WORK/serve.err" &
  SERVER=$!
  local port=""
  for _ in $(seq 1 100); do
    port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$WORK/serve.out" | cut -d: -f2 || true)
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { fail "server did not start: $(cat "$WORK/serve.err")"; finish; exit 1; }
  URL=http://127.0.0.1:$port
}

# start_agent: `rightsize agent --server` for cluster rstest, sampling every 0.5 s; sets $AGENT.
start_agent() {
  "$RS" agent --server "$URL" --cluster rstest --interval 0.5 --ship-interval 1 \
    --spool "$WORK/spool" >"$WORK/agent.out" 2>"$WORK/agent.err" &
  AGENT=$!
}

stop_pid() { # stop_pid PID: SIGTERM a process this test started, wait for it
  if [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; then
    kill -TERM "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
  fi
}

# hook_conf KEY=VALUE…: writes /etc/slurm/rightsize.conf (the hook reads it at each submission).
hook_conf() {
  printf '%s\n' "# written by $(basename "$0")" "$@" >/etc/slurm/rightsize.conf
}

# wait_jobs SECONDS JOBID…: until none of the jobs is in squeue.
wait_jobs() {
  local limit=$(($1 * 2)) ids
  shift
  ids=$(IFS=,; echo "$*")
  for _ in $(seq 1 "$limit"); do
    [ -z "$(squeue -h -j "$ids" 2>/dev/null)" ] && return 0
    sleep 0.5
  done
  fail "jobs $ids still queued after $((limit / 2)) s"
}

# api PATH: GET from the server into $BODY.
api() { BODY=$(curl -sf "$URL$1" || true); }

# ms_since NANOS: milliseconds since a `date +%s%N`.
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

# in_range WHAT GOT WANT TOLERANCE: |got - want| <= tolerance * want.
in_range() {
  if python3 -c "import sys; g, w, t = map(float, sys.argv[1:]); sys.exit(0 if abs(g - w) <= t * w else 1)" \
    "$2" "$3" "$4"; then
    pass "$1: $2 vs truth $3 (within $(python3 -c "print(round(100 * float('$4')))")%)"
  else
    fail "$1: $2 vs truth $3 (tolerance $4)"
  fi
}

# The job that allocates a known amount of memory and burns a known number of cores: a busy
# child, then 300 MiB written in the parent, which also spins; each prints its own peak (VmHWM)
# and the parent the CPU seconds of both (os.times), the truth the agent's numbers are held to.
write_work_script() { # write_work_script FILE SECONDS
  cat >"$1" <<SH
#!/bin/bash
#SBATCH --mem=2G
#SBATCH --cpus-per-task=2
#SBATCH --time=60
/usr/bin/python3 - <<'PY'
import os, time
def spin(s):
    end = time.time() + s
    while time.time() < end:
        pass
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
t0 = time.time()
pid = os.fork()
if pid == 0:
    spin($2)
    print("truth child_hwm_bytes=%d" % hwm(), flush=True)
    os._exit(0)
x = b"\\1" * (300 * 1024 * 1024)
spin($2)
os.waitpid(pid, 0)
t = os.times()
print("truth parent_hwm_bytes=%d" % hwm())
print("truth cpu_s=%.2f wall_s=%.2f" % (t.user + t.system + t.children_user + t.children_system, time.time() - t0))
PY
SH
}

# truth FILE KEY: a "truth KEY=VALUE" printed by the work script.
truth() { grep -o "$2=[0-9.]*" "$1" | head -1 | cut -d= -f2; }
