#!/usr/bin/env python3
"""Recomputes `rightsize eval pods`'s figures from the CSV itself, independently of the C++:
every pod-hour's recommendation by KRR (max x 1.15), VPA (the end of the 24 h peak's
exponential bucket x 1.15, at least 250 MiB; one interval covers these few hours) and
rightsize (peak x (1 + 0.6 / (1 + hours since the peak rose by over 1 %))), scored on the
next hour. Usage: check_eval_pods.py CSV.gz DOC.json; exits 1 on any difference."""
import collections, csv, gzip, json, math, sys

GIB = 2 ** 30
rows = csv.DictReader(gzip.open(sys.argv[1], "rt"))
pods = collections.defaultdict(list)
for r in rows:
    pods[r["container_ip"]].append((float(r["timestamp_anon"]), float(r["value"])))
doc = json.load(open(sys.argv[2]))
start = min(s[0][0] for s in map(sorted, pods.values()))


def bucket_end(v):
    b = 0 if v < 1e7 else int(math.log(v * 0.05 / 1e7 + 1) / math.log(1.05))
    return 1e7 * (1.05 ** (b + 1) - 1) / 0.05


def rightsize(past, now):
    peak, rise = 0.0, past[0][0]
    for t, v in past:
        if v > peak * 1.01:
            rise = t
        peak = max(peak, v)
    return peak * (1 + 0.6 / (1 + (now - rise) / 3600))


def vpa(past, now):
    # One interval: its peak is the first sample, replaced by larger ones unless it was 0.
    peak = past[0][1]
    if peak != 0:
        peak = max(v for t, v in past)
    return max(bucket_end(peak) * 1.15, 250 * 2 ** 20)


methods = {"krr": lambda p, now: max(v for t, v in p) * 1.15, "vpa": vpa, "rightsize": rightsize}
want = {m: [0, 0, 0.0, 0.0] for m in methods}  # pod-hours, under, held, baseline
for key, s in pods.items():
    s.sort()
    b = start
    while True:
        past = [x for x in s if x[0] < b]
        if len(past) == len(s):
            break
        nxt = [v for t, v in s if b <= t < b + 3600]
        if len(past) >= 100 and nxt:
            peak = max(v for t, v in past)
            for m, f in methods.items():
                r = f(past, b)
                w = want[m]
                w[0] += 1
                w[1] += max(nxt) > r
                w[2] += r
                w[3] += peak
        b += 3600

bad = 0
got = {m["method"]: m for m in doc["all"]["methods"]}
for m, (n, under, held, base) in want.items():
    g = got[m]
    checks = [("pod_hours", n, g["pod_hours"]), ("under_hours", under, g["under_hours"]),
              ("freed_gib_hours", (base - held) / GIB, g["freed_gib_hours"]),
              ("baseline_gib_hours", base / GIB, g["baseline_gib_hours"])]
    for name, w, v in checks:
        if abs(w - v) > 1e-6 * max(1, abs(w)):
            print(f"FAIL {m} {name}: recomputed {w}, rightsize printed {v}")
            bad += 1
        else:
            print(f"ok {m} {name} = {v}")
sys.exit(1 if bad else 0)
