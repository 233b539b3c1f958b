#!/usr/bin/env python3
"""Soak test of `rightsize serve` under hostile peers (issue 31's acceptance), loopback only.

A real server (the built binary, a temporary store) ingests the telemetry of two real
`rightsize agent`s watching real processes (SLURM-like jobs started here), while for --seconds:
  - --slow clients trickle a header line every 3 s and --idle sockets say nothing (both
    reconnect when the server closes them),
  - a 4 MB gzip bomb arrives without a token (must be 401) and with one (must be 413),
  - forged batches arrive: another token under a real agent's name numbered 2^63 - 1 (409) and
    half an hour ahead (kept apart: blocks nothing), and the real agent's own token numbered
    20 minutes ahead (the real agent must resync, not lose its batches).
The slow and idle clients come from 127.0.0.2-11 (70 each, under the server's per-address cap
of 128, so that the worker pool is what is tested); the agents and the checks from 127.0.0.1.
Meanwhile /healthz is polled every 200 ms. It asserts: every poll answered (within a generous
client timeout, so a loaded CI does not flake; the maximum is printed against the 1 s target),
every sample the agents made is in the store, no batch dropped, and the server's peak RSS
(VmHWM) stays under --rss-mib (256 MiB; 47-59 MiB measured).

Usage: soak_test.py RIGHTSIZE HOT_LOOP [--seconds 60] [--slow 500] [--idle 200]
"""
import argparse
import errno
import json
import os
import re
import resource
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zlib

FAILED = []


def check(what, ok, detail=""):
    print(("ok: " if ok else "FAIL: ") + what + ("" if ok else f": {detail}"), flush=True)
    if not ok:
        FAILED.append(what)


def http(url, body=None, headers=None, timeout=10.0):
    """(status, body, seconds); status 0 when no answer came."""
    req = urllib.request.Request(url, data=body, headers=headers or {},
                                 method="POST" if body is not None else "GET")
    start = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode(errors="replace"), time.monotonic() - start
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace"), time.monotonic() - start
    except (OSError, urllib.error.URLError) as e:
        return 0, str(e), time.monotonic() - start


def raw_post(port, path, body, headers, timeout):
    """(status, body) of a POST whose body is sent while the answer is read, as curl does: a
    server that answers before reading the body, and closes, is heard. 0 when no answer."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError as e:
        return 0, str(e)
    head = f"POST {path} HTTP/1.1\r\nHost: soak\r\nContent-Length: {len(body)}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"

    def send():
        try:
            s.sendall(head.encode() + body)
        except OSError:
            pass  # answered and closed: the rest is not wanted

    writer = threading.Thread(target=send, daemon=True)
    writer.start()
    answer = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
            h, sep, rest = answer.partition(b"\r\n\r\n")
            m = re.search(rb"Content-Length: (\d+)", h)
            if sep and m and len(rest) >= int(m.group(1)):
                break
    except OSError:
        pass
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()
    writer.join(5)
    m = re.match(rb"HTTP/1\.1 (\d+)", answer)
    return (int(m.group(1)) if m else 0), answer.partition(b"\r\n\r\n")[2].decode(errors="replace")


def gzip_bomb(mib):
    """A gzip stream of `mib` MiB of zeros, ~1 KB per MiB (the same deflate blocks repeated
    after a full flush); no trailer, as a reader that stops at its cap never reaches it."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    segment = c.compress(bytes(1 << 20)) + c.flush(zlib.Z_FULL_FLUSH)
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + segment * mib


def wait_for(pattern, path, seconds=30):
    end = time.time() + seconds
    while time.time() < end:
        if os.path.exists(path):
            m = re.search(pattern, open(path, errors="replace").read())
            if m:
                return m
        time.sleep(0.1)
    return None


def metric(text, name):
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


class SlowClients(threading.Thread):
    """`slow` connections that send a request's header lines one every 3 s, `idle` ones that
    send nothing; each is opened again when the server closes it."""

    def __init__(self, port, slow, idle):
        super().__init__(daemon=True)
        self.port, self.slow, self.idle = port, slow, idle
        self.stop = threading.Event()
        self.reconnects = 0
        self.lines = 0

    def connect(self, i):
        # From 127.0.0.2-11, under the server's per-address cap (128): the pool is under test,
        # not the cap (the agents and the checks come from 127.0.0.1).
        s = socket.socket()
        s.bind((f"127.0.0.{2 + i % 10}", 0))
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", self.port))
        return s

    def run(self):
        socks = [[self.connect(i), time.monotonic() + 3 * i / max(self.slow, 1), True, i]
                 for i in range(self.slow)]
        socks += [[self.connect(self.slow + i), float("inf"), False, self.slow + i]
                  for i in range(self.idle)]
        opened = {}
        while not self.stop.is_set():
            now = time.monotonic()
            for entry in socks:
                s, due, slow, index = entry
                try:
                    if s.recv(4096, socket.MSG_DONTWAIT) == b"":
                        raise ConnectionResetError()
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError as e:
                    if e.errno == errno.ENOTCONN:  # still connecting
                        continue
                    s.close()
                    entry[0] = self.connect(index)
                    opened[id(entry)] = False
                    self.reconnects += 1
                    continue
                if slow and now >= due:
                    try:
                        if not opened.get(id(entry)):
                            entry[0].send(b"POST /api/v1/telemetry HTTP/1.1\r\nHost: soak\r\n")
                            opened[id(entry)] = True
                        else:
                            entry[0].send(b"X-Trickle: %d\r\n" % self.lines)
                        self.lines += 1
                    except OSError:
                        pass
                    entry[1] = now + 3
            self.stop.wait(0.2)
        for entry in socks:
            entry[0].close()


