#!/usr/bin/env python3
"""Issue 27's acceptance point on two replicas, bounded: bench/replicas_load.sh with 100 simulated
8-GPU nodes through HAProxy onto two `rightsize serve` replicas on one real PostgreSQL 15; replica
A is killed with SIGKILL mid-run and started again. Its agents must resume on B from their queue:
every sample the fleet made stored exactly once, every batch acknowledged, no batch refused, no
job record twice, each role held by one replica; the only errors those of the kill, and retried.
Then the same with the agents given both replicas (`agent --server A,B`), no balancer. No timing
is asserted. Skips (77) only where PostgreSQL or HAProxy is not installed.

Usage: replicas_load_smoke.py REPLICAS_LOAD_SH RIGHTSIZE FLEET_LOAD
"""
import json
import os
import subprocess
import sys

FAILED = []


def check(what, ok, detail=""):
    print(("ok: " if ok else "FAIL: ") + what + ("" if ok else f": {detail}"), flush=True)
    if not ok:
        FAILED.append(what)


def run(script, env, shape):
    env = dict(env, SHAPE=shape, KILL_AT="8", RESTART_AT="14", DRAIN_S="60")
    p = subprocess.run(["bash", script, "100", "20"], env=env, capture_output=True, text=True,
                       timeout=240)
    if p.returncode == 77:
        print(p.stderr)
        sys.exit(77)
    print(p.stderr[-1500:], flush=True)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    check(f"{shape}: one JSON line", len(lines) == 1, p.stdout[-2000:] + p.stderr[-2000:])
    if not lines:
        return
    r = json.loads(lines[0])
    check(f"{shape}: the script says ok (exit 0)", p.returncode == 0 and r["ok"], r["problems"])
    check(f"{shape}: A was killed and started again",
          r["killed_a_at_s"] is not None and r["restarted_a_at_s"] is not None, r)
    check(f"{shape}: samples were made", r["samples_made"] > 0, r)
    check(f"{shape}: every sample made is stored (none lost)",
          r["samples_stored"] == r["samples_made"] == r["samples_acked"], r)
    check(f"{shape}: no sample stored twice", r["samples_stored_twice"] == 0, r)
    check(f"{shape}: every batch acknowledged, none refused",
          r["batches_unacked"] == 0 and r["batches_dropped"] == 0 and
          r["batches_acked"] == r["batches_made"], r)
    check(f"{shape}: one record per job", r["jobs"] == r["jobs_expected"] > 0 and
          r["job_records_twice"] == 0, r)
    check(f"{shape}: each role held by one replica",
          all(len(v) == 1 for v in r["roles"].values()) and r["advisory_locks"] == 2, r["roles"])
    # Every answer but 200 is one the kill caused and the nodes retried: 5xx or a dropped
    # connection, each resent (no 4xx).
    bad = {s: n for s, n in r["statuses"].items() if s != "200" and not s.startswith("5")}
    check(f"{shape}: no answer but 200 and the kill's 5xx", not bad, r["statuses"])
    check(f"{shape}: every failed try was retried",
          r["retried_error_count"] == sum(n for s, n in r["statuses"].items() if s != "200") +
          sum(r["transport_errors"].values()), r)
    if shape == "agents":
        check("agents: the nodes moved to B", r["failovers"] > 0, r)


def main():
    script, rs, driver = sys.argv[1:4]
    env = dict(os.environ, RS=rs, DRIVER=driver)
    for k in ("DRIVER_FLAGS", "KEEP", "KILL_AT", "RESTART_AT", "SHAPE"):
        env.pop(k, None)
    run(script, env, "lb")
    run(script, env, "agents")
    bad = subprocess.run(["bash", script, "many", "20"], env=env, capture_output=True, text=True,
                         timeout=30)
    check("NODES must be a number", bad.returncode == 2 and "NODES" in bad.stderr, bad.stderr)


if __name__ == "__main__":
    main()
    print("FAILED: " + ", ".join(FAILED) if FAILED else "all passed")
    sys.exit(1 if FAILED else 0)
