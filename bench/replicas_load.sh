#!/usr/bin/env bash
# Issue 27's load test on two replicas: a real PostgreSQL 15 (test/cli/postgres.sh), two
# `rightsize serve` replicas A and B on it, HAProxy in front of them (round-robin, health checks
# on /healthz), and a cluster of simulated agents (fleet_load ingest --resend 1: each node queues
# its batches until acknowledged and sends them again, as the agent's shipper does). Replica A is
# killed with SIGKILL mid-run and started again later. At the end the store is asked: every
# sample the fleet made stored exactly once, no job record twice, the 'train' and 'follow'
# roles held by one replica each. Prints a summary on stderr and one JSON line on stdout; exits
# 1 when a sample was lost or stored twice, a batch was never acknowledged or refused for good.
#
#   bench/replicas_load.sh NODES SECONDS
#
# Environment: BUILD (default ./build), RS, DRIVER (fleet_load), SHAPE (lb: the nodes send to
# HAProxy, the default; agents: the nodes get both replicas' URLs, `agent --server A,B`, no
# balancer), KILL_AT (seconds into the run A is killed, default 40% of SECONDS; "none": never),
# RESTART_AT (when A starts again, default 70%; "none": never), DRAIN_S (how long the nodes go on
# sending what they hold after the run, 60), DRIVER_FLAGS (more fleet_load flags), KEEP=1 (keep
# the work folder: the replicas', HAProxy's and PostgreSQL's logs).
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//; /^set -euo/d' >&2
  exit 2
}
[ $# -eq 2 ] || usage
NODES=$1
RUN_S=$2
[[ $NODES =~ ^[0-9]+$ && $NODES -gt 0 ]] || { echo "replicas_load.sh: NODES must be a positive number, got '$NODES'" >&2; exit 2; }
[[ $RUN_S =~ ^[0-9]+$ && $RUN_S -ge 10 ]] || { echo "replicas_load.sh: SECONDS must be a number >= 10, got '$RUN_S'" >&2; exit 2; }
SHAPE=${SHAPE:-lb}
[[ $SHAPE == lb || $SHAPE == agents ]] || { echo "replicas_load.sh: SHAPE must be lb or agents, got '$SHAPE'" >&2; exit 2; }
KILL_AT=${KILL_AT:-$((RUN_S * 4 / 10))}
RESTART_AT=${RESTART_AT:-$((RUN_S * 7 / 10))}
DRAIN_S=${DRAIN_S:-60}

SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$SRC/build}
RS=${RS:-$BUILD/rightsize}
DRIVER=${DRIVER:-$BUILD/bench/fleet_load}
for f in "$RS" "$DRIVER"; do
  [ -x "$f" ] || { echo "replicas_load.sh: $f not built (cmake --build build --target rightsize fleet_load)" >&2; exit 2; }
done
if [ "$SHAPE" = lb ] && ! command -v haproxy >/dev/null; then
  echo "replicas_load.sh: haproxy is not installed (apt-get install haproxy; scripts/install-deps.sh)" >&2
  exit 77
fi
# shellcheck source=test/cli/postgres.sh
source "$SRC/test/cli/postgres.sh"

WORK=$(mktemp -d /tmp/rightsize-replicas-load.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "${KEEP:-0}" = 1 ]; then
    if [ -n "$PG_ROOT" ]; then cp "$PG_ROOT/server.log" "$WORK/postgres.log" 2>/dev/null || true; fi
    echo "replicas_load.sh: kept $WORK" >&2
  else
    rm -rf "$WORK"
  fi
  pg_stop
}
trap cleanup EXIT
rc=0
pg_start || rc=$?
[ "$rc" -eq 0 ] || exit "$rc"
DB=$RIGHTSIZE_PG_URL
CLUSTER=replicas$(date +%s)

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT_A=$(free_port)
PORT_B=$(free_port)
PORT_LB=$(free_port)
# The SLURM follower runs (the 'follow' role is elected) on an empty sacct.
printf '#!/bin/sh\nexit 0\n' >"$WORK/sacct"
chmod +x "$WORK/sacct"