class HealthPoller(threading.Thread):
    def __init__(self, url, timeout):
        super().__init__(daemon=True)
        self.url, self.timeout = url, timeout
        self.stop = threading.Event()
        self.latencies, self.failures = [], []

    def run(self):
        while not self.stop.is_set():
            code, body, secs = http(self.url + "/healthz", timeout=self.timeout)
            if code == 200:
                self.latencies.append(secs)
            else:
                self.failures.append(f"{code} after {secs:.1f} s: {body[:120]}")
            self.stop.wait(0.2)


def forged_batch(agent, seq, job_id):
    now = time.time()
    return json.dumps({"schema": "rightsize.telemetry/v1", "agent": agent, "seq": seq,
                       "jobs": [{"job": {"cluster": agent.split("/")[0], "job_id": job_id,
                                         "request": {"user": "mallory"},
                                         "outcome": {"state": "RUNNING"}},
                                 "samples": {"cpu_cores": [[now, 1.0]]}}]}).encode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rightsize")
    ap.add_argument("hot_loop")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--slow", type=int, default=500)
    ap.add_argument("--idle", type=int, default=200)
    ap.add_argument("--rss-mib", type=float, default=256)
    ap.add_argument("--health-timeout", type=float, default=10)
    args = ap.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = args.slow + args.idle + 512
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(want, soft)), hard))

    work = tempfile.mkdtemp(prefix="rightsize-soak.")
    procs = []
    try:
        cfg = os.path.join(work, "config.json")
        with open(cfg, "w") as f:
            json.dump({"agent_tokens": {"agent-secret": ["soak1/*", "soak2/*"],
                                        "rogue-token": ["*"]},
                       "max_batch_bytes": 1 << 20}, f)
        with open(os.path.join(work, "agent.token"), "w") as f:
            f.write("agent-secret\n")
        db = os.path.join(work, "serve.db")
        out, err = os.path.join(work, "serve.out"), os.path.join(work, "serve.err")
        server = subprocess.Popen(
            [args.rightsize, "--db", db, "serve", "--listen", "127.0.0.1:0", "--config", cfg],
            stdout=open(out, "w"), stderr=open(err, "w"))
        procs.append(server)
        m = wait_for(r"listening on 127\.0\.0\.1:(\d+)", out)
        if not m:
            check("server starts", False, open(err).read()[-500:])
            return 1
        port = int(m.group(1))
        url = f"http://127.0.0.1:{port}"
        check(f"server listening on {port}", True)

        # The jobs: sleepers for the whole soak and one busy process that ends early.
        env_job = lambda i: dict(os.environ, SLURM_JOB_ID=str(7000 + i), SLURM_JOB_USER="alice",
                                 SLURM_JOB_NAME=f"soak{i}", SLURM_CPUS_ON_NODE="1")
        for i in range(2):
            procs.append(subprocess.Popen(["sleep", str(int(args.seconds) + 120)],
                                          env=env_job(i)))
        procs.append(subprocess.Popen([args.hot_loop, "2"], env=env_job(9),
                                      stdout=subprocess.DEVNULL))
        agents = []
        for n in (1, 2):
            aerr = os.path.join(work, f"agent{n}.err")
            a = subprocess.Popen(
                [args.rightsize, "--db", os.path.join(work, f"agent{n}.db"), "agent",
                 "--server", url, "--token-file", os.path.join(work, "agent.token"),
                 "--cluster", f"soak{n}", "--node-name", "node1", "--interval", "0.5",
                 "--ship-interval", "1", "--spool", os.path.join(work, f"spool{n}"),
                 "--listen", "127.0.0.1:0"],
                stderr=open(aerr, "w"))
            procs.append(a)
            m = wait_for(r"/metrics on 127\.0\.0\.1:(\d+)", aerr)
            agents.append((a, aerr, int(m.group(1)) if m else None))
        check("agents started", all(p for _, _, p in agents),
              [open(e).read()[-300:] for _, e, _ in agents])

        health = HealthPoller(url, args.health_timeout)
        health.start()
        time.sleep(3)  # the agents' first batches, before the storm
        slow = SlowClients(port, args.slow, args.idle)
        slow.start()

        bomb = gzip_bomb(4000)
        gz = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
        rogue = {"Authorization": "Bearer rogue-token", "Content-Type": "application/json"}
        real = {"Authorization": "Bearer agent-secret", "Content-Type": "application/json"}
        results = {"bomb_anonymous": [], "bomb_token": [], "forged_max": [], "forged_near": [],
                   "forged_real": []}
        end = time.monotonic() + args.seconds
        round_no = 0
        while time.monotonic() < end:
            round_no += 1
            results["bomb_anonymous"].append(
                raw_post(port, "/api/v1/telemetry", bomb, gz, 20)[:1])
            results["bomb_token"].append(
                raw_post(port, "/api/v1/telemetry", bomb, dict(gz, **real), 20))
            results["forged_max"].append(http(url + "/api/v1/telemetry", forged_batch(
                "soak1/node1", 2**63 - 1, f"forged-{round_no}"), rogue, 20)[:2])
            results["forged_near"].append(http(url + "/api/v1/telemetry", forged_batch(
                "soak2/node1", int(time.time() * 1000) + 1_800_000, f"forged-n{round_no}"),
                rogue, 20)[:1])
            if round_no == 2:  # the real token itself: the real agent must resync
                results["forged_real"].append(http(url + "/api/v1/telemetry", forged_batch(
                    "soak1/node1", int(time.time() * 1000) + 1_200_000, "forged-real"),
                    real, 20)[:2])
            time.sleep(5)
        slow.stop.set()
        slow.join()
        print(f"slow clients: {slow.lines} header lines, {slow.reconnects} reconnections")

        # Let the agents deliver what waited, then stop the jobs and the agents.
        for p in procs[1:4]:
            p.kill()
        deadline = time.time() + 60
        for a, _, mport in agents:
            while mport and time.time() < deadline:
                code, text, _ = http(f"http://127.0.0.1:{mport}/metrics", timeout=5)
                if code == 200 and metric(text, "rightsize_agent_batches_queued") == 0:
                    break
                time.sleep(0.5)
        health.stop.set()
        health.join()
        made = 0
        resynced = 0
        for a, aerr, _ in agents:
            a.send_signal(signal.SIGTERM)
            a.wait(30)
            text = open(aerr, errors="replace").read()
            m = re.search(r"shipped (\d+) of (\d+) samples in (\d+) batches \((\d+) renumbered "
                          r"after a 409, (\d+) dropped\)", text)
            check(f"agent {aerr[-10:-4]} says what it shipped", m is not None, text[-500:])
            if m:
                made += int(m.group(2))
                resynced += int(m.group(4))
                check(f"agent {aerr[-10:-4]} delivered every sample it made, dropped none",
                      m.group(1) == m.group(2) and m.group(5) == "0", m.group(0))
        agent1 = open(agents[0][1], errors="replace").read()
        check("the real agent logged the server's reason and resynced", resynced >= 1 and
              "not above the last one stored" in agent1, agent1[-600:])

        status = open(f"/proc/{server.pid}/status").read()
        hwm_kib = int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1))
        code, metrics_text, _ = http(url + "/metrics", timeout=30)
        server.send_signal(signal.SIGTERM)
        server.wait(30)

        # The verdicts.
        lat = sorted(health.latencies)
        if lat:
            print(f"/healthz: {len(lat)} answers, median {lat[len(lat) // 2] * 1000:.0f} ms, "
                  f"max {lat[-1] * 1000:.0f} ms (target: 1 s on an idle machine)")
        check(f"/healthz answered every poll within {args.health_timeout:.0f} s",
              not health.failures and lat, health.failures[:5])
        check("gzip bomb without a token: 401",
              all(r == (401,) for r in results["bomb_anonymous"]), results["bomb_anonymous"])
        check("gzip bomb with a token: 413 with a JSON body",
              all(c == 413 and '"error"' in b for c, b in results["bomb_token"]),
              results["bomb_token"][:2])
        check("a forged batch numbered 2^63-1 is refused as ahead of the clock",
              all(c == 409 and "seq_ahead" in b for c, b in results["forged_max"]),
              results["forged_max"][:2])
        check("another token's batches under a real agent's name are kept apart",
              all(r == (200,) for r in results["forged_near"]), results["forged_near"][:2])
        check("the real token numbered ahead is taken (and the real agent resyncs)",
              results["forged_real"] and results["forged_real"][0][0] == 200,
              results["forged_real"])
        inflated = metric(metrics_text, "rightsize_telemetry_body_bytes_total") or 0
        check("bombs were inflated no further than the cap", inflated < round_no * (3 << 20),
              f"{inflated:.0f} bytes for {round_no} bombs")
        con = sqlite3.connect(db)
        stored = con.execute("SELECT COALESCE(SUM(n), 0) FROM series_chunks WHERE cluster IN "
                             "('soak1', 'soak2') AND job_id NOT LIKE 'forged%'").fetchone()[0]
        con.close()
        print(f"samples: {made} made by the agents, {stored} stored")
        check("no real sample lost", made > 0 and stored == made, f"{stored} of {made}")
        print(f"server peak RSS (VmHWM): {hwm_kib / 1024:.0f} MiB")
        check(f"server peak RSS under {args.rss_mib:.0f} MiB", hwm_kib / 1024 < args.rss_mib,
              f"{hwm_kib / 1024:.0f} MiB")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(FAILED)} failed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
