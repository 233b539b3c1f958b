#!/usr/bin/env python3
"""Scores `rightsize eval --jobs` on the changing-programs corpus, split by user.

The runs are split by simulated user before any tuning on them (2026-12-07): development = odd
user numbers (u01, u03, ...), blind = even. Each scored prediction (peak memory in GiB, run time in
seconds: the targets `eval` scores here) is put in one of three kinds by the corpus table's change_kind: the first run after a change, an unchanged run,
or a program's first run. Prints, per part and kind, rightsize's MAE beside the baselines that
`eval` computed for the same jobs (user_mean, last2, VPA), its difference from the best of them,
and the share of actual values inside the 80 % and 95 % intervals (an unbounded side covers),
over the jobs that had one: a job scored before the replay's first model (`eval` then ships
the request, with no interval) is counted in the MAE and in the last column, not in the
coverage. A baseline `eval` gave no value for some of the jobs is shown as nan and not compared.

Two sets of baselines are compared. `eval`'s (user_mean, last2, VPA): the user's history of
the same job name, and the request when there are fewer than two runs (so last2 is the request
for a new program's first runs). And the corpus's own (`changing.py baselines`, marked "c."):
the earlier runs of the same user and program, or, for a new program, all of the user's earlier
runs, which never fall back to the request. "vs best" is against the best of all six.

Usage: score_replay.py JOBS.jsonl [TABLE.csv]
"""
import csv
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import changing  # noqa: E402  (the corpus's baselines, as `changing.py baselines` computes them)

CORPUS_TARGET = {"peak_memory": "peak_rss_bytes", "runtime": "elapsed_s"}


def corpus_baselines(table_rows):
    """{(run id, eval target): {baseline: value}} for every run after its user's first."""
    rows = [dict(r) for r in table_rows if r["outcome"] == "COMPLETED"]
    for r in rows:
        for c in CORPUS_TARGET.values():
            r[c] = float(r[c] or 0)
    rows.sort(key=lambda r: (r["submit_time"], r["id"]))
    out, by_user = {}, {}
    for r in rows:
        hist = by_user.setdefault(r["user"], [])
        if hist:
            same = [h for h in hist if h["program"] == r["program"]] or hist
            now = changing._ts(r["submit_time"])
            for target, column in CORPUS_TARGET.items():
                out[(r["id"], target)] = changing.predict(
                    [(changing._ts(h["submit_time"]), h[column]) for h in same], now)
        hist.append(r)
    return out


def main():
    jobs_path = sys.argv[1]
    table = sys.argv[2] if len(sys.argv) > 2 else "data/corpus/changing-cpu-2026-12-07.csv"
    table_rows = list(csv.DictReader(open(table)))
    kind = {r["id"]: r["change_kind"] for r in table_rows}
    own = corpus_baselines(table_rows)
    jobs = [json.loads(line) for line in open(jobs_path)]
    jobs = [j for j in jobs if j["job_id"] in kind]
    for j in jobs:
        for b, v in own.get((j["job_id"], j["target"]), {}).items():
            j["baselines"]["c." + b] = v

    def part(user):
        return "dev" if int(user[1:]) % 2 else "blind"

    def sort(j):
        k = kind[j["job_id"]]
        return "after a change" if k not in ("none", "new") else (
            "unchanged" if k == "none" else "first run")

    def inside(j, lo, hi):
        return (j[lo] or 0) <= j["actual"] <= (j[hi] if j[hi] is not None else float("inf"))

    def share(js, lo, hi):
        with_interval = [j for j in js if lo in j]
        if not with_interval:
            return "—"
        return f"{100 * sum(inside(j, lo, hi) for j in with_interval) / len(with_interval):.0f} %"

    units = {"peak_memory": ("GiB", 2.0 ** 30), "runtime": ("s", 1.0)}
    all_names = ("user_mean", "last2", "vpa", "c.user_mean", "c.last2", "c.vpa")
    print("| target | part | runs | n | rightsize | user_mean | last2 | VPA | c.user_mean | c.last2 "
          "| c.VPA | vs best | cov80 | cov95 | no model yet |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for target, (unit, scale) in units.items():
        for p in ("dev", "blind", "all"):
            for s in ("after a change", "unchanged", "first run"):
                js = [j for j in jobs if j["target"] == target and sort(j) == s and
                      (p == "all" or part(j["user"]) == p)]
                if not js:
                    continue

                def mae(f):
                    return sum(abs(f(j) - j["actual"]) for j in js) / len(js) / scale

                names = [n for n in all_names
                         if all(j["baselines"].get(n) is not None for j in js)]
                base = {n: mae(lambda j, n=n: j["baselines"][n]) for n in names}
                base.update({n: float("nan") for n in all_names if n not in base})
                best = min(names, key=base.get)
                m = mae(lambda j: j["point"])
                no_model = sum("p10" not in j for j in js)
                cells = " | ".join(f"{base[n]:.4f}" for n in all_names)
                print(f"| {target} ({unit}) | {p} | {s} | {len(js)} | {m:.4f} | {cells} "
                      f"| {100 * (m / base[best] - 1):+.1f} % ({best}) | {share(js, 'p10', 'p90')} "
                      f"| {share(js, 'p2_5', 'p97_5')} | {no_model} |")


if __name__ == "__main__":
    main()
