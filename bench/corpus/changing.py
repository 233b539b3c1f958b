#!/usr/bin/env python3
"""The measured corpus of changing programs (issue 25): simulated users each run one real PyTorch
program many times over simulated weeks and now and then change its arguments or its code.

  changing.py generate --seed S --out DIR       write the corpus (deterministic, byte-identical)
  changing.py run DIR --out data/corpus/changing-cpu-DATE.jsonl [--device cpu|cuda]
                                                run it in schedule order under `rightsize run
                                                --json`, appending one document per run;
                                                resumable (ids already in the output are skipped)
  changing.py table FILE.jsonl                  (re)write the CSV and the .json sidecar
  changing.py excerpt FILE.jsonl --corpus DIR --users u05,u08 --out test/data/corpus-changing
                                                copy a few users' runs and folders for tests
  changing.py baselines FILE.jsonl [--doc docs/accuracy-changing.md]
                                                replay user_mean, last2 and VPA in time order and
                                                score them on the runs right after a change and on
                                                unchanged runs

The corpus folder DIR holds manifest.json (users, programs, the schedule, every run's facts and
change), schedule.csv, and one folder per run, runs/<id>/, with job.sbatch and the program
(train.py or infer.py, config.json for the config style) exactly as that run saw it. The
programs come from bench/corpus/generate.py's writers (five families, four styles) with the
run's hyper-parameters; a change edits the sbatch line, the config or the code, wherever the
style keeps that value.

Each measured run is one JSON line: the rightsize.run/v1 document that `rightsize run --json`
printed, with job.request.user, job.request.job_name, job.job_id and job.cluster ("corpus") set,
the job's submit/start/end times moved onto the simulated calendar, and a top-level "corpus"
object {id, user, program, step, change_kind, change, script}. Standard library only; the
programs need torch and torchvision (Debian: python3-torch python3-torchvision
libopenblas0-pthread).
"""
import argparse
import bisect
import csv
import datetime
import hashlib
import json
import math
import os
import platform
import random
import re
import shlex
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import generate  # noqa: E402

SCHEMA = "rightsize.corpus.changing/v1"
STEPS = 2
START = datetime.datetime(2026, 1, 5, 0, 0, 0)  # a Monday
FAMILIES = ("mlp", "resnet", "encoder", "gpt", "seq2seq")
CHANGE_KINDS = ("new", "none", "batch", "seq", "width", "depth", "precision", "ckpt", "optimizer",
                "workers", "family")
# How often each kind of change is drawn (where it applies).
CHANGE_WEIGHTS = {"batch": 3.0, "seq": 2.0, "width": 1.5, "depth": 1.5, "precision": 1.5,
                  "ckpt": 1.0, "optimizer": 1.0, "workers": 1.0, "family": 0.6}
P_CHANGE = 1.0 / 6.0
P_REVERT = 0.25
# Bounds on the rough cost model: FLOPs of the whole run and memory added over the ~0.25 GB that
# python + torch + the data take, so a run is 1-4 s of one CPU thread after the import and its
# peak host memory lies in 0.3-3 GB.
FLOPS_MIN, FLOPS_MAX = 8e9, 40e9
MEM_MIN, MEM_MAX = 0.08 * 2**30, 2.6 * 2**30
CPU_FLOPS = 25e9

MLP_HIDDEN = (512, 1024, 1536, 2048, 3072, 4096, 6144)
RESNET_ARCH = ("resnet18", "resnet34", "resnet50")
IMAGE = (64, 96, 128, 160, 192, 224)
WIDTH = (128, 192, 256, 384, 512, 640, 768)
SEQ = (32, 64, 128, 256, 512, 1024)
BATCH_MAX = {"mlp": 2048, "resnet": 128, "encoder": 128, "gpt": 128, "seq2seq": 128}
WORKERS = (0, 1, 2)
OPTIMIZERS = ("sgd", "sgdm", "adam", "adamw")


# ---------------------------------------------------------------------------------------------
# The rough cost model (only to keep runs inside the bounds; not a prediction).

RESNET_MACS = {"resnet18": 1.82e9, "resnet34": 3.67e9, "resnet50": 4.11e9}  # per 224 image
RESNET_PARAMS = {"resnet18": 11.7e6, "resnet34": 21.8e6, "resnet50": 25.6e6}
RESNET_ACT = {"resnet18": 30e6, "resnet34": 45e6, "resnet50": 110e6}  # bytes per 224 image