# start_replica NAME PORT: a replica in the background; its pid in REPLICA_PID.
start_replica() {
  "$RS" --db "$DB" serve --listen "127.0.0.1:$2" --lead-retry 0.5 --train-every 1h \
    --follow-slurm --follow-interval 5 --sacct "$WORK/sacct" --scontrol "$WORK/sacct" \
    >>"$WORK/$1.out" 2>>"$WORK/$1.err" &
  REPLICA_PID=$!
  PIDS+=("$REPLICA_PID")
  for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$2/healthz" >/dev/null && return 0
    kill -0 "$REPLICA_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "replicas_load.sh: replica $1 did not start: $(tail -5 "$WORK/$1.err")" >&2
  exit 1
}
start_replica a "$PORT_A"
PID_A=$REPLICA_PID
start_replica b "$PORT_B"

if [ "$SHAPE" = lb ]; then
  # Round-robin over both replicas, a replica out after two failed checks 0.5 s apart; a request
  # whose connection to a replica fails goes to the other (retries, redispatch). Any answer a
  # replica gave, or a connection it dropped mid-request, goes to the client (the agent resends).
  cat >"$WORK/haproxy.cfg" <<EOF
global
  maxconn 4000
defaults
  mode http
  timeout connect 2s
  timeout client 120s
  timeout server 120s
  retries 3
  option redispatch
frontend rightsize
  bind 127.0.0.1:$PORT_LB
  default_backend replicas
backend replicas
  balance roundrobin
  option httpchk GET /healthz
  default-server inter 500ms fall 2 rise 2
  server a 127.0.0.1:$PORT_A check
  server b 127.0.0.1:$PORT_B check
EOF
  haproxy -f "$WORK/haproxy.cfg" -db >"$WORK/haproxy.log" 2>&1 &
  PIDS+=($!)
  URL=http://127.0.0.1:$PORT_LB
  for _ in $(seq 100); do curl -sf "$URL/healthz" >/dev/null && break; sleep 0.1; done
  curl -sf "$URL/healthz" >/dev/null || { echo "replicas_load.sh: haproxy did not answer: $(cat "$WORK/haproxy.log")" >&2; exit 1; }
else
  URL=http://127.0.0.1:$PORT_A,http://127.0.0.1:$PORT_B
fi

# The roles: replica A started first and holds both.
for _ in $(seq 100); do [ "$(grep -c "this replica holds the" "$WORK/a.err" || true)" -ge 2 ] && break; sleep 0.1; done

LOAD0=$(cut -d' ' -f1 /proc/loadavg)
T0=$(date +%s.%N)
# shellcheck disable=SC2086  # DRIVER_FLAGS is a list of flags
"$DRIVER" ingest --url "$URL" --nodes "$NODES" --seconds "$RUN_S" --cluster "$CLUSTER" \
  --resend 1 --drain-s "$DRAIN_S" ${DRIVER_FLAGS:-} >"$WORK/driver.json" 2>"$WORK/driver.err" &
DRIVER_PID=$!
PIDS+=("$DRIVER_PID")
KILLED_AT=null
RESTARTED_AT=null
since() { python3 -c "print(round($(date +%s.%N) - $T0, 2))"; }
if [ "$KILL_AT" != none ]; then
  sleep "$KILL_AT"
  kill -KILL "$PID_A"
  wait "$PID_A" 2>/dev/null || true
  KILLED_AT=$(since)
  echo "replicas_load.sh: replica A killed (SIGKILL) at ${KILLED_AT} s" >&2
  if [ "$RESTART_AT" != none ]; then
    sleep "$(python3 -c "print(max(0, $RESTART_AT - $KILLED_AT))")"
    start_replica a2 "$PORT_A"  # its own log: a2.out, a2.err
    PID_A=$REPLICA_PID
    RESTARTED_AT=$(since)
    echo "replicas_load.sh: replica A started again at ${RESTARTED_AT} s" >&2
  fi
