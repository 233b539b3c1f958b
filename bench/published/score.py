#!/usr/bin/env python3
"""Score rightsize's analytical GPU-memory estimate on published measured runs.

Reads data/published-gpu-memory/runs.csv (see its SOURCES.md), writes each row as a job folder
with bench/published/generate.py, runs `rightsize advise OUT/<id>/job.sbatch --json --gpu <the
source's GPU>` on it, and compares the estimate with the published figure.

What is compared depends on what the source measured (column measured_what):

  nvml_used              the estimate's p50, all terms (its CUDA context and allocator allowance
                         included): the driver's reading holds both.
  max_memory_allocated   the estimate's tensor terms only (p50 less the "CUDA context" and
                         "allocator overhead" terms): max_memory_allocated counts live tensors.
  peak_unspecified       p50 less the CUDA context (torchtune's counters exclude it; whether the
                         allocator's cache is in is not stated).

Relative error = (estimate - measured) / measured. A run with no estimate (advise failed, or
"gpu_memory" undetermined) is a miss: the medians "counting misses" put a miss above every
error (|error| = infinity), so a median is infinite when more than half the runs are misses; the
medians "over estimated runs" leave misses out. The parameter count read from the program is
compared with the table's params_true (counted from the model's config.json) where it has one.

Usage: python3 bench/published/score.py [--rightsize build/rightsize] [--split dev|blind|all]
         [--model-ref hub|local] [--out DIR] [--details OUT.csv] [--json OUT.json]
"""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate  # noqa: E402

OVERHEAD = ("CUDA context", "allocator overhead")


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def advise(rs, sbatch, gpu):
    # The published runs ran elsewhere, in environments their sources describe (the table's
    # `attention`): this machine's Python is not theirs.
    cmd = [rs, "advise", sbatch, "--json", "--python", "none"] + (["--gpu", gpu] if gpu else [])
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return None, "advise failed: " + (out.stderr.strip() or out.stdout.strip())[-300:]
    try:
        return json.loads(out.stdout), None
    except ValueError as e:
        return None, "advise printed no JSON: %s" % e


def fact(doc, name):
    f = doc.get("code", {}).get("facts", {}).get(name)
    return None if f is None else f.get("value")


def comparable(est, what):
    terms = {t["name"]: t["bytes"] for t in est["terms"]}
    if what == "nvml_used":
        return est["p50"]
    if what == "max_memory_allocated":
        return sum(b for n, b in terms.items() if n not in OVERHEAD)
    return est["p50"] - terms.get("CUDA context", 0)


def med_abs(errs, misses=0):
    """Median |error|, a miss counting as infinitely wrong; None when there is nothing."""
    a = sorted(abs(e) for e in errs) + [math.inf] * misses
    return statistics.median(a) if a else None


def summarize(ds):
    errs = [d["err"] for d in ds if "err" in d]
    misses = sum(1 for d in ds if "err" not in d)
    s = {"runs": len(ds), "estimated": len(errs), "misses": misses,
         "median_abs_counting_misses": med_abs(errs, misses),
         "median_abs_estimated": med_abs(errs)}
    if errs:
        s["median_error_estimated"] = statistics.median(errs)
        s["within_25_of_all"] = sum(abs(e) <= 0.25 for e in errs) / len(ds)
        s["over_estimates"] = sum(e > 0 for e in errs) / len(errs)
    perr = [d["params_err"] for d in ds if "params_err" in d]
    if perr:
        s["params_median_abs"] = med_abs(perr)
        s["params_exact"] = sum(abs(e) <= 0.005 for e in perr)
        s["params_n"] = len(perr)
    return s


def pct(x):
    if x is None:
        return "—"
    if math.isinf(x):
        return "∞ (misses)"
    return "%.1f%%" % (100 * x)


def line(s):
    out = "runs %2d, estimated %2d: median |error| %s counting misses, %s over estimated runs" % (
        s["runs"], s["estimated"], pct(s["median_abs_counting_misses"]),
        pct(s["median_abs_estimated"]))
    if "median_error_estimated" in s:
        out += " (median error %+.0f%%, over-estimates %.0f%%; within ±25%%: %.0f%% of all runs)" % (
            100 * s["median_error_estimated"], 100 * s["over_estimates"],
            100 * s["within_25_of_all"])
    if "params_n" in s:
        out += "; parameters exact (±0.5%%) %d/%d, median |error| %s" % (
            s["params_exact"], s["params_n"], pct(s["params_median_abs"]))
    return out