def _transformer(d, ff, layers, tokens, seq, heads, decoder=False):
    per_layer = 4 * d * d + 2 * d * ff + (4 * d * d if decoder else 0)
    macs = per_layer * layers * tokens + 2 * tokens * seq * d * layers * (2 if decoder else 1)
    attention = (tokens // max(seq, 1)) * heads * seq * seq * 4 * 3
    act = (tokens * d * 4 * 18 + attention) * layers
    return per_layer * layers, macs, act


def cost(r):
    """(FLOPs of the run, bytes added over the baseline) of run facts `r`, roughly."""
    f, b = r["family"], r["batch_size"]
    train = r["mode"] == "train"
    opt_states = {"sgd": 0, "sgdm": 1, "adam": 2, "adamw": 2, None: 0}[r.get("optimizer")]
    if f == "mlp":
        h = r["hidden"]
        params = r["in_features"] * h + (r["depth"] - 1) * h * h + h * r["num_classes"]
        macs = params * b
        act = b * h * r["depth"] * 4 * 4
    elif f == "resnet":
        scale = (r["image_size"] / 224.0) ** 2
        params = RESNET_PARAMS[r["arch"]]
        macs = RESNET_MACS[r["arch"]] * scale * b
        act = RESNET_ACT[r["arch"]] * scale * b * (0.4 if r.get("ckpt") else 1.0)
    elif f == "encoder":
        d, s = r["d_model"], r["seq_len"]
        dense, macs, act = _transformer(d, r["d_ff"], r["n_layers"], b * s, s, r["n_heads"])
        head = d * r["vocab_size"] if r["head"] == "lm" else 0
        params = dense + head + r["vocab_size"] * d
        macs += head * b * s
        act += (b * s * r["vocab_size"] * 4 * 3) if r["head"] == "lm" else 0
        if r.get("ckpt"):
            act = act / r["n_layers"] + b * s * d * 4 * r["n_layers"]
    elif f == "gpt":
        d, s = r["n_embd"], r["block_size"]
        dense, macs, act = _transformer(d, 4 * d, r["n_layer"], b * s, s, r["n_head"])
        params = dense + r["vocab_size"] * d
        macs += r["vocab_size"] * d * b * s
        act += b * s * r["vocab_size"] * 4 * 3
        if r.get("ckpt"):
            act = act / r["n_layer"] + b * s * d * 4 * r["n_layer"]
    else:  # seq2seq
        d, s = r["d_model"], r["seq_len"]
        e, me, ae = _transformer(d, r["d_ff"], r["enc_layers"], b * s, s, r["n_heads"])
        dd, md, ad = _transformer(d, r["d_ff"], r["dec_layers"], b * s, s, r["n_heads"], True)
        head = d * r["vocab_size"]
        params = e + dd + head + 2 * r["vocab_size"] * d
        macs = me + md + head * b * s
        act = ae + ad + b * s * r["vocab_size"] * 4 * 3
    if r["precision"] == "bf16":
        act *= 0.8
    if train:
        flops = 2 * macs * 3 * STEPS
        mem = params * 4 * (2 + opt_states) + act
    else:
        flops = 2 * macs * STEPS
        mem = params * 4 + act * 0.15
    return flops, mem


def fits(r):
    flops, mem = cost(r)
    return FLOPS_MIN <= flops <= FLOPS_MAX and MEM_MIN <= mem <= MEM_MAX


# ---------------------------------------------------------------------------------------------
# Programs: a user's first program, and the changes.

def _pick(rng, seq):
    return seq[rng.randrange(len(seq))]


def new_program(rng, family, mode):
    """Facts of a new program of `family` that fits the bounds, near a memory drawn
    log-uniformly over the range (so that users span 0.3-3 GB, not just the easy middle)."""
    target = math.exp(rng.uniform(math.log(MEM_MIN * 2), math.log(MEM_MAX * 0.8)))
    for attempt in range(20000):
        r = {"family": family, "mode": mode, "precision": _pick(rng, ("fp32", "fp32", "bf16")),
             "optimizer": _pick(rng, OPTIMIZERS) if mode == "train" else None, "ckpt": False,
             "num_workers": _pick(rng, (0, 0, 0, 1, 2))}
        if family == "mlp":
            r.update(in_features=1024, hidden=_pick(rng, MLP_HIDDEN), depth=rng.randint(2, 8),
                     num_classes=100, batch_size=_pick(rng, (16, 32, 64, 128, 256, 512, 1024)))
        elif family == "resnet":
            r.update(arch=_pick(rng, RESNET_ARCH), image_size=_pick(rng, IMAGE), num_classes=1000,
                     batch_size=_pick(rng, (4, 8, 16, 32)))
        elif family == "encoder":
            d = _pick(rng, WIDTH)
            r.update(head=_pick(rng, ("lm", "cls")), vocab_size=_pick(rng, (8000, 16000)),
                     d_model=d, n_heads=d // 64, d_ff=4 * d, n_layers=rng.randint(2, 8),
                     seq_len=_pick(rng, SEQ[1:]), num_classes=10,
                     batch_size=_pick(rng, (2, 4, 8, 16, 32)))
        elif family == "gpt":
            d = _pick(rng, WIDTH)
            r.update(n_layer=rng.randint(2, 10), n_embd=d, n_head=d // 64,
                     block_size=_pick(rng, SEQ[1:]), vocab_size=8192, dropout=0.0,
                     batch_size=_pick(rng, (2, 4, 8, 16, 32)))
        else:
            d = _pick(rng, WIDTH[:5])
            r.update(vocab_size=8000, d_model=d, n_heads=d // 64, d_ff=4 * d,
                     enc_layers=rng.randint(1, 4), dec_layers=rng.randint(1, 4),
                     seq_len=_pick(rng, SEQ[:5]), batch_size=_pick(rng, (2, 4, 8, 16, 32)))
        if mode == "train" and family in ("resnet", "encoder", "gpt") and rng.random() < 0.2:
            r["ckpt"] = True
        if fits(r) and (attempt > 15000 or abs(math.log(cost(r)[1] / target)) < 0.4):
            return r
    raise RuntimeError("no %s program fits the bounds" % family)


def _step(values, current, rng):
    """The neighbour of `current` in `values`, up or down at random (clamped)."""
    i = values.index(current) if current in values else min(
        range(len(values)), key=lambda k: abs(values[k] - current))
    j = i + (1 if rng.random() < 0.5 else -1)
    if j < 0 or j >= len(values):
        j = i - (j - i)
    return values[j]


def propose(rng, r, kind):
    """The facts after a change of `kind`, and its description; None if it does not apply."""
    f, train = r["family"], r["mode"] == "train"
    n = dict(r)
    if kind == "batch":
        b = r["batch_size"]
        nb = b * 2 if (rng.random() < 0.5 and b * 2 <= BATCH_MAX[f]) or b <= 2 else b // 2
        n["batch_size"] = nb
        return n, "batch_size %d -> %d" % (b, nb)
    if kind == "seq":
        if f == "mlp":
            return None
        if f == "resnet":
            n["image_size"] = _step(IMAGE, r["image_size"], rng)
            return n, "image_size %d -> %d" % (r["image_size"], n["image_size"])
        key = "block_size" if f == "gpt" else "seq_len"
        n[key] = _step(SEQ, r[key], rng)
        return n, "%s %d -> %d" % (key, r[key], n[key])
    if kind == "width":
        if f == "resnet":
            return None
        if f == "mlp":
            n["hidden"] = _step(MLP_HIDDEN, r["hidden"], rng)
            return n, "hidden %d -> %d" % (r["hidden"], n["hidden"])
        key, heads = ("n_embd", "n_head") if f == "gpt" else ("d_model", "n_heads")
        d = _step(WIDTH, r[key], rng)
        n[key], n[heads] = d, d // 64
        if "d_ff" in r:
            n["d_ff"] = 4 * d
        return n, "%s %d -> %d" % (key, r[key], d)
    if kind == "depth":
        if f == "resnet":
            n["arch"] = _step(RESNET_ARCH, r["arch"], rng)
            return n, "arch %s -> %s" % (r["arch"], n["arch"])
        if f == "seq2seq":
            key = _pick(rng, ("enc_layers", "dec_layers"))
            lo, hi = 1, 6
        else:
            key = {"mlp": "depth", "encoder": "n_layers", "gpt": "n_layer"}[f]
            lo, hi = 2, 12
        v = r[key] + _pick(rng, (-2, -1, 1, 2))
        v = min(hi, max(lo, v))
        if v == r[key]:
            return None
        n[key] = v
        return n, "%s %d -> %d" % (key, r[key], v)
    if kind == "precision":
        n["precision"] = "bf16" if r["precision"] == "fp32" else "fp32"
        return n, "precision %s -> %s" % (r["precision"], n["precision"])
    if kind == "ckpt":
        if not train or f not in ("resnet", "encoder", "gpt"):
            return None
        n["ckpt"] = not r["ckpt"]
        return n, "activation checkpointing %s" % ("on" if n["ckpt"] else "off")
    if kind == "optimizer":
        if not train:
            return None
        n["optimizer"] = _pick(rng, [o for o in OPTIMIZERS if o != r["optimizer"]])
        return n, "optimizer %s -> %s" % (r["optimizer"], n["optimizer"])
    if kind == "workers":
        n["num_workers"] = _pick(rng, [w for w in WORKERS if w != r["num_workers"]])
        return n, "num_workers %d -> %d" % (r["num_workers"], n["num_workers"])
    return None


# ---------------------------------------------------------------------------------------------
# The schedule.

def workdays(weeks):
    for w in range(weeks):
        for d in range(5):
            yield START + datetime.timedelta(days=7 * w + d)


def user_schedule(rng, weeks, start_week):
    """Submit times of one user's runs: a few a day on workdays, some days off."""
    per_day = rng.choice((1.5, 2.0, 2.5, 3.0))
    times = []
    for day in workdays(start_week + weeks):
        if day < START + datetime.timedelta(days=7 * start_week):
            continue
        if rng.random() < 0.2:
            continue
        n = max(0, min(5, int(round(rng.gauss(per_day, 1.0)))))
        for _ in range(n):
            sec = rng.randint(8 * 3600, 19 * 3600)
            times.append(day + datetime.timedelta(seconds=sec))
    return sorted(times)


def run_facts(r):
    keep = ("family", "mode", "precision", "optimizer", "ckpt", "num_workers", "batch_size",
            "in_features", "hidden", "depth", "num_classes", "arch", "image_size", "head",
            "vocab_size", "d_model", "n_heads", "d_ff", "n_layers", "seq_len", "n_layer",
            "n_embd", "n_head", "block_size", "dropout", "enc_layers", "dec_layers")
    return {k: r[k] for k in keep if k in r}


def plan(seed):
    """Users, their programs and every run (with its change), in submit order."""
    rng = random.Random("rightsize-changing-%d" % seed)
    n_users = rng.randint(18, 22)
    fams = [FAMILIES[i % len(FAMILIES)] for i in range(n_users)]
    rng.shuffle(fams)
    styles = [generate.STYLES[i % len(generate.STYLES)] for i in range(n_users)]
    rng.shuffle(styles)
    runs, users = [], []
    for u in range(n_users):
        user = "u%02d" % (u + 1)
        urng = random.Random("rightsize-changing-%d-%s" % (seed, user))
        mode = "infer" if urng.random() < 0.15 and fams[u] != "seq2seq" else "train"
        weeks = urng.randint(4, 8)
        times = user_schedule(urng, weeks, urng.randint(0, 1))
        programs = {}  # name -> {"style", "facts"}
        fam = fams[u]
        prog = "%s-%s" % (user, fam)
        programs[prog] = {"style": styles[u], "facts": new_program(urng, fam, mode)}
        facts = programs[prog]["facts"]
        history = []  # (program, facts, kind) before each change, for reverts
        counts = {}
        for step, t in enumerate(times):
            kind, desc = ("new", "first run of %s" % prog) if step == 0 else ("none", "")
            if step > 0 and urng.random() < P_CHANGE:
                if history and urng.random() < P_REVERT:
                    old_prog, old_facts, old_kind = history.pop()
                    kind = old_kind
                    desc = "revert to %s" % (old_prog if old_prog != prog
                                             else _diff(facts, old_facts))
                    prog, facts = old_prog, old_facts
                else:
                    kinds = [k for k in CHANGE_WEIGHTS]
                    weights = [CHANGE_WEIGHTS[k] for k in kinds]
                    for _ in range(12):
                        k = urng.choices(kinds, weights)[0]
                        if k == "family":
                            nf = urng.choice([x for x in FAMILIES if x != facts["family"]
                                              and not (x == "seq2seq" and mode == "infer")])
                            name = "%s-%s" % (user, nf)
                            i = 2
                            while name in programs:
                                name = "%s-%s%d" % (user, nf, i)
                                i += 1
                            programs[name] = {"style": urng.choice(generate.STYLES),
                                              "facts": new_program(urng, nf, mode)}
                            history.append((prog, facts, "family"))
                            kind, desc = "family", "new program %s (%s)" % (name, nf)
                            prog, facts = name, programs[name]["facts"]
                            break
                        got = propose(urng, facts, k)
                        if got and fits(got[0]):
                            history.append((prog, facts, k))
                            kind, desc = k, got[1]
                            facts = got[0]
                            break
            programs[prog]["facts"] = facts
            counts[kind] = counts.get(kind, 0) + 1
            runs.append({"user": user, "program": prog, "style": programs[prog]["style"],
                         "step": step, "submit": t, "change_kind": kind, "change": desc,
                         "facts": dict(facts)})
        users.append({"user": user, "weeks": weeks, "runs": len(times),
                      "programs": sorted(programs), "changes": counts})
    runs.sort(key=lambda x: (x["submit"], x["user"]))
    for x in runs:
        x["id"] = "%s-%04d" % (x["user"], x["step"] + 1)
    return users, runs


def _diff(a, b):
    return ", ".join("%s %s -> %s" % (k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b))
                     if a.get(k) != b.get(k) and k not in ("n_heads", "n_head", "d_ff"))


