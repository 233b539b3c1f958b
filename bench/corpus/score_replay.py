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

Usage: score_replay.py JOBS.jsonl [TABLE.csv]
"""
import csv
import json
import sys


def main():
    jobs_path = sys.argv[1]
    table = sys.argv[2] if len(sys.argv) > 2 else "data/corpus/changing-cpu-2026-12-06.csv"
    kind = {r["id"]: r["change_kind"] for r in csv.DictReader(open(table))}
    jobs = [json.loads(line) for line in open(jobs_path)]
    jobs = [j for j in jobs if j["job_id"] in kind]

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
    print("| target | part | runs | n | rightsize | user_mean | last2 | VPA | vs best | cov80 | cov95 "
          "| no model yet |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for target, (unit, scale) in units.items():
        for p in ("dev", "blind", "all"):
            for s in ("after a change", "unchanged", "first run"):
                js = [j for j in jobs if j["target"] == target and sort(j) == s and
                      (p == "all" or part(j["user"]) == p)]
                if not js:
                    continue

                def mae(f):
                    return sum(abs(f(j) - j["actual"]) for j in js) / len(js) / scale

                names = [n for n in ("user_mean", "last2", "vpa")
                         if all(j["baselines"].get(n) is not None for j in js)]
                base = {n: mae(lambda j, n=n: j["baselines"][n]) for n in names}
                base.update({n: float("nan") for n in ("user_mean", "last2", "vpa") if n not in base})
                best = min(names, key=base.get)
                m = mae(lambda j: j["point"])
                no_model = sum("p10" not in j for j in js)
                print(f"| {target} ({unit}) | {p} | {s} | {len(js)} | {m:.4f} | {base['user_mean']:.4f} | "
                      f"{base['last2']:.4f} | {base['vpa']:.4f} | {100 * (m / base[best] - 1):+.1f} % "
                      f"({best}) | {share(js, 'p10', 'p90')} | {share(js, 'p2_5', 'p97_5')} "
                      f"| {no_model} |")


if __name__ == "__main__":
    main()
