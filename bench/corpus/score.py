#!/usr/bin/env python3
"""Score rightsize's reading of the corpus against what the runs measured.

For each run of a measured table (bench/corpus/run.py), runs `rightsize advise job.sbatch --json`
(the analytical estimate: gpu_memory p10/p50/p90 per GPU and its terms) and
`rightsize --db EMPTY predict job.sbatch --json` (the final predictor; with no history for the
job its gpu_memory is the code's estimate, "source": "code"), and compares:

  facts       what the analysis read against what the generator wrote: batch size, sequence
              length or image size, precision, optimizer, training, checkpointing; the
              parameter count against sum(p.numel()) of the built model.
  gpu table   (device cuda) the estimate's p50 against the run's GPU footprint: NVML peak
              memory in use minus the idle memory before the run (falling back to
              torch.cuda.max_memory_reserved + the estimate's CUDA context term when NVML gave
              nothing); share inside [p10, p90]; OOM / no-OOM on GPUs of 24, 40, 48, 80 and 141 GB
              (predicted: p50 above the GPU's memory, the rule `advise` uses; measured: the
              footprint above it, or the run ran out of memory on a GPU no larger).
  cpu table   (device cpu) the GPU figure cannot be checked, as no GPU memory was used. What is
              comparable is the tensor memory the model says the job allocates - weights,
              gradients, optimizer states, activations, logits: the estimate's terms without
              the CUDA context and the allocator allowance - against the host memory the job
              added: peak RSS minus the RSS just before the model was built (the runner sets
              glibc's mmap threshold so that freed tensors leave the RSS). Also the model
              states alone (weights + gradients + optimizer states) against the RSS after the
              first optimizer step minus that baseline.

Relative error = (estimate - measured) / measured. A run whose estimate is undetermined is
counted in the coverage, not in the errors.

With --split, also per split (dev: what the estimate may be tuned on; blind: scored only).

Usage: python3 bench/corpus/score.py data/corpus/cpu-DATE.csv [--rightsize build/rightsize]
         [--corpus DIR] [--details OUT.csv] [--json OUT.json] [--split SPLIT.csv]
"""
import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate  # noqa: E402

GIB = 2.0**30
MIB = 2.0**20
# The GPUs of rightsize's table (src/code/advice.cc), by the memory NVML reports.
GPUS = [("A10-24GB", 23028 * MIB), ("A100-40GB", 40960 * MIB), ("L40S-48GB", 46068 * MIB),
        ("H100-80GB", 81559 * MIB), ("H200-141GB", 143771 * MIB)]

PRECISION = {"fp32": "fp32", "bf16": "bf16 autocast (mixed)", "fp16": "fp16 autocast (mixed)",
             "bf16-pure": "bf16", "fp16-pure": "fp16"}
OPTIMIZER = {"sgd": "SGD", "sgdm": "SGD with momentum", "adam": "Adam/AdamW",
             "adamw": "Adam/AdamW"}
STATE_TERMS = ("weights", "gradients", "optimizer states")
OVERHEAD_TERMS = ("CUDA context", "allocator overhead")


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def run_json(cmd, cwd=None):
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if out.returncode != 0:
        return None, (out.stderr.strip() or out.stdout.strip())[-300:]
    try:
        return json.loads(out.stdout), None
    except ValueError as e:
        return None, "not JSON: %s" % e


def fact(doc, name):
    f = doc["code"]["facts"].get(name)
    return None if f is None else f["value"]


def check_facts(run, doc, measured_params):
    """{fact: True/False} for the facts the generator knows."""
    out = {}
    out["batch_size"] = fact(doc, "batch_size") == run["batch_size"]
    if run["family"] == "resnet":
        out["image_size"] = fact(doc, "image_size") == run["image_size"]
        out["model"] = fact(doc, "model") == run["arch"]
    elif "seq_len" in run or "block_size" in run:
        out["seq_len"] = fact(doc, "seq_len") == run.get("seq_len", run.get("block_size"))
    out["precision"] = fact(doc, "precision") == PRECISION[run["precision"]]
    train = run["mode"] == "train"
    out["training"] = fact(doc, "training") == train
    if train:
        out["optimizer"] = fact(doc, "optimizer") == OPTIMIZER[run["optimizer"]]
        out["checkpointing"] = fact(doc, "checkpointing") == ("full" if run["ckpt"] else "none")
    return out