# ---------------------------------------------------------------------------------------------
# generate

def write_program(seed, run, d):
    """Writes runs/<id>/ for one run; returns (entry, argv, sha of the code)."""
    r = dict(run["facts"])
    r["id"] = run["program"]
    v = generate.Values(run["style"], r, random.Random("changing-%d-%s" % (seed, run["program"])))
    code = generate.GENERATORS[r["family"]](v, STEPS)
    entry = "train.py" if r["mode"] == "train" else "infer.py"
    argv = ["--config", "config.json"] if v.style == "config" else []
    argv += v.cmdline + v.flags
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, entry), "w") as f:
        f.write(code)
    if v.config:
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(v.config, f, indent=2)
            f.write("\n")
    with open(os.path.join(d, "job.sbatch"), "w") as f:
        f.write(generate.sbatch(entry, argv, r, "cpu"))
    return entry, argv, hashlib.sha256(code.encode()).hexdigest()[:16]


def cmd_generate(a):
    users, runs = plan(a.seed)
    if os.path.exists(os.path.join(a.out, "runs")):
        shutil.rmtree(os.path.join(a.out, "runs"))
    os.makedirs(os.path.join(a.out, "runs"))
    out = []
    for run in runs:
        d = os.path.join(a.out, "runs", run["id"])
        entry, argv, sha = write_program(a.seed, run, d)
        flops, mem = cost(run["facts"])
        out.append({"id": run["id"], "user": run["user"], "program": run["program"],
                    "style": run["style"], "step": run["step"],
                    "submit_time": run["submit"].strftime("%Y-%m-%dT%H:%M:%S"),
                    "change_kind": run["change_kind"], "change": run["change"],
                    "facts": run["facts"], "entry": entry, "argv": argv, "sha256": sha,
                    "dir": "runs/" + run["id"], "script": "runs/%s/job.sbatch" % run["id"],
                    "rough_gflops": round(flops / 1e9, 1),
                    "rough_added_gib": round(mem / 2**30, 2)})
    doc = {"schema": SCHEMA, "seed": a.seed, "steps": STEPS,
           "generator": "bench/corpus/changing.py", "users": users, "runs": out}
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    with open(os.path.join(a.out, "schedule.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "user", "program", "style", "step", "submit_time", "change_kind",
                    "change", "entry", "argv", "rough_gflops", "rough_added_gib"])
        for r in out:
            w.writerow([r["id"], r["user"], r["program"], r["style"], r["step"],
                        r["submit_time"], r["change_kind"], r["change"], r["entry"],
                        " ".join(r["argv"]), r["rough_gflops"], r["rough_added_gib"]])
    kinds = {}
    for r in out:
        kinds[r["change_kind"]] = kinds.get(r["change_kind"], 0) + 1
    print("wrote %d runs of %d users to %s (seed %d, digest %s); changes: %s"
          % (len(out), len(users), a.out, a.seed, digest(doc),
             ", ".join("%s %d" % (k, kinds[k]) for k in CHANGE_KINDS if k in kinds)))
    return 0