def main():
    p = argparse.ArgumentParser(description="Score rightsize advise on published GPU-memory runs")
    p.add_argument("--rightsize", default=os.environ.get("RIGHTSIZE", "build/rightsize"))
    p.add_argument("--table", default=generate.TABLE)
    p.add_argument("--split", choices=("dev", "blind", "all"), default="all")
    p.add_argument("--model-ref", choices=("hub", "local"), default="hub")
    p.add_argument("--out", help="write the job folders here (default: a temporary folder)")
    p.add_argument("--details", help="write one row per run here (CSV)")
    p.add_argument("--json", help="write the summary here")
    a = p.parse_args()

    rs = shutil.which(a.rightsize) or os.path.abspath(a.rightsize)
    if not os.access(rs, os.X_OK):
        sys.exit("score.py: %s is not an executable rightsize (build it: cmake --build build "
                 "--target rightsize)" % a.rightsize)
    tmp = None
    out = a.out
    if not out:
        tmp = out = tempfile.mkdtemp(prefix="rightsize-published-")
    rows = generate.read_table(a.table)
    if a.split != "all":
        rows = [r for r in rows if r["split"] == a.split]

    details = []
    for row in rows:
        d = {"id": row["id"], "split": row["split"], "source": row["source"], "task": row["task"],
             "model": row["model"], "measured_what": row["measured_what"],
             "measured": float(row["measured_bytes"])}
        details.append(d)
        folder = generate.write_run(dict(row), out, a.model_ref)
        gpu = generate.rightsize_gpu(row)
        doc, err = advise(rs, os.path.join(folder, "job.sbatch"), gpu)
        if doc is None:
            d["miss"] = err
            continue
        d["facts"] = {k: fact(doc, k) for k in ("model", "parameters", "batch_size", "seq_len",
                                                 "precision", "optimizer", "checkpointing",
                                                 "training", "parallelism", "zero_stage")}
        pt = num(row["params_true"])
        pf = num(d["facts"]["parameters"])
        if pt and pf:
            d["params_err"] = (pf - pt) / pt
        est = doc.get("gpu_memory")
        if not est:
            d["miss"] = doc.get("gpu_memory_undetermined") or "no gpu_memory estimate"
            continue
        d["p50"] = est["p50"]
        d["estimate"] = comparable(est, row["measured_what"])
        d["err"] = (d["estimate"] - d["measured"]) / d["measured"]
        d["terms"] = {t["name"]: t["bytes"] for t in est["terms"]}

    version = subprocess.run([rs, "--version"], capture_output=True, text=True).stdout.strip()
    summary = {"rightsize": version, "table": os.path.relpath(a.table, generate.ROOT),
               "model_ref": a.model_ref, "all": summarize(details), "by_split": {},
               "by_task": {}, "by_source": {}}
    for key, group in (("split", "by_split"), ("task", "by_task"), ("source", "by_source")):
        for g in sorted({d[key] for d in details}):
            summary[group][g] = summarize([d for d in details if d[key] == g])
    for sp in sorted({d["split"] for d in details}):
        summary["by_split"][sp]["by_task"] = {
            t: summarize([d for d in details if d["split"] == sp and d["task"] == t])
            for t in sorted({d["task"] for d in details if d["split"] == sp})}

    print("# published measured GPU memory (%s), scored with %s, models by %s name"
          % (summary["table"], version, a.model_ref))
    print("all:   " + line(summary["all"]))
    for sp, s in summary["by_split"].items():
        print("%-6s " % (sp + ":") + line(s))
        for t, st in s["by_task"].items():
            print("    %-24s %s" % (t, line(st)))
    print("by source:")
    for g, s in summary["by_source"].items():
        print("    %-24s %s" % (g, line(s)))
    worst = sorted((d for d in details if "err" in d), key=lambda d: -abs(d["err"]))[:10]
    print("worst estimated runs:")
    for d in worst:
        f = d.get("facts", {})
        print("    %s %-5s %-28s %-22s err %+6.0f%%  est %.1f GiB vs %.1f GiB (%s); read: params %s, "
              "batch %s, seq %s, precision %s, optimizer %s" % (
                  d["id"], d["split"], d["model"][:28], d["task"], 100 * d["err"],
                  d["estimate"] / 2**30, d["measured"] / 2**30, d["measured_what"],
                  ("%.3gB" % (f["parameters"] / 1e9)) if f.get("parameters") else "?",
                  f.get("batch_size"), f.get("seq_len"), f.get("precision"), f.get("optimizer")))
    misses = [d for d in details if "miss" in d]
    if misses:
        print("misses (no estimate):")
        for d in misses:
            print("    %s %-5s %-28s %s" % (d["id"], d["split"], d["model"][:28], d["miss"][:150]))

    if a.details:
        keys = ["id", "split", "source", "task", "model", "measured_what", "measured", "estimate",
                "p50", "err", "params_err", "facts", "miss"]
        import csv
        with open(a.details, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
            w.writeheader()
            for d in details:
                o = dict(d)
                for k in ("measured", "estimate", "p50"):
                    if k in o:
                        o[k] = "%.0f" % o[k]
                for k in ("err", "params_err"):
                    if k in o:
                        o[k] = "%.4f" % o[k]
                if "facts" in o:
                    o["facts"] = json.dumps(o["facts"], sort_keys=True)
                w.writerow(o)
    if a.json:
        def clean(x):
            if isinstance(x, dict):
                return {k: clean(v) for k, v in x.items()}
            if isinstance(x, float) and math.isinf(x):
                return "inf"
            return x
        with open(a.json, "w") as f:
            json.dump(clean(summary), f, indent=2, sort_keys=True)
            f.write("\n")
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
