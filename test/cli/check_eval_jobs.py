#!/usr/bin/env python3
"""Checks `rightsize eval --jobs` lines against the eval document and the SWF trace replayed.

Usage: check_eval_jobs.py DOC.json JOBS.jsonl TRACE.swf.gz
Prints "ok" when every score of the document is recomputed from the lines, every line's job is
the trace's job of that id (submit time, user, run time), and each (target, job) appears once;
else the first mismatch.
"""
import gzip
import json
import math
import sys


def close(a, b, rel=1e-6):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


def lo(v):
    return -math.inf if v is None else v


def hi(v):
    return math.inf if v is None else v


def check(doc, lines, swf):
    if len({(l["target"], l["job_id"]) for l in lines}) != len(lines):
        return "a (target, job) appears twice"
    if len(lines) != sum(t["n"] for t in doc["targets"].values()):
        return f"{len(lines)} lines for {sum(t['n'] for t in doc['targets'].values())} scored"
    for l in lines:
        submit, user, runtime = swf[l["job_id"]]
        if (l["submit"], l["user"]) != (submit, user):
            return f"job {l['job_id']}: {l['submit']}, {l['user']} is not the trace's {submit}, {user}"
        if l["target"] == "runtime" and l["actual"] != runtime:
            return f"job {l['job_id']}: ran {l['actual']} s, the trace says {runtime}"
    for name, t in doc["targets"].items():
        mine = [l for l in lines if l["target"] == name]
        modelled = [l for l in mine if "history" in l]
        fallback = [l for l in mine if "fallback" in l]
        if len(mine) != t["n"] or len(fallback) != t.get("fallback_jobs", 0):
            return f"{name}: {len(mine)} lines, {len(fallback)} fallback"
        if len(modelled) + len(fallback) != len(mine):
            return f"{name}: a line has neither history nor fallback"
        mae = sum(abs(l["point"] - l["actual"]) for l in mine) / len(mine)
        if not close(mae, t["model"]["mae"]):
            return f"{name}: MAE {mae} from the lines, {t['model']['mae']} in the document"
        learned = sum(abs(l.get("trees", l["point"]) - l["actual"]) for l in mine) / len(mine)
        if not close(learned, t["learned"]["mae"]):
            return f"{name}: trees' MAE {learned}, {t['learned']['mae']} in the document"
        if modelled:
            for level, (a, b) in ((80, ("p10", "p90")), (95, ("p2_5", "p97_5"))):
                cov = sum(lo(l[a]) <= l["actual"] <= hi(l[b]) for l in modelled) / len(modelled)
                if abs(cov - t["model"][f"coverage{level}"]) > 1e-9:
                    return f"{name}: coverage{level} {cov}, {t['model'][f'coverage{level}']}"
        for i, c in enumerate(t.get("saving_curve", [])):
            with_req = [l for l in mine if l["request"] is not None]
            freed = lost = requested = killed = 0.0
            for l in with_req:
                if l["suggested"][i]["risk"] != c["risk"]:
                    return f"{name}: job {l['job_id']}'s risks are not the curve's"
                # As eval counts it: a suggestion above the request (or none) is the request.
                s = min(hi(l["suggested"][i]["request"]), l["request"])
                kill = l["actual"] > s and s < l["request"]
                killed += kill
                requested += l["request"] * l["weight"]
                if kill:
                    lost += s * l["weight"]
                else:
                    freed += (l["request"] - s) * l["weight"]
            if abs(killed / len(with_req) - c["model_killed"]) > 1e-9:
                return f"{name} at {c['risk']}: killed {killed / len(with_req)}, {c['model_killed']}"
            if not close((freed - lost) / requested, c["model_saved"], 1e-5):
                return f"{name} at {c['risk']}: saved {(freed - lost) / requested}, {c['model_saved']}"
    return "ok"


def main():
    doc = json.load(open(sys.argv[1]))
    lines = [json.loads(l) for l in open(sys.argv[2])]
    swf, start = {}, 0
    with gzip.open(sys.argv[3], "rt") as f:
        for row in f:
            if row.startswith(";"):
                if "UnixStartTime:" in row:
                    start = int(row.split(":")[1])
                continue
            x = row.split()
            if len(x) >= 12:
                swf[x[0]] = (start + int(x[1]), f"user{x[11]}", float(x[3]))
    print(check(doc, lines, swf))


if __name__ == "__main__":
    main()