def digest(doc):
    h = hashlib.sha256()
    for r in doc["runs"]:
        h.update(("%s %s %s %s\n" % (r["id"], r["sha256"], r["submit_time"], " ".join(r["argv"])))
                 .encode())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# run

CSV_COLUMNS = ["id", "user", "program", "step", "submit_time", "change_kind", "change", "outcome",
               "peak_rss_bytes", "cpu_time_s", "elapsed_s", "cpu_cores", "peak_gpu_memory_bytes"]


def _iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S")


def corpus_doc(doc, run, device):
    """The measured document with the corpus's keys set (the contract in bench/corpus/README.md)."""
    job = doc["job"]
    submit = datetime.datetime.strptime(run["submit_time"], "%Y-%m-%dT%H:%M:%S")
    elapsed = float(job.get("usage", {}).get("elapsed_s") or 0)
    job["request"]["user"] = run["user"]
    job["request"]["job_name"] = run["program"]
    job["job_id"] = run["id"]
    job["cluster"] = "corpus" if device == "cpu" else "corpus-gpu"
    job["submit_time"] = _iso(submit)
    job["start_time"] = _iso(submit)
    job["end_time"] = _iso(submit + datetime.timedelta(seconds=round(elapsed)))
    doc["corpus"] = {"id": run["id"], "user": run["user"], "program": run["program"],
                     "step": run["step"], "change_kind": run["change_kind"],
                     "change": run["change"], "script": run["script"]}
    return with_record(doc)