def pct(x):
    return "—" if x is None else "%+.0f%%" % (100 * x)


def share(xs):
    return "—" if not xs else "%.0f%% (%d/%d)" % (100 * sum(xs) / len(xs), sum(xs), len(xs))


def med_abs(errs):
    return statistics.median(abs(e) for e in errs) if errs else None


def summarize(errs):
    if not errs:
        return {"n": 0}
    a = [abs(e) for e in errs]
    return {"n": len(errs), "median_abs": statistics.median(a), "median": statistics.median(errs),
            "within_10": sum(x <= 0.10 for x in a) / len(a),
            "within_25": sum(x <= 0.25 for x in a) / len(a),
            "within_50": sum(x <= 0.50 for x in a) / len(a),
            "over": sum(e > 0 for e in errs) / len(errs)}


def main():
    p = argparse.ArgumentParser(description="Score rightsize's code analysis on a measured corpus")
    p.add_argument("measured", help="the CSV run.py wrote (its .json sidecar beside it)")
    p.add_argument("--rightsize", default=os.environ.get("RIGHTSIZE", "build/rightsize"))
    p.add_argument("--corpus", help="the corpus folder (default: regenerated from the sidecar's "
                   "size and seed, and checked against its digest)")
    p.add_argument("--details", help="write one row per run here (CSV)")
    p.add_argument("--json", help="write the summary here")
    p.add_argument("--split", help="a CSV of id,split (e.g. bench/corpus/split-cpu-2026-12-03.csv:"
                   " dev and blind runs, fixed before tuning): also score each split")
    a = p.parse_args()
    split_of = {}
    if a.split:
        with open(a.split) as f:
            split_of = {r["id"]: r["split"] for r in csv.DictReader(f)}

    base = os.path.splitext(a.measured)[0]
    with open(base + ".json") as f:
        side = json.load(f)
    with open(a.measured) as f:
        rows = list(csv.DictReader(f))
    tmp = None
    corpus = a.corpus
    if not corpus:
        tmp = tempfile.mkdtemp(prefix="rightsize-score-")
        corpus = tmp
        generate.generate(side["corpus"]["size"], side["corpus"]["seed"], corpus)
    with open(os.path.join(corpus, "manifest.json")) as f:
        doc = json.load(f)
    digest = generate.manifest_digest(doc)
    if digest != side["corpus"]["digest"]:
        sys.exit("score.py: the corpus (digest %s) is not the one measured (%s): the generator "
                 "changed since; check out the commit the table was measured with"
                 % (digest, side["corpus"]["digest"]))
    runs = {r["id"]: r for r in doc["runs"]}
    rs = shutil.which(a.rightsize) or os.path.abspath(a.rightsize)
    db_dir = tempfile.mkdtemp(prefix="rightsize-score-db-")
    db = os.path.join(db_dir, "empty.db")
    gpu = side["device"] == "cuda"
    measuring_gpu_bytes = (side["hardware"].get("gpu_memory_bytes")
                           or side["versions"].get("cuda_device_memory_bytes"))
    # The Python the runs were measured with is the one their job scripts' `python` ran: advise
    # reads its torch (what attention keeps) as it would read a job's on its cluster.
    python = side["versions"].get("python_executable") or "none"
    if python != "none" and not os.path.exists(python):
        python = "none"  # measured elsewhere: no environment to read here

    details = []
    torch_read = set()  # the torch versions advise read from `python`, "none" where it read none
    for row in rows:
        run = runs[row["id"]]
        d = {"id": row["id"], "family": run["family"], "style": run["style"], "mode": run["mode"],
             "outcome": row["outcome"], "row": row, "split": split_of.get(row["id"], "")}
        details.append(d)
        if row["outcome"] not in ("ok", "oom"):
            continue
        sbatch = os.path.join(corpus, run["dir"], "job.sbatch")
        adv, err = run_json([rs, "advise", sbatch, "--json", "--python", python])
        if adv is None:
            d["undetermined"] = "advise failed: " + (err or "")
            continue
        d["facts"] = check_facts(run, adv, num(row.get("parameters")))
        torch_read.add(fact(adv, "torch_version") or "none")
        params_fact = fact(adv, "parameters")
        mp = num(row.get("parameters"))
        if params_fact and mp:
            d["params_estimate"], d["params_measured"] = params_fact, mp
            d["params_err"] = (params_fact - mp) / mp
        est = adv.get("gpu_memory")
        if not est:
            d["undetermined"] = adv.get("gpu_memory_undetermined") or "no estimate"
        else:
            terms = {t["name"]: t["bytes"] for t in est["terms"]}
            ctx = terms.get("CUDA context", 0)
            d["p10"], d["p50"], d["p90"] = est["p10"], est["p50"], est["p90"]
            d["tensor_estimate"] = sum(b for n, b in terms.items() if n not in OVERHEAD_TERMS)
            d["states_estimate"] = sum(terms.get(n, 0) for n in STATE_TERMS)
            d["context"] = ctx
        pred, err = run_json([rs, "--db", db, "predict", sbatch, "--json", "--python", python])
        gm = (pred or {}).get("targets", {}).get("gpu_memory")
        if gm and gm.get("p50") is not None:
            d["predict_p50"], d["predict_source"] = gm["p50"], gm.get("source")
        # What was measured.
        if gpu:
            foot = num(row.get("nvml_peak_over_idle_bytes"))
            how = "nvml"
            if not foot and num(row.get("cuda_max_reserved_bytes")):
                foot = num(row["cuda_max_reserved_bytes"]) + d.get("context", 0)
                how = "reserved+context"
            d["measured"], d["measured_how"] = foot, how
            if row["outcome"] == "oom":
                d["measured_oom"] = True
            if foot and "p50" in d and row["outcome"] == "ok":
                d["err"] = (d["p50"] - foot) / foot
                d["inside"] = d["p10"] <= foot <= d["p90"]
                if "predict_p50" in d:
                    d["predict_err"] = (d["predict_p50"] - foot) / foot
            alloc = num(row.get("cuda_max_allocated_bytes"))
            if alloc and "tensor_estimate" in d and row["outcome"] == "ok":
                d["alloc_err"] = (d["tensor_estimate"] - alloc) / alloc
            st = num(row.get("cuda_step1_allocated_bytes"))
            if st and run["mode"] == "train" and "states_estimate" in d:
                d["states_err"] = (d["states_estimate"] - st) / st
        else:
            m = num(row.get("host_peak_over_baseline_bytes"))
            if m and "tensor_estimate" in d and row["outcome"] == "ok":
                d["measured"] = m
                d["err"] = (d["tensor_estimate"] - m) / m
                lo, hi = d["p10"] - d["context"], d["p90"] - d["context"]
                d["inside"] = lo <= m <= hi
                if "predict_p50" in d:
                    # predict's p50 is the same estimate: compare it the same way.
                    pt = (d["predict_p50"] - d["context"]) / 1.10
                    d["predict_err"] = (pt - m) / m
            s1 = num(row.get("host_step1_rss_bytes"))
            b0 = num(row.get("host_baseline_rss_bytes"))
            if run["mode"] == "train" and s1 and b0 and "states_estimate" in d:
                d["states_measured"] = s1 - b0
                d["states_err"] = (d["states_estimate"] - (s1 - b0)) / (s1 - b0)

    # ---- summary ----
    scored = [d for d in details if d["outcome"] in ("ok", "oom")]
    with_est = [d for d in scored if "p50" in d]
    errs = [d["err"] for d in details if "err" in d]
    version = subprocess.run([rs, "--version"], capture_output=True, text=True).stdout.strip()
    summary = {
        "measured": os.path.basename(a.measured), "device": side["device"], "rightsize": version,
        "date": side["date"], "runs": len(details), "ran": len(scored),
        "python": python, "torch_read": sorted(torch_read),
        "estimated": len(with_est),
        "analytical": summarize(errs),
        "predictor": summarize([d["predict_err"] for d in details if "predict_err" in d]),
        "inside_p10_p90": (sum(d["inside"] for d in details if "inside" in d)
                           / max(1, sum("inside" in d for d in details))),
        "states": summarize([d["states_err"] for d in details if "states_err" in d]),
        "parameters": summarize([d["params_err"] for d in details if "params_err" in d]),
        "facts": {},
        "by_family": {}, "by_style": {}, "by_split": {},
        "undetermined": {d["id"]: d["undetermined"] for d in details if "undetermined" in d},
    }
    # The memory model alone: runs whose facts were all read right and whose parameter count is
    # within 5% of the built model's.
    right = [d for d in details if "err" in d and d.get("facts") and all(d["facts"].values())
             and abs(d.get("params_err", 1)) <= 0.05]
    summary["read_right"] = summarize([d["err"] for d in right])
    summary["read_right_ids"] = [d["id"] for d in right]
    if gpu:
        summary["allocated"] = summarize([d["alloc_err"] for d in details if "alloc_err" in d])
    names = sorted({k for d in details for k in d.get("facts", {})})
    for n in names:
        v = [d["facts"][n] for d in details if n in d.get("facts", {})]
        summary["facts"][n] = {"right": sum(v), "n": len(v)}
    for key, group in (("family", "by_family"), ("style", "by_style"), ("split", "by_split")):
        for g in sorted({d[key] for d in details if d[key]}):
            ds = [d for d in details if d[key] == g]
            summary[group][g] = {
                "runs": len(ds), "estimated": sum("p50" in d for d in ds),
                "analytical": summarize([d["err"] for d in ds if "err" in d]),
                "parameters": summarize([d["params_err"] for d in ds if "params_err" in d])}
    if gpu:
        cls = {}
        for name, cap in GPUS:
            right = n = undet = ambiguous = 0
            for d in scored:
                row = d["row"]
                if d.get("measured_oom"):
                    # Out of memory on the measuring GPU: it needs more than any GPU up to that
                    # size; on a larger one the need is unknown.
                    if not measuring_gpu_bytes or cap > measuring_gpu_bytes * 1.01:
                        continue
                    truth = True
                else:
                    foot = d.get("measured")
                    if not foot:
                        continue
                    # Under pressure the caching allocator frees its cache and retries, so a
                    # run fits down to its allocated peak plus its context: between that and
                    # the footprint the answer is not known from this run.
                    alloc, res = num(row.get("cuda_max_allocated_bytes")), num(row.get("cuda_max_reserved_bytes"))
                    floor = alloc + (foot - res) if alloc and res else foot
                    if floor <= cap < foot:
                        ambiguous += 1
                        continue
                    truth = foot > cap
                if "p50" not in d:
                    undet += 1
                    continue
                n += 1
                right += (d["p50"] > cap) == truth
            cls[name] = {"right": right, "n": n, "undetermined": undet, "ambiguous": ambiguous}
        summary["oom_classification"] = cls

    print_summary(summary, side, details)
    if a.details:
        keys = ["id", "family", "style", "split", "mode", "outcome", "measured", "tensor_estimate", "p10",
                "p50", "p90", "err", "inside", "predict_p50", "predict_err", "states_measured",
                "states_estimate", "states_err", "params_measured", "params_estimate",
                "params_err", "facts_wrong", "undetermined"]
        with open(a.details, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
            w.writeheader()
            for d in details:
                out = dict(d)
                out["facts_wrong"] = " ".join(k for k, v in d.get("facts", {}).items() if not v)
                for k in ("err", "predict_err", "states_err", "params_err"):
                    if k in out:
                        out[k] = "%.4f" % out[k]
                for k in ("measured", "tensor_estimate", "p10", "p50", "p90", "predict_p50",
                          "states_measured", "states_estimate", "params_measured",
                          "params_estimate"):
                    if k in out:
                        out[k] = "%.0f" % out[k]
                w.writerow(out)
    for d in details:
        d.pop("row", None)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=2, sort_keys=True)
            f.write("\n")
    shutil.rmtree(db_dir, ignore_errors=True)
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


