#!/usr/bin/env python3
"""Two `rightsize serve` replicas on one store (issue 27), with real processes throughout.

Replica A starts first and takes the 'train' and 'follow' roles; replica B, on the same store,
serves requests and waits for them. A real `rightsize agent` ships a real job's samples with
`--server A,B`. Meanwhile the test checks:
  - the follower (fake sacct/scontrol/sinfo scripts printing real SLURM 22.05 output, as
    slurm_follow_cli_test does) runs on A only;
  - new history (half of the HPC2N trace ingested while they run) is trained once, by A: one
    new model version, and B, which did not train, predicts with it;
  - a batch numbered ahead, sent to B under the agent's own name, makes A refuse the agent's
    next batch (409): the seq is the store's, not a replica's, and the agent resyncs.
Then A is killed with SIGKILL: the agent moves to B and goes on from its spool; B takes the
'train' and 'follow' roles, follows sacct and trains the next new history (one version more).
At the end every sample the agent made (its "shipped X of Y" line) is in the store, once.

The store is one variable, STORE (--store: a SQLite path by default, in the test's folder; a
postgresql:// URL runs the same test against PostgreSQL); only stored_samples() reads the store
directly.

Usage: replicas_test.py RIGHTSIZE TESTDIR SRCDIR [--store LOCATION]
"""
import argparse
import gzip
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

FAILED = []


def check(what, ok, detail=""):
    print(("ok: " if ok else "FAIL: ") + what + ("" if ok else f": {detail}"), flush=True)
    if not ok:
        FAILED.append(what)


def http(url, body=None, timeout=10.0):
    """(status, body); status 0 when no answer came."""
    req = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except (OSError, urllib.error.URLError) as e:
        return 0, str(e)


def read(path):
    return open(path, errors="replace").read() if os.path.exists(path) else ""


def wait_for(what, seconds=60):
    """Polls what() until it returns something true; returns that (or None)."""
    end = time.time() + seconds
    while time.time() < end:
        got = what()
        if got:
            return got
        time.sleep(0.2)
    return None


def stored_samples(store, cluster):
    """The samples the store holds of `cluster`'s real jobs (not the forged one)."""
    query = ("SELECT COALESCE(SUM(n), 0) FROM series_chunks WHERE cluster = '%s' "
             "AND job_id NOT LIKE 'forged%%'" % cluster)
    if store.startswith(("postgresql://", "postgres://")):
        out = subprocess.run(["psql", "-At", store, "-c", query], capture_output=True, text=True)
        return int(out.stdout.strip() or -1)
    con = sqlite3.connect(store)
    try:
        return con.execute(query).fetchone()[0]
    finally:
        con.close()


def metric(text, name):
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def json_lines(text):
    n = 0
    for line in text.splitlines():
        try:
            n += isinstance(json.loads(line), dict)
        except ValueError:
            pass
    return n