fi
drc=0
wait "$DRIVER_PID" || drc=$?
LOAD1=$(cut -d' ' -f1 /proc/loadavg)
[ -s "$WORK/driver.json" ] || { echo "replicas_load.sh: fleet_load printed nothing (exit $drc): $(cat "$WORK/driver.err")" >&2; exit 1; }

# The roles as the replicas hold them now: each replica's last word on each role, and the
# advisory locks PostgreSQL holds for them.
roles() {  # roles FILE: the roles FILE's replica says it holds (its last word on each)
  python3 - "$1" <<'EOF'
import re, sys
held = {}
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"this replica holds the '(\w+)' role", line)
    if m: held[m.group(1)] = True
    m = re.search(r"another replica holds the '(\w+)' role", line)
    if m: held[m.group(1)] = False
print(",".join(sorted(r for r, h in held.items() if h)))
EOF
}
sleep 1.5  # a role whose holder died is taken within --lead-retry (0.5 s)
# A killed replica's log says what it held before it died: only live ones count.
ROLES_A=""
if [ "$RESTARTED_AT" != null ]; then
  ROLES_A=$(roles "$WORK/a2.err")
elif [ "$KILL_AT" = none ]; then
  ROLES_A=$(roles "$WORK/a.err")
fi
ROLES_B=$(roles "$WORK/b.err")
ADVISORY=$(pg_psql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted")

# Stop the replicas (SIGTERM: the requests in flight finish), then count.
for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
PIDS=()
Q() { pg_psql "$1"; }
STORED=$(Q "SELECT coalesce(sum(n), 0) FROM series_chunks WHERE cluster = '$CLUSTER'")
CHUNKS=$(Q "SELECT count(*) FROM series_chunks WHERE cluster = '$CLUSTER'")
# A sample stored twice is a chunk that overlaps the one before it in its series (the fleet's
# samples of a job's metric have strictly increasing times; a chunk's samples are distinct).
OVERLAPS=$(Q "SELECT count(*) FROM (SELECT t_start, lag(t_end) OVER (PARTITION BY job_id, metric ORDER BY t_start) AS prev FROM series_chunks WHERE cluster = '$CLUSTER') c WHERE t_start <= prev")
JOBS=$(Q "SELECT count(*) FROM jobs WHERE cluster = '$CLUSTER'")
JOB_IDS=$(Q "SELECT count(DISTINCT job_id) FROM jobs WHERE cluster = '$CLUSTER'")
AGENTS=$(Q "SELECT count(*) FROM agents WHERE agent LIKE '$CLUSTER-%'")
DEADLOCKS=$(grep -c "deadlock detected" "$PG_ROOT/server.log" || true)
SERIALIZATION=$(grep -c "could not serialize" "$PG_ROOT/server.log" || true)

NODES=$NODES SHAPE=$SHAPE KILLED_AT=$KILLED_AT RESTARTED_AT=$RESTARTED_AT STORED=$STORED \
  CHUNKS=$CHUNKS OVERLAPS=$OVERLAPS JOBS=$JOBS JOB_IDS=$JOB_IDS AGENTS=$AGENTS \
  DEADLOCKS=$DEADLOCKS SERIALIZATION=$SERIALIZATION ROLES_A=$ROLES_A ROLES_B=$ROLES_B \
  ADVISORY=$ADVISORY LOAD0=$LOAD0 LOAD1=$LOAD1 DRC=$drc \
  python3 - "$WORK/driver.json" <<'EOF'
import json, os, sys
e = os.environ
run = json.loads(open(sys.argv[1]).readline())
num = lambda k: None if e[k] == "null" else float(e[k])
roles_a = [r for r in e["ROLES_A"].split(",") if r]
roles_b = [r for r in e["ROLES_B"].split(",") if r]
holders = {r: [n for n, rs in (("a", roles_a), ("b", roles_b)) if r in rs] for r in ("train", "follow")}
stored = int(e["STORED"])
out = {
    "tool": "replicas_load.sh", "shape": e["SHAPE"], "replicas": 2, "store": "postgresql-15",
    "nodes": run["nodes"], "seconds": run["seconds"], "killed_a_at_s": num("KILLED_AT"),
    "restarted_a_at_s": num("RESTARTED_AT"),
    "samples_made": run["samples_made"], "samples_acked": run["samples_acked"],
    "samples_stored": stored, "samples_lost": run["samples_made"] - stored,
    "samples_stored_twice": int(e["OVERLAPS"]), "chunks": int(e["CHUNKS"]),
    "batches_made": run["batches_sent"], "batches_acked": run["batches_acked"],
    "batches_unacked": run["batches_unacked"], "batches_dropped": run["batches_dropped"],
    "batches_resent": run["batches_resent"], "replays_acked": run["replays_acked"],
    "renumbered": run["renumbered"], "failovers": run["failovers"],
    "retried_errors": run["retried"], "retried_error_count": sum(run["retried"].values()),
    "statuses": run["statuses"], "transport_errors": run["transport_errors"],
    "outage_s": run["outage_s"],
    "batches_not_sent": run["batches_not_sent"], "nodes_shipped": run["nodes_shipped"],
    "jobs": int(e["JOBS"]), "jobs_expected": run["jobs_shipped"],
    "job_records_twice": int(e["JOBS"]) - int(e["JOB_IDS"]), "agents": int(e["AGENTS"]),
    "roles": holders, "advisory_locks": int(e["ADVISORY"]),
    "postgres_deadlocks_retried": int(e["DEADLOCKS"]),
    "postgres_serialization_failures_retried": int(e["SERIALIZATION"]),
    "accepted_samples_per_s": run["accepted_samples_per_s"],
    "offered_samples_per_s": run["offered_samples_per_s"], "latency_ms": run["latency_ms"],
    "lag_ms": run["lag_ms"], "driver_cores": run["driver_cores"],
    "loadavg_before": float(e["LOAD0"]), "loadavg_after": float(e["LOAD1"]),
}
problems = []
if out["samples_lost"] != 0: problems.append(f"{out['samples_lost']} samples lost")
if out["samples_stored_twice"]: problems.append(f"{out['samples_stored_twice']} chunks stored twice")
if out["batches_unacked"] or out["batches_dropped"]:
    problems.append(f"{out['batches_unacked']} batches never acknowledged, {out['batches_dropped']} refused")
if out["job_records_twice"] or out["jobs"] != out["jobs_expected"]:
    problems.append(f"{out['jobs']} job records of {out['jobs_expected']} jobs")
for role, who in holders.items():
    if len(who) != 1: problems.append(f"role {role} held by {who or 'no replica'}")
out["ok"] = not problems
out["problems"] = problems
print(json.dumps(out, separators=(",", ":")))
print(f"""replicas_load.sh: {out['nodes']} nodes, {out['seconds']:.0f} s, two replicas on PostgreSQL ({out['shape']}); A killed at {out['killed_a_at_s']} s, started again at {out['restarted_a_at_s']} s
  samples made {out['samples_made']:,}, stored {stored:,} (lost {out['samples_lost']}, stored twice {out['samples_stored_twice']})
  nodes that shipped {out['nodes_shipped']:,} of {out['nodes']:,}; batches not made (the fleet's connections were behind at the end) {out['batches_not_sent']:,}
  batches {out['batches_made']:,}: acknowledged {out['batches_acked']:,}, resent {out['batches_resent']}, 409 stored-before {out['replays_acked']}, renumbered {out['renumbered']}, never acknowledged {out['batches_unacked']}, refused {out['batches_dropped']}
  retried errors {out['retried_error_count']} {out['retried_errors']}; failovers {out['failovers']}; outage per node {out['outage_s']}
  job records {out['jobs']} of {out['jobs_expected']} jobs that shipped (twice: {out['job_records_twice']}); roles {holders}; PostgreSQL deadlocks retried {out['postgres_deadlocks_retried']}
  accepted {out['accepted_samples_per_s']:,} samples/s of {out['offered_samples_per_s']:,} offered; load average {out['loadavg_before']} -> {out['loadavg_after']}
  {'OK' if out['ok'] else 'FAILED: ' + '; '.join(problems)}""", file=sys.stderr)
sys.exit(0 if out["ok"] else 1)
EOF