def line_of(s):
    if not s or not s.get("n"):
        return "n = 0"
    return ("n = %d: median |error| %.1f%%, median error %s, within ±10%% %.0f%%, ±25%% %.0f%%, "
            "±50%% %.0f%%, over-estimates %.0f%%"
            % (s["n"], 100 * s["median_abs"], pct(s["median"]), 100 * s["within_10"],
               100 * s["within_25"], 100 * s["within_50"], 100 * s["over"]))


def print_summary(s, side, details):
    hw = side["hardware"]
    ver = side["versions"]
    print("# %s (%s, %s)" % (s["measured"], side["device"], s["date"]))
    print("machine: %s, %s cores%s; python %s, torch %s%s"
          % (hw.get("cpu_model"), hw.get("cpu_cores"),
             (", %s (driver %s)" % (hw.get("gpu_name"), hw.get("gpu_driver"))) if hw.get("gpu_name") else "",
             ver.get("python"), ver.get("torch"),
             (", CUDA %s" % ver.get("torch_cuda")) if ver.get("torch_cuda") else ""))
    print("scored with: %s" % s["rightsize"])
    print("the runs' Python as advise read it: %s, torch %s"
          % (s["python"], ", ".join(s["torch_read"]) or "-"))
    if s["python"] != "none" and "none" in s["torch_read"]:
        # The figures then read attention as if the torch were unknown (fused where the code
        # asks for it), not as the runs had it: install the same torch to reproduce them.
        msg = ("WARNING: the runs were measured with torch %s under %s, but here it imports no "
               "torch: attention is read as the code asks, not as that torch had it"
               % (ver.get("torch"), s["python"]))
        print(msg)
        print(msg, file=sys.stderr)
    print("runs: %d in the table, %d ran to an outcome, %d with an estimate (%d undetermined)"
          % (s["runs"], s["ran"], s["estimated"], len(s["undetermined"])))
    what = ("estimate p50 vs GPU footprint (NVML peak - idle)" if side["device"] == "cuda" else
            "tensor estimate (weights+grads+optimizer+activations+logits) vs host peak RSS - baseline")
    print("analytical, %s: %s" % (what, line_of(s["analytical"])))
    print("final predictor (predict, no history: source code): %s" % line_of(s["predictor"]))
    print("inside [p10, p90]%s: %.0f%%" % (" (less the CUDA context)" if side["device"] != "cuda" else "",
                                          100 * s["inside_p10_p90"]))
    print("runs read right (every fact, parameters within 5%%): %s" % line_of(s["read_right"]))
    print("model states after step 1: %s" % line_of(s["states"]))
    print("parameter count: %s" % line_of(s["parameters"]))
    if "allocated" in s:
        print("tensor estimate vs max_memory_allocated: %s" % line_of(s["allocated"]))
    print("facts read right: " + ", ".join("%s %d/%d" % (k, v["right"], v["n"]) for k, v in s["facts"].items()))
    for g in ("by_family", "by_style", "by_split"):
        if not s[g]:
            continue
        print("%s:" % g.replace("_", " "))
        for k, v in s[g].items():
            print("  %-18s runs %2d, estimated %2d; memory: %s; parameters: %s"
                  % (k, v["runs"], v["estimated"], line_of(v["analytical"]),
                     ("median |error| %.1f%%" % (100 * v["parameters"]["median_abs"]))
                     if v["parameters"].get("n") else "n = 0"))
    if "oom_classification" in s:
        print("OOM / no-OOM (predicted: p50 > GPU memory; of the runs with an estimate, and of "
              "all, counting an undetermined estimate as wrong):")
        for k, v in s["oom_classification"].items():
            print("  %-12s %s right; of all %s%s" % (
                k, share([True] * v["right"] + [False] * (v["n"] - v["right"])),
                share([True] * v["right"] + [False] * (v["n"] + v["undetermined"] - v["right"])),
                (", %d too close to call (between allocated and reserved peak)" % v["ambiguous"])
                if v["ambiguous"] else ""))
    if s["undetermined"]:
        print("undetermined:")
        for k, v in s["undetermined"].items():
            print("  %s: %s" % (k, v[:160]))


if __name__ == "__main__":
    sys.exit(main())