def with_record(doc):
    """The contract names the job record "record"; rightsize.run/v1 calls it "job". Both are
    written, the same object."""
    doc["record"] = doc["job"]
    return doc


def done_ids(path):
    ids = set()
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    ids.add(json.loads(line)["corpus"]["id"])
                except (ValueError, KeyError):
                    pass  # a line cut by a kill: the run is measured again
    return ids


def cmd_run(a):
    with open(os.path.join(a.corpus, "manifest.json")) as f:
        man = json.load(f)
    if a.python is None:
        a.python = "/usr/bin/python3" if a.device == "cpu" else (shutil.which("python3") or
                                                                 "python3")
    rs = os.path.abspath(a.rightsize)
    if not os.access(rs, os.X_OK):
        sys.exit("changing.py: no rightsize at %s (build it: cmake --build build --target "
                 "rightsize)" % rs)
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               MALLOC_MMAP_THRESHOLD_="65536", PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    if a.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    else:
        env.pop("OMP_NUM_THREADS")
    if subprocess.run([a.python, "-c", "import torch, torchvision"], env=env,
                      capture_output=True).returncode != 0:
        sys.exit("changing.py: %s cannot import torch and torchvision (Debian: apt-get install "
                 "python3-torch python3-torchvision libopenblas0-pthread)" % a.python)
    if a.device == "cuda" and subprocess.run(
            [a.python, "-c", "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"],
            env=env, capture_output=True).returncode != 0:
        sys.exit("changing.py: --device cuda, but torch.cuda.is_available() is False in %s"
                 % a.python)
    done = done_ids(a.out)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)) or ".", exist_ok=True)
    runs = [r for r in man["runs"] if r["id"] not in done]
    if a.only:
        runs = [r for r in runs if re.search(a.only, r["id"])]
    if a.limit:
        runs = runs[:a.limit]
    started = time.time()
    loads = []
    print("changing.py: %d runs to do (%d done in %s), device %s" %
          (len(runs), len(done), a.out, a.device), flush=True)
    prefix = ["nice", "-n", str(a.nice)] if a.nice else []
    counter = [0]

    def measure(run):
        """Runs one job under rightsize run; returns its document or None."""
        if a.time_cap and time.time() - started > a.time_cap:
            return None
        cwd = os.path.join(a.corpus, run["dir"])
        cmd = prefix + [rs, "run", "--json", "--interval", str(a.interval), "--name",
                        run["program"], "--", a.python, run["entry"]] + run["argv"]
        try:
            p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                               timeout=a.timeout)
            doc = json.loads(_last_json(p.stdout))
        except subprocess.TimeoutExpired:
            print("changing.py: %s: over --timeout %.0f s, not recorded" % (run["id"], a.timeout),
                  flush=True)
            return None
        except ValueError:
            print("changing.py: %s: no JSON from rightsize run (rc %d): %s"
                  % (run["id"], p.returncode, p.stderr.strip()[-300:]), flush=True)
            return None
        doc = corpus_doc(doc, run, a.device)
        doc["probe"] = _probe(p.stdout)  # the program's RSS marks, for checking the figures
        # When and under what load it really ran (run time is noisy on a shared machine).
        doc["measured"] = {"at": datetime.datetime.now(datetime.timezone.utc)
                           .strftime("%Y-%m-%dT%H:%M:%SZ"),
                           "load_1min": round(os.getloadavg()[0], 2), "device": a.device}
        return doc

    def record(run, doc):
        with open(a.out, "a") as f:
            f.write(json.dumps(doc, sort_keys=True) + "\n")
        counter[0] += 1
        load = os.getloadavg()[0]
        loads.append(load)
        u = doc["job"]["usage"]
        print("[%4d/%d] %s %-16s %-9s %-8s %5.2f GiB %5.1f s cpu %5.1f s  load %.1f  %s"
              % (counter[0], len(runs), run["id"], run["program"], run["change_kind"],
                 doc["job"]["outcome"]["state"], (u.get("peak_memory_bytes") or 0) / 2**30,
                 u.get("elapsed_s") or 0, u.get("cpu_time_s") or 0, load, run["change"]),
              flush=True)

    if a.jobs <= 1:
        for run in runs:
            doc = measure(run)
            if doc is None and a.time_cap and time.time() - started > a.time_cap:
                print("changing.py: time cap of %.0f s reached" % a.time_cap, flush=True)
                break
            if doc is not None:
                record(run, doc)
    else:
        # Runs started in schedule order, a.jobs at a time; each recorded as it ends.
        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
            pending = {}
            it = iter(runs)
            for run in it:
                pending[pool.submit(measure, run)] = run
                if len(pending) >= a.jobs:
                    break
            while pending:
                done, _ = concurrent.futures.wait(
                    pending, return_when=concurrent.futures.FIRST_COMPLETED)
                for fut in done:
                    run = pending.pop(fut)
                    if fut.result() is not None:
                        record(run, fut.result())
                    nxt = next(it, None)
                    if nxt is not None and not (a.time_cap and
                                                time.time() - started > a.time_cap):
                        pending[pool.submit(measure, nxt)] = nxt
    write_table(a.out, command=" ".join(shlex.quote(x) for x in sys.argv), device=a.device,
                python=a.python, env=env, run_loads=loads, corpus=a.corpus, manifest=man,
                nice=a.nice, jobs=a.jobs)
    return 0


