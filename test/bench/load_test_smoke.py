#!/usr/bin/env python3
"""Smoke test of the load-test harness (bench/load_test.sh + fleet_load), behaviour only.

A real `rightsize serve` on a new SQLite store takes the batches of 30 simulated 8-GPU nodes for
8 s; the run's JSON line must say that every sample the server acknowledged is in the store (none
lost), that every batch was answered 200, and carry the figures a reader compares (rate, server
CPU, latency, bytes per sample). Bad arguments get a clear message, not a run. No timing is
asserted.

Usage: load_test_smoke.py LOAD_TEST_SH RIGHTSIZE FLEET_LOAD
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


def main():
    script, rs, driver = sys.argv[1:4]
    env = dict(os.environ, RS=rs, DRIVER=driver)
    env.pop("SERVE_FLAGS", None)
    env.pop("DRIVER_FLAGS", None)
    p = subprocess.run(["bash", script, "sqlite", "30", "8"], env=env, capture_output=True,
                       text=True, timeout=120)
    check("load_test.sh exits 0", p.returncode == 0, p.stderr[-2000:])
    lines = [l for l in p.stdout.splitlines() if l.strip()]
    check("one JSON line", len(lines) == 1, p.stdout[-2000:])
    if not lines:
        return
    run = json.loads(lines[0])
    for key in ("backend", "nodes", "gpus_per_node", "jobs_per_node", "metrics_per_job",
                "accepted_samples_per_s", "offered_samples_per_s", "samples_per_server_cpu_s",
                "server_cores", "driver_cores", "latency_ms", "lag_ms", "statuses",
                "transport_errors", "samples_acked", "samples_stored", "samples_lost",
                "bytes_per_sample", "loadavg_before", "loadavg_after"):
        check(f"field {key}", key in run, sorted(run))
    check("30 nodes of 8 GPUs, a job per GPU",
          (run.get("nodes"), run.get("gpus_per_node"), run.get("jobs_per_node")) == (30, 8, 8),
          run)
    acked = run.get("samples_acked", 0)
    check("samples were acknowledged", acked > 0, run)
    check("every sample made was acknowledged", run.get("samples_made") == acked, run)
    check("no sample lost: the store holds every acknowledged sample",
          run.get("samples_stored") == acked and run.get("samples_lost") == 0, run)
    check("the server's own counter agrees", run.get("server_samples_total") == acked, run)
    check("every batch answered 200",
          run.get("statuses") == {"200": run.get("batches_sent")} and
          not run.get("transport_errors"), run)
    # 8 s at one batch per node per 5 s: each node ships once or twice.
    check("each node shipped its batches", 30 <= run.get("batches_sent", 0) <= 60, run)
    lat = run.get("latency_ms", {})
    check("latency percentiles", lat.get("n") == run.get("batches_sent") and
          0 < lat.get("p50", 0) <= lat.get("p99", 0) <= lat.get("max", 0), lat)
    check("bytes per sample from the store's size", (run.get("bytes_per_sample") or 0) > 0, run)

    bad = subprocess.run(["bash", script, "mysql://x", "10", "5"], env=env, capture_output=True,
                         text=True, timeout=30)
    check("an unknown backend is refused with a message",
          bad.returncode == 2 and "BACKEND must be" in bad.stderr, bad.stderr)
    bad = subprocess.run(["bash", script, "sqlite", "many", "5"], env=env, capture_output=True,
                         text=True, timeout=30)
    check("NODES must be a number", bad.returncode == 2 and "NODES" in bad.stderr, bad.stderr)


if __name__ == "__main__":
    main()
    print("FAILED: " + ", ".join(FAILED) if FAILED else "all passed")
    sys.exit(1 if FAILED else 0)