def trained(err_text, cluster):
    return [int(v) for v in re.findall(r"trained cluster " + re.escape(cluster) +
                                       r": model version (\d+)", err_text)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rightsize")
    ap.add_argument("testdir")
    ap.add_argument("srcdir")
    ap.add_argument("--store", default="", help="the store (default: a SQLite file)")
    args = ap.parse_args()
    rs = args.rightsize

    started = time.monotonic()
    work = tempfile.mkdtemp(prefix="rightsize-replicas.")
    STORE = args.store or os.path.join(work, "store.db")
    procs = []

    def start(name, argv, env=None):
        out, err = os.path.join(work, name + ".out"), os.path.join(work, name + ".err")
        p = subprocess.Popen(argv, stdout=open(out, "w"), stderr=open(err, "w"), env=env)
        procs.append(p)
        return p, out, err

    try:
        # The HPC2N trace in two halves: the first before the replicas start, the second
        # while they run (new history for the periodic training).
        lines = gzip.open(os.path.join(args.srcdir, "data/traces/HPC2N-excerpt-alea.swf.gz"),
                          "rt").read().splitlines()
        header = [l for l in lines if l.startswith(";")]
        jobs = [l for l in lines if l.strip() and not l.startswith(";")]
        half = len(jobs) // 2
        parts = [jobs[:half], jobs[half:half + 200], jobs[half + 200:]]
        for i, part in enumerate(parts):
            with open(os.path.join(work, f"part{i}.swf"), "w") as f:
                f.write("\n".join(header + part) + "\n")

        def ingest(i):
            r = subprocess.run([rs, "--db", STORE, "ingest", "swf",
                                os.path.join(work, f"part{i}.swf"), "--cluster", "hpc2n"],
                               capture_output=True, text=True)
            check(f"ingest part {i} of the trace", r.returncode == 0, r.stderr[-400:])

        ingest(0)

        # sacct, scontrol and sinfo: shell scripts printing real SLURM 22.05 output.
        bindir = os.path.join(work, "bin")
        os.makedirs(bindir)
        data = os.path.join(args.testdir, "data/sacct/slurm22/mixed.psv")
        scripts = {
            "sacct": f"#!/bin/sh\ncase \"$*\" in *AdminComment*) ;; *) cat '{data}' ;; esac\n",
            "scontrol": "#!/bin/sh\n[ \"$1 $2\" = 'show config' ] && "
                        "echo 'ClusterName             = rstest'\n",
            "sinfo": "#!/bin/sh\necho 'debug*|1|2|23000|(null)'\n",
        }
        for name, text in scripts.items():
            path = os.path.join(bindir, name)
            with open(path, "w") as f:
                f.write(text)
            os.chmod(path, 0o755)
        env = dict(os.environ, PATH=bindir + ":" + os.environ["PATH"])

        def serve(name):
            p, out, err = start(name, [
                rs, "--db", STORE, "serve", "--listen", "127.0.0.1:0", "--train-every", "2s",
                "--train-min-new-jobs", "50", "--lead-retry", "0.5", "--follow-slurm",
                "--follow-interval", "1"], env)
            m = wait_for(lambda: re.search(r"listening on 127\.0\.0\.1:(\d+)", read(out)), 30)
            check(f"replica {name} starts", m is not None, read(err)[-500:])
            return p, out, err, f"http://127.0.0.1:{m.group(1)}" if m else ""

        a, a_out, a_err, a_url = serve("A")
        check("A takes the 'train' role and trains the first model",
              wait_for(lambda: trained(read(a_err), "hpc2n") == [1], 120), read(a_err)[-800:])
        b, b_out, b_err, b_url = serve("B")
        check("B finds both roles held",
              wait_for(lambda: read(b_err).count("another replica holds the") == 2, 30),
              read(b_err)[-800:])
        check("A runs the SLURM follower", wait_for(lambda: json_lines(read(a_out)) >= 2, 30),
              read(a_out)[-400:] + read(a_err)[-400:])

        # B predicts with version 1 (and caches it).
        script = open(os.path.join(args.testdir, "data/scripts/mpi_job.sh")).read()
        predict = json.dumps({"script": script, "user": "user8", "cluster": "hpc2n"}).encode()

        def version(url):
            code, body = http(url + "/api/v1/predict", predict, 60)
            return json.loads(body).get("model", {}).get("version") if code == 200 else body

        check("B predicts with version 1", version(b_url) == 1, version(b_url))

        # The agent, shipping a sleeping job's samples to A, then B.
        job_env = dict(os.environ, SLURM_JOB_ID="4242", SLURM_JOB_USER="alice",
                       SLURM_JOB_NAME="replicas", SLURM_CPUS_ON_NODE="1")
        job = subprocess.Popen(["sleep", "300"], env=job_env)
        procs.append(job)
        agent, _, agent_err = start("agent", [
            rs, "--db", os.path.join(work, "agent.db"), "agent", "--server", f"{a_url},{b_url}",
            "--cluster", "rep", "--node-name", "node1", "--interval", "0.5",
            "--ship-interval", "1", "--spool", os.path.join(work, "spool"),
            "--listen", "127.0.0.1:0"])
        m = wait_for(lambda: re.search(r"/metrics on 127\.0\.0\.1:(\d+)", read(agent_err)), 30)
        check("the agent starts", m is not None, read(agent_err)[-400:])
        agent_metrics = f"http://127.0.0.1:{m.group(1)}/metrics" if m else ""

        def delivered():
            code, text = http(agent_metrics, timeout=5)
            return metric(text, "rightsize_agent_samples_delivered_total") or 0 if code == 200 else 0

        check("A stores the agent's batches", wait_for(lambda: delivered() > 0, 30))

        # New history while both run: trained once, by A; B predicts with it.
        ingest(1)
        check("A trains the new history: version 2",
              wait_for(lambda: trained(read(a_err), "hpc2n") == [1, 2], 120), read(a_err)[-800:])
        time.sleep(3)  # more periods, without new history
        check("only A trained, once per new history", trained(read(a_err), "hpc2n") == [1, 2]
              and trained(read(b_err), "hpc2n") == [], read(b_err)[-800:])
        check("B, which did not train, predicts with version 2", version(b_url) == 2,
              version(b_url))
        check("B did not run the follower", json_lines(read(b_out)) == 0, read(b_out)[-400:])

        # The agent's own name numbered a minute ahead, sent to B: A must refuse the agent's
        # next batch for it (the store's last seq), and the agent resync.
        ahead = int(time.time() * 1000) + 60_000
        forged = json.dumps({"schema": "rightsize.telemetry/v1", "agent": "rep/node1",
                             "seq": ahead, "jobs": [{"job": {"cluster": "rep",
                                                             "job_id": "forged-1"},
                                                     "samples": {"cpu_cores": [
                                                         [time.time(), 1.0]]}}]}).encode()
        code, body = http(b_url + "/api/v1/telemetry", forged)
        check("B stores a batch numbered ahead", code == 200, body)
        check("A refuses the agent's next batch and the agent resyncs",
              wait_for(lambda: "not above the last one stored" in read(agent_err), 30),
              read(agent_err)[-600:])
        before_kill = delivered()
        check("the resynced batches are stored", wait_for(lambda: delivered() > before_kill, 30))

        # A dies. The agent moves to B; B takes the roles over.
        a.send_signal(signal.SIGKILL)
        a.wait(10)
        killed = time.monotonic()
        killed_at = delivered()
        check("the agent moves to B", wait_for(
            lambda: f"sending to {b_url}" in read(agent_err) and delivered() > killed_at, 30),
            read(agent_err)[-600:])
        moved_s = time.monotonic() - killed
        check("B takes the 'train' and 'follow' roles", wait_for(
            lambda: read(b_err).count("this replica holds the") == 2, 30), read(b_err)[-800:])
        print(f"after SIGKILL: the agent's batches stored by B within {moved_s:.1f} s, both "
              f"roles on B within {time.monotonic() - killed:.1f} s (--lead-retry 0.5, "
              f"--ship-interval 1)")
        check("B runs the SLURM follower", wait_for(lambda: json_lines(read(b_out)) >= 1, 30),
              read(b_out)[-400:] + read(b_err)[-400:])
        ingest(2)
        check("B trains the next new history: version 3",
              wait_for(lambda: trained(read(b_err), "hpc2n") == [3], 120), read(b_err)[-800:])
        check("B predicts with version 3", version(b_url) == 3, version(b_url))

        # The job ends; the agent delivers what it has and stops.
        job.kill()
        job.wait()
        time.sleep(2)

        def drained():
            code, text = http(agent_metrics, timeout=5)
            return code == 200 and metric(text, "rightsize_agent_batches_queued") == 0

        check("the agent's queue drains", wait_for(drained, 60))
        agent.send_signal(signal.SIGTERM)
        agent.wait(30)
        text = read(agent_err)
        m = re.search(r"shipped (\d+) of (\d+) samples in (\d+) batches \((\d+) renumbered "
                      r"after a 409, (\d+) dropped\)", text)
        check("the agent says what it shipped", m is not None, text[-600:])
        if m:
            shipped, made = int(m.group(1)), int(m.group(2))
            stored = stored_samples(STORE, "rep")
            print(f"samples: {made} made, {shipped} shipped, {stored} stored; "
                  f"{m.group(4)} renumbered after a 409, {m.group(5)} dropped")
            check("every sample made was shipped, none dropped",
                  made > 0 and shipped == made and m.group(5) == "0", m.group(0))
            check("every sample is stored once: no loss, no duplicate", stored == made,
                  f"{stored} stored of {made}")
            check("the agent resynced across replicas", int(m.group(4)) >= 1, m.group(0))
        check("the agent says it moved to the next server",
              "moved to the next --server" in text, text[-400:])
        b.send_signal(signal.SIGTERM)
        check("B stops on SIGTERM", b.wait(30) == 0, read(b_err)[-400:])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if FAILED:
            for name in ("A", "B", "agent"):
                print(f"--- {name}.err (tail)\n" + read(os.path.join(work, name + ".err"))[-1500:])
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(FAILED)} failed ({time.monotonic() - started:.0f} s)")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
