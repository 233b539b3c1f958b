#!/usr/bin/python3
"""A Kubernetes cluster's history as kube-state-metrics, cAdvisor and dcgm-exporter export it.

  k8s_history.py generate OUT.om EXPECT.json T0 T_END   OpenMetrics for promtool's backfill, and
                                                          the records `ingest prometheus` must make
  k8s_history.py check EXPECT.json STORE.db              compares the store with them; prints
                                                          ok:/FAIL: lines, exits 1 on a failure

25 pods over [T0, T_END] at 60 s: three runs of the CronJob "nightly" and twelve of "report", a
Job killed by the OOM killer, a Job that failed with exit code 3 after a restart, a PyTorchJob's
master and three workers on A100s (one worker's GPU series carry exported_* labels, as when
dcgm-exporter is scraped without honor_labels), a Deployment's three pods of two containers (two
still running at T_END, one deleted while it ran; an init container and the pod cgroup in
cAdvisor only), a pod that never started, and a bare pod reported by an old kube-state-metrics
(resource_requests_cpu_cores, no completion time).
"""
import json
import sqlite3
import sys

STEP = 60
GI = 1 << 30
MI = 1 << 20


class Writer:
    def __init__(self):
        self.families = {}

    def add(self, name, labels, t, v):
        lab = ",".join(f'{k}="{val}"' for k, val in labels.items())
        self.families.setdefault(name, []).append(f"{name}{{{lab}}} {v} {t}")

    def series(self, name, labels, times, value):
        for t in times:
            self.add(name, labels, t, value(t) if callable(value) else value)

    def write(self, path):
        with open(path, "w") as f:
            for name, lines in self.families.items():
                f.write(f"# TYPE {name} gauge\n")
                f.write("\n".join(lines))
                f.write("\n")
            f.write("# EOF\n")


def span(a, b):
    """Sample times in [a, b)."""
    return range(a, b, STEP)