def _last_json(text):
    """The rightsize.run/v1 document in rightsize run's stdout: the program's own output comes
    first, the document (indented, opening with a "{" line) last."""
    start = 0 if text.startswith("{\n") else text.rindex("\n{\n") + 1
    return text[start:]


def _probe(text):
    """The program's own probe line (bench/corpus/generate.py), or None."""
    for line in text.splitlines():
        if line.startswith("RIGHTSIZE_CORPUS "):
            try:
                return json.loads(line[len("RIGHTSIZE_CORPUS "):])
            except ValueError:
                return None
    return None


# ---------------------------------------------------------------------------------------------
# table

def read_docs(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    out.sort(key=lambda d: (d["job"]["submit_time"], d["corpus"]["id"]))
    return out


def flat(doc):
    job, c = doc["job"], doc["corpus"]
    u = job.get("usage", {})
    return {"id": c["id"], "user": c["user"], "program": c["program"], "step": c["step"],
            "submit_time": job["submit_time"], "change_kind": c["change_kind"],
            "change": c["change"], "outcome": job["outcome"]["state"],
            "peak_rss_bytes": u.get("peak_memory_bytes"), "cpu_time_s": u.get("cpu_time_s"),
            "elapsed_s": u.get("elapsed_s"),
            "cpu_cores": (doc.get("usage") or {}).get("mean_cpu_cores"),
            "peak_gpu_memory_bytes": u.get("peak_gpu_memory_bytes")}


def versions(python):
    code = ("import json, platform, torch, torchvision; print(json.dumps({'python': "
            "platform.python_version(), 'torch': torch.__version__, 'torchvision': "
            "torchvision.__version__, 'cuda_available': torch.cuda.is_available()}))")
    p = subprocess.run([python, "-c", code], capture_output=True, text=True)
    try:
        v = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        v = {"error": p.stderr.strip()[-300:]}
    if shutil.which("dpkg-query"):
        out = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Version}\\n",
                              "python3-torch", "python3-torchvision", "libopenblas0-pthread"],
                             capture_output=True, text=True).stdout
        v["debian_packages"] = [l for l in out.splitlines() if l.strip()]
    git = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    v["rightsize_commit"] = git
    return v


def hardware():
    import run as corpus_run  # bench/corpus/run.py
    return corpus_run.hardware("cpu", 0)


def write_table(path, command=None, device="cpu", python="/usr/bin/python3", env=None,
                run_loads=None, corpus=None, manifest=None, nice=None, jobs=1):
    docs = read_docs(path)
    if any("record" not in d for d in docs):  # lines written before "record" was added
        with open(path + ".tmp", "w") as f:
            for d in docs:
                f.write(json.dumps(with_record(d), sort_keys=True) + "\n")
        os.replace(path + ".tmp", path)
    base = os.path.splitext(path)[0]
    rows = [flat(d) for d in docs]
    with open(base + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r[k] is None else r[k]) for k in CSV_COLUMNS})
    side_path = base + ".json"
    side = {}
    if os.path.exists(side_path):
        with open(side_path) as f:
            side = json.load(f)
    outcomes = {}
    for r in rows:
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
    loads = sorted(d["measured"]["load_1min"] for d in docs if "measured" in d)
    if loads:
        side["load_average_1min"] = {
            "runs": len(loads), "mean": round(sum(loads) / len(loads), 2),
            "median": loads[len(loads) // 2], "max": loads[-1],
            "note": "the machine's 1-minute load average as each run ended (2 CPUs, shared "
                    "with builds); run time is noisy under load, CPU time less so"}
    ats = sorted(d["measured"]["at"] for d in docs if "measured" in d)
    if ats:
        side["measured_between"] = [ats[0], ats[-1]]
    side.update({
        "schema": "rightsize.corpus.changing.measured/v1",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "runs": len(rows), "outcomes": outcomes,
        "users": len({r["user"] for r in rows}),
        "hardware": hardware(), "versions": versions(python),
        "columns": {"id": "run id (user-step)", "user": "simulated user",
                    "program": "the user's program (job name)",
                    "step": "the run's index in the user's sequence (0 = first)",
                    "submit_time": "simulated submit time (UTC, no zone)",
                    "change_kind": "|".join(CHANGE_KINDS),
                    "change": "what changed, in words", "outcome": "job state",
                    "peak_rss_bytes": "rightsize run: peak memory of the job",
                    "cpu_time_s": "user + system CPU seconds of the job",
                    "elapsed_s": "wall seconds", "cpu_cores": "cpu_time_s / elapsed_s",
                    "peak_gpu_memory_bytes": "rightsize run (NVML): peak GPU memory, "
                                             "--device cuda only"},
    })
    if command:
        cmds = side.setdefault("commands", [])
        cmds.append({"command": command, "device": device,
                     "finished": side["date"],
                     "load_average_1min": {"mean": round(sum(run_loads) / len(run_loads), 2),
                                           "max": round(max(run_loads), 2)}
                     if run_loads else None,
                     "nice": nice, "python": python, "jobs": jobs,
                     "env": {k: env[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                 "CUDA_VISIBLE_DEVICES", "MALLOC_MMAP_THRESHOLD_")
                             if env and k in env}})
        side["note"] = ("run time is noisy under load (the machine was shared with builds: see "
                        "load_average_1min per command); CPU time less so")
    if manifest:
        side["corpus"] = {"seed": manifest["seed"], "runs": len(manifest["runs"]),
                          "users": len(manifest["users"]), "digest": digest(manifest),
                          "generator": manifest["generator"],
                          "regenerate": "python3 bench/corpus/changing.py generate --seed %d "
                                        "--out DIR" % manifest["seed"]}
    with open(side_path, "w") as f:
        json.dump(side, f, indent=2)
        f.write("\n")
    print("changing.py: wrote %s.csv (%d runs) and %s.json" % (base, len(rows), base))


def cmd_table(a):
    write_table(a.file, python=a.python)
    return 0


# ---------------------------------------------------------------------------------------------
# baselines

HALF_LIFE_S = 24 * 3600.0
WARMUP = 3  # each user's first runs are not scored


def _ts(s):
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S").timestamp()


def weighted_quantile(values, weights, q):
    pairs = sorted(zip(values, weights))
    total = sum(w for _, w in pairs)
    acc = 0.0
    for v, w in pairs:
        acc += w
        if acc >= q * total:
            return v
    return pairs[-1][0]


def predict(history, now):
    """{baseline: prediction} from `history` [(t, value)] of earlier runs."""
    vals = [v for _, v in history]
    out = {"user_mean": sum(vals) / len(vals),
           "last2": sum(vals[-2:]) / len(vals[-2:])}
    w = [0.5 ** ((now - t) / HALF_LIFE_S) for t, _ in history]
    out["vpa"] = weighted_quantile(vals, w, 0.9) * 1.15
    return out


BASELINES = ("user_mean", "last2", "vpa")
TARGETS = [("peak_rss_bytes", "peak memory", 2**30, "GiB"), ("elapsed_s", "run time", 1.0, "s"),
           ("cpu_time_s", "CPU time", 1.0, "s")]
GPU_TARGET = ("peak_gpu_memory_bytes", "peak GPU memory", 2**30, "GiB")


def replay(rows):
    """Per scored run: the baselines' predictions of each target. History = earlier completed
    runs of the same user and program; a program without one (a new family) falls back to the
    user's earlier runs of any program."""
    by_user = {}
    scored = []
    for r in rows:
        if r["outcome"] != "COMPLETED":
            continue
        hist = by_user.setdefault(r["user"], [])
        if len(hist) >= WARMUP:
            same = [h for h in hist if h["program"] == r["program"]] or hist
            now = _ts(r["submit_time"])
            pred = {t: predict([(_ts(h["submit_time"]), float(h[t])) for h in same], now)
                    for t, _, _, _ in TARGETS}
            scored.append((r, pred))
        hist.append(r)
    return scored


def score(scored, subset):
    out = {}
    for t, _, unit, _ in TARGETS:
        for b in BASELINES:
            errs = [abs(p[t][b] - float(r[t])) / unit for r, p in scored if subset(r)]
            out[(t, b)] = (sum(errs) / len(errs)) if errs else None
        out[(t, "n")] = len([1 for r, _ in scored if subset(r)])
    return out


def cmd_baselines(a):
    docs = read_docs(a.file)
    rows = [flat(d) for d in docs]
    if any(r["peak_gpu_memory_bytes"] for r in rows) and GPU_TARGET not in TARGETS:
        TARGETS.append(GPU_TARGET)  # a --device cuda table
    for r in rows:
        for k, _, _, _ in TARGETS:
            r[k] = float(r[k] or 0)
    scored = replay(rows)
    groups = [("after a change", lambda r: r["change_kind"] not in ("none", "new")),
              ("unchanged", lambda r: r["change_kind"] == "none"),
              ("all scored", lambda r: True)]
    res = {name: score(scored, f) for name, f in groups}
    kinds = sorted({r["change_kind"] for r, _ in scored} - {"none", "new"})
    by_kind = {k: score(scored, lambda r, k=k: r["change_kind"] == k) for k in kinds}
    lines = []
    lines.append("| runs | n | target | user_mean | last2 | VPA | best |")
    lines.append("|---|---:|---|---:|---:|---:|---|")
    for name, _ in groups:
        s = res[name]
        for t, label, _, unit in TARGETS:
            vals = {b: s[(t, b)] for b in BASELINES}
            if vals["user_mean"] is None:
                continue
            best = min(vals, key=lambda b: vals[b])
            lines.append("| %s | %d | %s MAE (%s) | %s | %s | %s | %s |"
                         % (name, s[(t, "n")], label, unit,
                            *("%.3f" % vals[b] for b in BASELINES), best))
    kind_lines = ["| change | n | peak memory MAE (GiB): user_mean / last2 / VPA "
                  "| run time MAE (s): user_mean / last2 / VPA |", "|---|---:|---|---|"]
    for k in kinds:
        s = by_kind[k]
        kind_lines.append("| %s | %d | %s | %s |" % (
            k, s[("peak_rss_bytes", "n")],
            " / ".join("%.3f" % s[("peak_rss_bytes", b)] for b in BASELINES),
            " / ".join("%.2f" % s[("elapsed_s", b)] for b in BASELINES)))
    text = ("\n".join(lines) + "\n\nBy kind of change (first run after it):\n\n"
            + "\n".join(kind_lines))
    print(text)
    if a.doc:
        update_doc(a.doc, a.file, rows, scored, text)
    return 0


BEGIN, END = "<!-- baselines: begin (changing.py baselines) -->", "<!-- baselines: end -->"


def update_doc(path, jsonl, rows, scored, text):
    with open(path) as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        sys.exit("changing.py: %s has no %s ... %s block" % (path, BEGIN, END))
    n_change = sum(1 for r, _ in scored if r["change_kind"] not in ("none", "new"))
    head = ("Measured runs in `%s`: %d (%d completed) of %d users; scored (each user's first %d "
            "completed runs are history only): %d, of which %d right after a change.\n\n"
            % (os.path.relpath(jsonl, ROOT) if os.path.isabs(jsonl) else jsonl, len(rows),
               sum(1 for r in rows if r["outcome"] == "COMPLETED"),
               len({r["user"] for r in rows}), WARMUP, len(scored), n_change))
    side_path = os.path.splitext(jsonl)[0] + ".json"
    if os.path.exists(side_path):
        with open(side_path) as f:
            side = json.load(f)
        load, when = side.get("load_average_1min"), side.get("measured_between")
        if load and when:
            head += ("Measured %s to %s (real time) on %d CPUs; the machine's 1-minute load "
                     "average as each run ended: median %.1f, max %.1f, so run time is noisy "
                     "(CPU time much less).\n\n"
                     % (when[0], when[1], side["hardware"]["cpu_cores"], load["median"],
                        load["max"]))
    pre, rest = doc.split(BEGIN, 1)
    _, post = rest.split(END, 1)
    with open(path, "w") as f:
        f.write(pre + BEGIN + "\n" + head + text + "\n" + END + post)
    print("changing.py: updated %s" % path)


# ---------------------------------------------------------------------------------------------
# excerpt

def cmd_excerpt(a):
    """Copies the measured runs of a few users, with their run folders, for tests."""
    users = a.users.split(",")
    docs = [d for d in read_docs(a.file) if d["corpus"]["user"] in users]
    if a.max_per_user:
        kept, seen = [], {}
        for d in docs:
            u = d["corpus"]["user"]
            if seen.get(u, 0) < a.max_per_user:
                kept.append(d)
                seen[u] = seen.get(u, 0) + 1
        docs = kept
    if not docs:
        sys.exit("changing.py: no measured runs of %s in %s" % (a.users, a.file))
    os.makedirs(a.out, exist_ok=True)
    name = os.path.basename(a.file)
    with open(os.path.join(a.out, name), "w") as f:
        for d in docs:
            d = dict(d)
            d.get("summary", {}).pop("series", None)
            f.write(json.dumps(d, sort_keys=True) + "\n")
    with open(os.path.join(a.corpus, "manifest.json")) as f:
        man = json.load(f)
    kinds = {}
    for d in docs:
        k = d["corpus"]["change_kind"]
        kinds[k] = kinds.get(k, 0) + 1
    with open(os.path.join(a.out, "SOURCES"), "w") as f:
        f.write("An excerpt of the measured corpus of changing programs "
                "(bench/corpus/changing.py,\n"
                "bench/corpus/README.md \"Changing programs\"), for tests.\n\n"
                "%s: %d runs of users %s, copied from data/corpus/%s (measured on this\n"
                "project's development machine, see the .json sidecar there for hardware and\n"
                "versions). The run folders (job.sbatch and the program) are not copied:\n"
                "`changing.py generate --seed %d` writes them (corpus digest %s).\n"
                "Changes in the excerpt: %s.\n\n"
                "Written for this project, under the same terms as the rest of the repository;\n"
                "no third-party code or data.\n\n"
                "Regenerate: python3 bench/corpus/changing.py excerpt data/corpus/%s \\\n"
                "    --corpus DIR --users %s --max-per-user %d --out test/data/corpus-changing\n"
                % (name, len(docs), ", ".join(users), name, man["seed"], digest(man),
                   ", ".join("%s %d" % (k, kinds[k]) for k in CHANGE_KINDS if k in kinds),
                   name, a.users, a.max_per_user))
    print("changing.py: wrote %d runs of %s to %s" % (len(docs), a.users, a.out))
    return 0


# ---------------------------------------------------------------------------------------------

def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="write the corpus (deterministic)")
    g.add_argument("--seed", type=int, default=25)
    g.add_argument("--out", required=True, help="folder to write (its runs/ is replaced)")
    r = sub.add_parser("run", help="measure the runs in schedule order (resumable)")
    r.add_argument("corpus", help="a folder written by `changing.py generate`")
    r.add_argument("--out", required=True, help="the .jsonl to append to (.csv, .json beside)")
    r.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cpu: one thread, GPUs hidden; cuda: the programs use the GPU and "
                   "rightsize run reads its memory through NVML")
    r.add_argument("--rightsize", default=os.path.join(ROOT, "build", "rightsize"))
    r.add_argument("--python", default=None,
                   help="the Python with torch (default: /usr/bin/python3 on cpu, Debian's; "
                   "python3 on PATH on cuda)")
    r.add_argument("--interval", type=float, default=0.2, help="rightsize run --interval")
    r.add_argument("--nice", type=int, default=5, help="nice -n for each run (0: none)")
    r.add_argument("--timeout", type=float, default=300, help="seconds per run")
    r.add_argument("--time-cap", type=float, default=0,
                   help="stop starting runs after this many seconds (0: no cap)")
    r.add_argument("--limit", type=int, default=0, help="at most this many runs")
    r.add_argument("--jobs", type=int, default=1,
                   help="runs measured at the same time (default 1; more shortens the session "
                   "on a machine with idle cores, and makes run time noisier)")
    r.add_argument("--only", default=None, help="regular expression on run ids")
    t = sub.add_parser("table", help="write the CSV and the sidecar from the .jsonl")
    t.add_argument("file")
    t.add_argument("--python", default="/usr/bin/python3")
    b = sub.add_parser("baselines", help="score user_mean, last2 and VPA in time order")
    b.add_argument("file")
    b.add_argument("--doc", default=None, help="write the figures into this Markdown file")
    e = sub.add_parser("excerpt", help="copy a few users' measured runs and folders for tests")
    e.add_argument("file")
    e.add_argument("--corpus", required=True, help="the folder the runs were generated into")
    e.add_argument("--users", required=True, help="comma-separated, e.g. u05,u08,u11")
    e.add_argument("--max-per-user", type=int, default=30)
    e.add_argument("--out", required=True)
    a = p.parse_args()
    return {"generate": cmd_generate, "run": cmd_run, "table": cmd_table,
            "baselines": cmd_baselines, "excerpt": cmd_excerpt}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