def generate(out, expect_path, t0, t_end):
    w = Writer()
    expect = {"records": {}, "pods": 0, "running": 0, "t0": t0, "t_end": t_end}

    def pod(ns, name, containers, created, start=None, end=None, final_phase=None, delete=None,
            owner=("<none>", "<none>"), labels=None, qos="Burstable", node="node-1",
            old_ksm=False, completion=True, job_name=None):
        delete = min(delete if delete is not None else t_end + STEP, t_end + STEP)
        life = span(created, delete)
        pl = {"namespace": ns, "pod": name, "uid": f"uid-{name}"}
        phases = ["Pending", "Running", "Succeeded", "Failed", "Unknown"]

        def phase_at(t):
            if start is None or t < start:
                return "Pending"
            if end is None or t < end:
                return "Running"
            return final_phase

        for ph in phases:
            w.series("kube_pod_status_phase", {**pl, "phase": ph}, life,
                     lambda t, ph=ph: 1 if phase_at(t) == ph else 0)
        w.series("kube_pod_created", pl, life, created)
        w.series("kube_pod_owner", {**pl, "owner_kind": owner[0], "owner_name": owner[1],
                                    "owner_is_controller": "true" if owner[0] != "<none>" else
                                    "<none>"}, life, 1)
        w.series("kube_pod_info", {**pl, "node": node, "host_ip": "10.0.0.1",
                                   "created_by_kind": owner[0], "created_by_name": owner[1]},
                 life, 1)
        kl = {f"label_{k}": v for k, v in (labels or {}).items()}
        w.series("kube_pod_labels", {**pl, **kl}, life, 1)
        for q in ["BestEffort", "Burstable", "Guaranteed"]:
            w.series("kube_pod_status_qos_class", {**pl, "qos_class": q}, life,
                     1 if q == qos else 0)
        if start is not None:
            w.series("kube_pod_start_time", pl, [t for t in life if t >= start], start)
        if end is not None and final_phase and completion:
            w.series("kube_pod_completion_time", pl, [t for t in life if t >= end], end)
        running_at_end = start is not None and end is None and delete > t_end
        if start is not None:
            expect["pods"] += 1
        for c in containers:
            cl = {**pl, "container": c["name"]}
            w.series("kube_pod_container_info", {**cl, "image": c.get("image", "busybox:1"),
                                                 "container_id": f"containerd://{name}{c['name']}"},
                     life, 1)
            for kind in ["requests", "limits"]:
                for res, v in c.get(kind, {}).items():
                    if old_ksm:
                        metric = {"cpu": "cpu_cores", "memory": "memory_bytes"}[res]
                        w.series(f"kube_pod_container_resource_{kind}_{metric}", cl, life, v)
                    else:
                        unit = {"cpu": "core", "memory": "byte"}.get(res, "integer")
                        w.series(f"kube_pod_container_resource_{kind}",
                                 {**cl, "resource": res, "unit": unit, "node": node}, life, v)
            restarts = c.get("restarts", 0)
            w.series("kube_pod_container_status_restarts_total", cl, life, restarts)
            if c.get("last_reason"):
                mid = start + (end - start) // 2 // STEP * STEP
                w.series("kube_pod_container_status_last_terminated_reason",
                         {**cl, "reason": c["last_reason"]}, span(mid, delete), 1)
                w.series("kube_pod_container_status_last_terminated_exitcode", cl,
                         span(mid, delete), c["exit"])
            if end is not None and final_phase:
                w.series("kube_pod_container_status_terminated_reason",
                         {**cl, "reason": c["reason"]}, span(end, delete), 1)
            if start is None:
                continue
            # cAdvisor, while the container runs.
            stop = end if end is not None else delete
            run = list(span(start, stop))
            cid = f"{name}-{c['name']}"
            cad = {**cl, "id": f"/kubepods/burstable/pod{pl['uid']}/{cid}", "name": cid,
                   "image": c.get("image", "busybox:1"), "instance": node}
            peak, base = c["peak"], c["peak"] // 2
            peak_at = run[len(run) // 2]
            w.series("container_memory_working_set_bytes", cad, run,
                     lambda t: peak if t == peak_at else base + (t - start) % 7 * MI)
            cores = c["cores"]
            w.series("container_cpu_usage_seconds_total", cad, run,
                     lambda t: round(cores * (t - start), 3))
            gpu = c.get("gpu")
            if gpu:
                gl = {"gpu": "0", "UUID": gpu["uuid"], "Hostname": node,
                      "modelName": "NVIDIA A100-SXM4-80GB", "DCGM_FI_DRIVER_VERSION": "535.104"}
                if gpu.get("exported"):
                    gl.update({"exported_namespace": ns, "exported_pod": name,
                               "exported_container": c["name"], "namespace": "gpu-operator",
                               "pod": "dcgm-exporter-7xk2p", "container": "nvidia-dcgm-exporter"})
                else:
                    gl.update({"namespace": ns, "pod": name, "container": c["name"]})
                fb_at = run[len(run) // 3]
                w.series("DCGM_FI_DEV_FB_USED", gl, run,
                         lambda t: gpu["fb_mib"] if t == fb_at else gpu["fb_mib"] - 1000)
                w.series("DCGM_FI_DEV_GPU_UTIL", gl, run,
                         lambda t: gpu["util"] + (5 if (t // STEP) % 2 else -5))
            rec = {
                "job_id": f"{ns}/{name}/{c['name']}", "user": ns, "account": ns,
                "job_name": job_name + "/" + c["name"] if job_name else None,
                "qos": qos, "start_time": start, "submit_time": created,
                "end_time": None if running_at_end else (end if end is not None else life[-1]),
                "state": c["state"] if not running_at_end else "RUNNING",
                "peak_rss_bytes": peak,
                "cpu_time_s": round(cores * (run[-1] - start), 3),
                "source": "prometheus", "node_list": node,
            }
            lim, req = c.get("limits", {}), c.get("requests", {})
            if "cpu" in lim or "cpu" in req:
                rec["req_cpus"] = lim.get("cpu", req.get("cpu"))
            if "memory" in lim or "memory" in req:
                rec["req_mem_bytes"] = lim.get("memory", req.get("memory"))
            rec["req_gpus"] = lim.get("nvidia_com_gpu", req.get("nvidia_com_gpu", 0))
            if "exit" in c and c["state"] == "FAILED":
                rec["exit_code"] = c["exit"]
            if c["state"] == "COMPLETED":
                rec["exit_code"] = 0
            if gpu:
                rec["peak_gpu_mem_bytes"] = gpu["fb_mib"] * MI
                rec["gpu_util_pct"] = gpu["util"]
                rec["req_gpu_type"] = "a100-80gb"
            expect["records"][rec["job_id"]] = rec
            if running_at_end:
                expect["running"] += 1
        # An init container and the pod's own cgroup: cAdvisor only.
        if start is not None and ns == "web":
            w.series("container_memory_working_set_bytes", {**pl, "container": "init"},
                     span(start - 120, start), 50 * MI)
            w.series("container_memory_working_set_bytes", {**pl, "container": "POD"},
                     span(start, start + 600), 900 * GI)
            w.series("container_memory_working_set_bytes", {**pl, "id": f"/kubepods/{name}"},
                     span(start, start + 600), 900 * GI)

    # CronJob "nightly": a run a day, 2 h each.
    for d in range(3):
        sched = t0 + d * 86400 + 7200
        job = f"nightly-{sched // 60}"
        pod("batch", f"{job}-{'abcde fghij klmno'.split()[d]}", [{
            "name": "etl", "requests": {"cpu": 2, "memory": 4 * GI}, "limits": {"memory": 4 * GI},
            "peak": int(1.5 * GI) + d * 100 * MI, "cores": 1.0, "reason": "Completed",
            "state": "COMPLETED"}],
            created=sched, start=sched + 60, end=sched + 60 + 7200, final_phase="Succeeded",
            delete=sched + 60 + 7200 + 1800, owner=("Job", job), job_name="nightly")
    # CronJob "report": every 6 h, 20 min each; requests only.
    for i in range(12):
        sched = t0 + 1800 + i * 6 * 3600
        job = f"report-{sched // 60}"
        pod("batch", f"{job}-r{i:04d}", [{
            "name": "report", "requests": {"cpu": 0.5, "memory": GI},
            "peak": 300 * MI + i * MI, "cores": 0.25, "reason": "Completed",
            "state": "COMPLETED"}],
            created=sched, start=sched + 60, end=sched + 60 + 1200, final_phase="Succeeded",
            delete=sched + 60 + 1200 + 600, owner=("Job", job), job_name="report")
    # A Job killed by the OOM killer at its 2 GiB limit.
    s = t0 + 10 * 3600
    pod("batch", "oom-job-k2x9p", [{
        "name": "train", "requests": {"cpu": 1, "memory": 2 * GI},
        "limits": {"memory": 2 * GI}, "peak": 2 * GI, "cores": 0.9, "reason": "OOMKilled",
        "state": "OUT_OF_MEMORY"}],
        created=s, start=s + 60, end=s + 60 + 3600, final_phase="Failed", delete=s + 4 * 3600,
        owner=("Job", "oom-job"), job_name="oom-job")
    # A Job whose container exited 3, was restarted, and failed again.
    s = t0 + 12 * 3600
    pod("batch", "bad-job-q8w4z", [{
        "name": "main", "requests": {"cpu": 1, "memory": GI}, "peak": 200 * MI, "cores": 0.5,
        "reason": "Error", "last_reason": "Error", "exit": 3, "restarts": 1,
        "state": "FAILED"}],
        created=s, start=s + 60, end=s + 60 + 1800, final_phase="Failed", delete=s + 3 * 3600,
        owner=("Job", "bad-job"), job_name="bad-job")
    # A PyTorchJob: master and three workers, one A100 each.
    s = t0 + 30 * 3600
    for role, idx, fb, util, node in [("master", 0, 10000, 20, "gpu-node-1"),
                                      ("worker", 0, 30000, 60, "gpu-node-1"),
                                      ("worker", 1, 31000, 60, "gpu-node-2"),
                                      ("worker", 2, 29000, 60, "gpu-node-2")]:
        res = {"cpu": 8, "memory": 32 * GI, "nvidia_com_gpu": 1}
        pod("ml", f"ddp-{role}-{idx}", [{
            "name": "pytorch", "requests": res, "limits": res, "peak": 20 * GI, "cores": 4.0,
            "reason": "Completed", "state": "COMPLETED", "image": "ghcr.io/lab/train:v2",
            "gpu": {"uuid": f"GPU-{role}-{idx}", "fb_mib": fb, "util": util,
                    "exported": role == "worker" and idx == 2}}],
            created=s, start=s + 120, end=s + 120 + 6 * 3600, final_phase="Succeeded",
            delete=s + 7 * 3600, owner=("PyTorchJob", "ddp"), qos="Guaranteed", node=node,
            labels={"training_kubeflow_org_job_name": "ddp",
                    "training_kubeflow_org_replica_type": role},
            job_name=f"ddp/{role}")
    # An idle GPU no pod holds.
    w.series("DCGM_FI_DEV_FB_USED", {"gpu": "3", "UUID": "GPU-idle", "Hostname": "gpu-node-2",
                                     "modelName": "NVIDIA A100-SXM4-80GB"},
             span(t0, t_end), 0)
    # A Deployment's pods: two still running at T_END, one deleted while it ran.
    s = t0 + 3600
    for suffix, delete in [("aaaaa", None), ("bbbbb", None), ("ccccc", t0 + 40 * 3600)]:
        pod("web", f"api-7d4b9c8f6d-{suffix}", [
            {"name": "app", "requests": {"cpu": 0.5, "memory": GI}, "limits": {"memory": 2 * GI},
             "peak": int(1.2 * GI), "cores": 0.3, "state": "CANCELLED"},
            {"name": "sidecar", "requests": {"cpu": 0.1, "memory": 128 * MI},
             "limits": {"cpu": 0.2, "memory": 256 * MI}, "peak": 100 * MI, "cores": 0.01,
             "state": "CANCELLED"}],
            created=s, start=s + 60, delete=delete, owner=("ReplicaSet", "api-7d4b9c8f6d"),
            job_name="api")
    # A pod that never started.
    pod("batch", "stuck-job-zzzzz", [{"name": "main", "requests": {"cpu": 64, "memory": GI},
                                      "peak": 0, "cores": 0, "state": "none"}],
        created=t0 + 50 * 3600, owner=("Job", "stuck-job"))
    # A bare pod from an old kube-state-metrics: *_cpu_cores / *_memory_bytes, no completion time.
    s = t0 + 20 * 3600
    pod("legacy", "old-1", [{
        "name": "worker", "requests": {"cpu": 1, "memory": 512 * MI},
        "limits": {"memory": 512 * MI}, "peak": 400 * MI, "cores": 0.8, "reason": "Completed",
        "state": "COMPLETED"}],
        created=s, start=s + 60, end=s + 60 + 3600, final_phase="Succeeded", delete=s + 2 * 3600,
        old_ksm=True, completion=False, job_name="old-1")
    w.write(out)
    with open(expect_path, "w") as f:
        json.dump(expect, f, indent=1)


def check(expect_path, db):
    expect = json.load(open(expect_path))
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    rows = {r["job_id"]: dict(r) for r in con.execute("select * from jobs")}
    failed = 0

    def ok(what, cond, detail=""):
        nonlocal failed
        print(("ok: " if cond else "FAIL: ") + what + ("" if cond else f": {detail}"))
        failed += 0 if cond else 1

    ok("one record per container of each started pod", len(rows) == len(expect["records"]),
       f"{len(rows)} rows, want {len(expect['records'])}: {sorted(set(rows) ^ set(expect['records']))}")
    ok("no record for the pod that never started",
       not any("stuck-job" in k for k in rows), sorted(rows))
    ok("no record for the init container or the pod cgroup",
       not any(k.endswith(("/init", "/POD", "/")) for k in rows), sorted(rows))
    for job_id, want in expect["records"].items():
        got = rows.get(job_id)
        if got is None:
            ok(f"{job_id} stored", False, "missing")
            continue
        bad = []
        for field, value in want.items():
            if field == "job_name" and value is None:
                continue
            g = got.get(field)
            if field == "end_time" and want["state"] == "CANCELLED":
                # Last seen: backfilled series have no staleness marker, so they stay visible
                # for Prometheus's 5-minute lookback.
                good = g is not None and value <= g <= value + 300
            elif field in ("cpu_time_s", "gpu_util_pct", "req_cpus"):
                good = g is not None and abs(g - value) <= max(0.01 * abs(value), 0.01)
            else:
                good = g == value
            if not good:
                bad.append(f"{field}={g!r} want {value!r}")
        ok(f"{job_id}: {want['state']} {want['job_name']}", not bad, "; ".join(bad))
    names = {r["job_name"] for r in rows.values() if "nightly" in r["job_id"]}
    ok("the CronJob's three runs share one job name", names == {"nightly/etl"}, names)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    if sys.argv[1] == "generate":
        generate(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        check(sys.argv[2], sys.argv[3])
