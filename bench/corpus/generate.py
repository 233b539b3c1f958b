#!/usr/bin/env python3
"""Generate the measured ground-truth corpus of PyTorch jobs (issue 8, point 5).

Writes a folder of self-contained training and inference jobs, one sub-folder per run:

    OUT/manifest.json            every run and the parameters it was generated with
    OUT/manifest.csv             the same, one row per run
    OUT/runs/<id>/job.sbatch     the batch script (`rightsize advise` reads it and follows it
                                 to the Python program)
    OUT/runs/<id>/train.py       (or infer.py) a real PyTorch program: random weights, synthetic
                                 data, nothing downloaded
    OUT/runs/<id>/config.json    for the runs written in the config-file style

The programs are written the ways people write them, so that rightsize's static analysis has to
read them as it would read a user's job (docs/code-analysis.md). Four styles, assigned by the
seeded random generator:

  argparse-literal  hyper-parameters are argparse options (some overridden on the sbatch command
                    line); precision, optimizer and checkpointing are written out literally.
  argparse-flags    the same, but precision, optimizer and checkpointing are chosen by flags
                    (`--precision bf16`, `--optimizer sgd`, `--grad_ckpt`), with every branch in
                    the source.
  config            everything in a JSON config file (`--config config.json`), read as
                    cfg["model"]["d_model"]; precision, optimizer and checkpointing are branches
                    on config values.
  kwargs            model classes with keyword defaults (or a dataclass), called with the run's
                    values or with the defaults; precision, optimizer and checkpointing literal.

Model families: MLPs, torchvision ResNets (18/34/50/101/152, weights=None), nn.TransformerEncoder
language models and classifiers, seq2seq models (nn.Transformer or explicit encoder/decoder
stacks), and a small GPT written in the script (nanoGPT style). Sizes: `--size cpu` (runs of a
few seconds on one CPU thread) or `--size gpu` (sizes for an 80-141 GB GPU, a few of them
deliberately too large for 24/40/80 GB GPUs, one or two too large for any).

Every program ends with a short, marked measurement block ("rightsize corpus probe") that prints
one JSON line: host RSS at marked points (before the model is built, after it is built, after the
first optimizer step, at the end), peak RSS, and on CUDA torch.cuda.max_memory_reserved /
max_memory_allocated; a CUDA out-of-memory error is caught and reported as outcome "oom".
bench/corpus/run.py runs them. Deterministic: the same --seed and --size give the same bytes.

Usage: python3 bench/corpus/generate.py --size cpu --out build/corpus/cpu [--seed 8]
"""
import argparse
import csv
import hashlib
import json
import os
import random
import shutil
import sys

STYLES = ("argparse-literal", "argparse-flags", "config", "kwargs")

# ---------------------------------------------------------------------------------------------
# The run lists. Each entry is one run; style and the command-line overrides are drawn later.
# Fields: family, mode (train/infer), model-specific shape, batch, precision (fp32, bf16 and
# fp16 = autocast; bf16-pure and fp16-pure = the weights cast), optimizer (sgd, sgdm, adam,
# adamw), ckpt (activation checkpointing).


def _mlp(hidden, depth, batch, precision, opt=None, mode="train", in_features=1024, classes=100):
    return dict(family="mlp", mode=mode, in_features=in_features, hidden=hidden, depth=depth,
                num_classes=classes, batch_size=batch, precision=precision, optimizer=opt,
                ckpt=False)


def _resnet(arch, image, batch, precision, opt=None, ckpt=False, mode="train", classes=1000):
    return dict(family="resnet", mode=mode, arch=arch, image_size=image, num_classes=classes,
                batch_size=batch, precision=precision, optimizer=opt, ckpt=ckpt)


def _encoder(kind, d, heads, ff, layers, seq, batch, precision, opt=None, ckpt=False,
             mode="train", vocab=16000, classes=10):
    return dict(family="encoder", mode=mode, head=kind, vocab_size=vocab, d_model=d,
                n_heads=heads, d_ff=ff, n_layers=layers, seq_len=seq, num_classes=classes,
                batch_size=batch, precision=precision, optimizer=opt, ckpt=ckpt)


def _gpt(layers, embd, heads, block, batch, precision, opt=None, ckpt=False, mode="train",
         vocab=8192, dropout=0.0):
    return dict(family="gpt", mode=mode, n_layer=layers, n_embd=embd, n_head=heads,
                block_size=block, vocab_size=vocab, dropout=dropout, batch_size=batch,
                precision=precision, optimizer=opt, ckpt=ckpt)


def _seq2seq(d, heads, ff, enc, dec, seq, batch, precision, opt=None, mode="train", vocab=8000):
    return dict(family="seq2seq", mode=mode, vocab_size=vocab, d_model=d, n_heads=heads, d_ff=ff,
                enc_layers=enc, dec_layers=dec, seq_len=seq, batch_size=batch,
                precision=precision, optimizer=opt, ckpt=False)


def cpu_runs():
    """Small enough for a few train steps in a few seconds on one CPU thread (fp32 and bf16:
    CPU autocast in torch 1.13 supports bf16 only)."""
    return [
        _mlp(2048, 4, 128, "fp32", "adamw"),
        _mlp(4096, 4, 64, "fp32", "sgdm"),
        _mlp(2048, 6, 256, "bf16", "adam"),
        _mlp(3072, 5, 64, "fp32", "sgd"),
        _mlp(4096, 3, 128, "bf16", "adamw"),
        _mlp(1024, 8, 512, "fp32", "adam"),
        _mlp(2048, 4, 64, "bf16", "sgdm"),
        _mlp(3072, 3, 256, "fp32", "adamw"),
        _mlp(4096, 4, 512, "fp32", mode="infer"),
        _mlp(2048, 6, 1024, "bf16-pure", mode="infer"),
        _resnet("resnet18", 128, 32, "fp32", "sgdm"),
        _resnet("resnet18", 160, 16, "bf16", "adamw"),
        _resnet("resnet18", 224, 8, "fp32", "adam", ckpt=True),
        _resnet("resnet34", 128, 16, "fp32", "sgdm"),
        _resnet("resnet34", 160, 8, "bf16", "sgdm", ckpt=True),
        _resnet("resnet50", 128, 8, "fp32", "sgdm"),
        _resnet("resnet50", 160, 8, "bf16", "adamw"),
        _resnet("resnet50", 128, 16, "fp32", "adamw", ckpt=True),
        _resnet("resnet18", 224, 16, "fp32", "sgd"),
        _resnet("resnet50", 224, 4, "fp32", "adam"),
        _resnet("resnet18", 224, 64, "fp32", mode="infer"),
        _resnet("resnet50", 224, 16, "fp32", mode="infer"),
        _resnet("resnet34", 160, 64, "bf16", mode="infer"),
        _resnet("resnet50", 128, 64, "bf16-pure", mode="infer"),
        _encoder("lm", 256, 4, 1024, 4, 256, 8, "fp32", "adamw", vocab=8000),
        _encoder("lm", 384, 6, 1536, 6, 128, 16, "fp32", "adam", vocab=8000),
        _encoder("lm", 512, 8, 2048, 4, 256, 8, "bf16", "adamw", vocab=8000),
        _encoder("cls", 256, 4, 1024, 6, 512, 8, "fp32", "adamw", ckpt=True),
        _encoder("cls", 512, 8, 2048, 6, 128, 16, "fp32", "sgdm"),
        _encoder("lm", 384, 6, 1536, 8, 256, 8, "bf16", "adamw", ckpt=True, vocab=8000),
        _encoder("lm", 768, 12, 3072, 4, 128, 8, "fp32", "adamw", vocab=8000),
        _encoder("cls", 256, 8, 1024, 4, 1024, 2, "fp32", "adam"),
        _encoder("lm", 512, 8, 2048, 6, 512, 2, "fp32", "adamw", ckpt=True, vocab=8000),
        _encoder("cls", 384, 6, 1536, 4, 256, 16, "bf16", "sgd"),
        _encoder("lm", 256, 4, 1024, 8, 512, 4, "fp32", "adamw", vocab=8000),
        _encoder("lm", 512, 8, 2048, 6, 512, 8, "fp32", mode="infer", vocab=8000),
        _encoder("cls", 768, 12, 3072, 6, 256, 16, "fp32", mode="infer"),
        _encoder("lm", 384, 6, 1536, 6, 1024, 4, "bf16", mode="infer", vocab=8000),
        _gpt(4, 384, 6, 256, 8, "fp32", "adamw"),
        _gpt(6, 384, 6, 256, 4, "bf16", "adamw"),
        _gpt(4, 512, 8, 512, 4, "fp32", "adamw", ckpt=True),
        _gpt(8, 256, 4, 256, 8, "fp32", "adam"),
        _gpt(6, 512, 8, 128, 16, "bf16", "adamw", ckpt=True),
        _gpt(4, 768, 12, 256, 4, "fp32", "sgdm"),
        _gpt(12, 256, 4, 512, 2, "fp32", "adamw"),
        _gpt(4, 384, 6, 1024, 2, "fp32", "adamw", ckpt=True),
        _gpt(4, 640, 10, 256, 8, "bf16", "adam"),
        _gpt(6, 512, 8, 256, 8, "fp32", "adamw", dropout=0.1),
        _gpt(6, 512, 8, 512, 8, "fp32", mode="infer"),
        _gpt(8, 384, 6, 1024, 4, "bf16", mode="infer"),
        _seq2seq(256, 4, 1024, 3, 3, 128, 16, "fp32", "adamw"),
        _seq2seq(384, 6, 1536, 4, 4, 128, 8, "bf16", "adam"),
        _seq2seq(512, 8, 2048, 3, 3, 256, 4, "fp32", "adamw"),
        _seq2seq(256, 8, 1024, 6, 6, 64, 16, "fp32", "sgdm"),
        _seq2seq(512, 8, 2048, 2, 4, 128, 8, "fp32", "adamw"),
        _seq2seq(512, 8, 2048, 6, 6, 128, 16, "fp32", mode="infer"),
    ]


def gpu_runs():
    """Sizes for one 80-141 GB GPU (an H100/H200): most fit an 80 GB GPU, several do not fit
    24/40/80 GB, and two are meant not to fit 141 GB either (outcome "oom" on an H200)."""
    return [
        _mlp(8192, 8, 2048, "fp32", "adamw", in_features=4096, classes=1000),
        _mlp(16384, 4, 1024, "bf16", "adamw", in_features=4096, classes=1000),
        _mlp(8192, 6, 4096, "fp16", "sgdm", in_features=4096, classes=1000),
        _mlp(4096, 12, 8192, "bf16", "adam", in_features=4096, classes=1000),
        _mlp(16384, 6, 512, "fp32", "adamw", in_features=4096, classes=1000),
        _mlp(16384, 8, 8192, "fp16-pure", mode="infer", in_features=4096, classes=1000),
        _resnet("resnet50", 224, 256, "fp32", "sgdm"),
        _resnet("resnet50", 224, 256, "bf16", "sgdm"),
        _resnet("resnet50", 224, 512, "fp16", "sgdm"),
        _resnet("resnet101", 224, 256, "bf16", "adamw"),
        _resnet("resnet152", 224, 256, "fp32", "sgdm", ckpt=True),
        _resnet("resnet18", 224, 1024, "fp32", "sgd"),
        _resnet("resnet34", 224, 512, "bf16", "adam"),
        _resnet("resnet50", 288, 256, "fp32", "adamw"),
        _resnet("resnet101", 224, 512, "fp32", "sgdm"),
        _resnet("resnet152", 224, 1024, "fp32", "sgdm"),
        _resnet("resnet50", 224, 1024, "fp16-pure", mode="infer"),
        _resnet("resnet152", 224, 512, "fp32", mode="infer"),
        _encoder("lm", 1024, 16, 4096, 12, 512, 32, "bf16", "adamw", vocab=32000),
        _encoder("cls", 768, 12, 3072, 12, 512, 64, "fp32", "adamw", vocab=32000),
        _encoder("lm", 1024, 16, 4096, 24, 1024, 16, "fp16", "adamw", ckpt=True, vocab=32000),
        _encoder("lm", 768, 12, 3072, 12, 2048, 8, "fp32", "adam", vocab=32000),
        _encoder("lm", 1536, 16, 6144, 16, 512, 16, "bf16", "adamw", vocab=32000),
        _encoder("cls", 1024, 16, 4096, 24, 512, 64, "bf16", "sgdm", vocab=32000),
        _encoder("lm", 2048, 16, 8192, 16, 1024, 16, "bf16", "adamw", ckpt=True, vocab=32000),
        _encoder("lm", 1024, 16, 4096, 24, 2048, 16, "fp32", "adamw", vocab=32000),
        _encoder("lm", 1024, 16, 4096, 24, 2048, 32, "fp16", mode="infer", vocab=32000),
        _encoder("cls", 768, 12, 3072, 12, 512, 256, "fp32", mode="infer", vocab=32000),
        _gpt(12, 768, 12, 1024, 16, "bf16", "adamw", vocab=50304),
        _gpt(24, 1024, 16, 1024, 8, "bf16", "adamw", vocab=50304),
        _gpt(24, 1024, 16, 1024, 16, "fp32", "adamw", vocab=50304),
        _gpt(36, 1280, 20, 1024, 8, "bf16", "adamw", ckpt=True, vocab=50304),
        _gpt(12, 768, 12, 2048, 16, "fp16", "adam", vocab=50304),
        _gpt(24, 2048, 16, 1024, 8, "bf16", "adamw", vocab=50304),
        _gpt(24, 2048, 16, 2048, 8, "bf16", "adamw", ckpt=True, vocab=50304),
        _gpt(12, 768, 12, 1024, 64, "fp32", "sgdm", vocab=50304),
        _gpt(32, 2560, 32, 1024, 4, "bf16", "adamw", vocab=50304),
        _gpt(32, 2560, 32, 2048, 8, "fp32", "adamw", vocab=50304),
        _gpt(48, 1600, 25, 1024, 16, "bf16", "adamw", vocab=50304),
        _gpt(6, 512, 8, 512, 128, "bf16", "sgd", vocab=50304),
        _gpt(24, 2048, 16, 2048, 16, "bf16-pure", mode="infer", vocab=50304),
        _gpt(36, 1280, 20, 1024, 32, "fp16", mode="infer", vocab=50304),
        _seq2seq(512, 8, 2048, 6, 6, 256, 64, "fp32", "adamw", vocab=32000),
        _seq2seq(1024, 16, 4096, 12, 12, 512, 32, "bf16", "adamw", vocab=32000),
        _seq2seq(768, 12, 3072, 6, 6, 1024, 16, "fp16", "adam", vocab=32000),
        _seq2seq(1024, 16, 4096, 6, 6, 256, 128, "fp32", "adamw", vocab=32000),
        _seq2seq(512, 8, 2048, 3, 6, 512, 64, "bf16", "sgdm", vocab=32000),
        _seq2seq(1024, 16, 4096, 12, 12, 512, 64, "fp32", mode="infer", vocab=32000),
    ]


# ---------------------------------------------------------------------------------------------
# Shared pieces of the programs.

PROBE = '''
# ---- rightsize corpus probe: measurement only, not part of the job (bench/corpus) ----
import os as _os
import resource as _resource

_CORPUS = {"marks": {}, "start": time.time(), "parameters": None}


def corpus_mark(name, model=None):
    """Host RSS (and the CUDA caching allocator's figures) at one point of the run."""
    if model is not None:
        _CORPUS["parameters"] = sum(p.numel() for p in model.parameters())
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    if cuda:
        torch.cuda.synchronize()
    with open("/proc/self/statm") as f:
        rss = int(f.read().split()[1]) * _os.sysconf("SC_PAGE_SIZE")
    mark = {"t": round(time.time() - _CORPUS["start"], 4), "rss": rss,
            "maxrss": _resource.getrusage(_resource.RUSAGE_SELF).ru_maxrss * 1024}
    if cuda:
        mark.update(cuda_allocated=torch.cuda.memory_allocated(),
                    cuda_reserved=torch.cuda.memory_reserved(),
                    cuda_max_allocated=torch.cuda.max_memory_allocated(),
                    cuda_max_reserved=torch.cuda.max_memory_reserved())
    _CORPUS["marks"][name] = mark


def corpus_report(outcome, error=""):
    corpus_mark("end")
    print("RIGHTSIZE_CORPUS " + json.dumps({
        "outcome": outcome, "error": error[:400], "parameters": _CORPUS["parameters"],
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "threads": torch.get_num_threads(), "marks": _CORPUS["marks"]}), flush=True)
# ---- end of the probe ----
'''

MAIN = '''

if __name__ == "__main__":
    try:
        main()
        corpus_report("ok")
    except RuntimeError as err:  # torch.cuda.OutOfMemoryError is a RuntimeError
        if "out of memory" not in str(err) and "can't allocate memory" not in str(err):
            raise
        corpus_report("oom", str(err))
        sys.exit(3)
'''


class Src:
    """A program being written: lines with indentation."""

    def __init__(self):
        self.lines = []

    def add(self, text="", indent=0):
        for line in text.split("\n"):
            self.lines.append(("    " * indent + line) if line else "")

    def text(self):
        out = "\n".join(self.lines).rstrip() + "\n"
        while "\n\n\n\n" in out:
            out = out.replace("\n\n\n\n", "\n\n\n")
        return out


class Values:
    """Where each hyper-parameter lives in the program, by style.

    `ref(name)` is the expression the program uses for it; `opts` are the argparse options
    (name -> (type, default)); `config` is the JSON config; `cmdline` the sbatch overrides."""

    def __init__(self, style, run, rng):
        self.style, self.run, self.rng = style, run, rng
        self.opts = {}       # name -> (python type name, default value)
        self.config = {}     # section -> {name: value}
        self.cmdline = []    # ["--batch_size", "16", ...]
        self.flags = []      # ["--grad_ckpt"]

    def arg(self, name, value, typ="int", typical=None):
        """An argparse option holding `value`; in half of the cases the default is a
        different, typical value and the sbatch line passes the run's value."""
        if typical is not None and typical != value and self.rng.random() < 0.5:
            self.opts[name] = (typ, typical)
            self.cmdline += ["--" + name, str(value)]
        else:
            self.opts[name] = (typ, value)
        return "args." + name

    def cfg(self, section, name, value):
        self.config.setdefault(section, {})[name] = value
        return 'cfg["%s"]["%s"]' % (section, name)


def argparse_block(src, v, description, extra=()):
    src.add("def parse_args():")
    src.add('parser = argparse.ArgumentParser(description="%s")' % description, 1)
    if v.style == "config":
        src.add('parser.add_argument("--config", default="config.json", help="JSON config")', 1)
    for name, (typ, default) in v.opts.items():
        if typ == "flag":
            src.add('parser.add_argument("--%s", action="store_true")' % name, 1)
        elif typ == "str":
            src.add('parser.add_argument("--%s", default="%s")' % (name, default), 1)
        else:
            src.add('parser.add_argument("--%s", type=%s, default=%r)' % (name, typ, default), 1)
    for line in extra:
        src.add(line, 1)
    src.add("return parser.parse_args()", 1)
    src.add("")
    src.add("")


def header(src, doc, family, mode, ckpt_import, dataclass=False):
    src.add('"""%s\n\nGenerated by bench/corpus/generate.py for the rightsize measured corpus: random weights,\nsynthetic data, nothing is downloaded."""' % doc)
    src.add("import argparse")
    src.add("import contextlib")
    if dataclass:
        src.add("import dataclasses")
    src.add("import json")
    if family == "gpt":
        src.add("import math")
    src.add("import sys")
    src.add("import time")
    src.add("")
    src.add("import torch")
    src.add("import torch.nn as nn")
    if family in ("gpt", "encoder", "seq2seq"):
        src.add("import torch.nn.functional as F")
    if family == "resnet":
        src.add("import torchvision")
    src.add("from torch.utils.data import DataLoader, TensorDataset")
    if ckpt_import:
        src.add("from torch.utils.checkpoint import checkpoint")
    src.add(PROBE)
    src.add("")


# ---------------------------------------------------------------------------------------------
# Precision, optimizer and checkpointing, as each style writes them.

def precision_setup(src, v, indent):
    """Lines before the loop; returns (autocast 'with' line or None, uses scaler)."""
    p = v.run["precision"]
    train = v.run["mode"] == "train"
    if v.style in ("argparse-flags", "config"):
        ref = 'args.precision' if v.style == "argparse-flags" else 'cfg["train"]["precision"]'
        if v.style == "argparse-flags":
            v.arg("precision", p, "str", typical="fp32")
        else:
            v.config.setdefault("train", {})["precision"] = p
        src.add('if %s in ("bf16-pure", "fp16-pure"):' % ref, indent)
        src.add('model = model.to(torch.bfloat16 if %s == "bf16-pure" else torch.float16)' % ref,
                indent + 1)
        src.add('amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(%s)' % ref, indent)
        src.add("amp = torch.autocast(device_type=device.type, dtype=amp_dtype) if amp_dtype "
                "else contextlib.nullcontext()", indent)
        if train:
            src.add('scaler = torch.cuda.amp.GradScaler(enabled=%s == "fp16")' % ref, indent)
        return "with amp:", train
    # Literal styles: only what this run uses is in the source.
    if p == "bf16-pure":
        src.add("model = model.to(torch.bfloat16)", indent)
        return None, False
    if p == "fp16-pure":
        src.add("model = model.half()", indent)
        return None, False
    if p == "bf16":
        return "with torch.autocast(device_type=device.type, dtype=torch.bfloat16):", False
    if p == "fp16":
        if train:
            src.add("scaler = torch.cuda.amp.GradScaler()", indent)
        return 'with torch.autocast(device_type="cuda", dtype=torch.float16):', train
    return None, False


def input_dtype(v):
    """The expression that casts floating inputs to the weights' dtype, if the style needs it."""
    p = v.run["precision"]
    if v.style in ("argparse-flags", "config"):
        return "next(model.parameters()).dtype"
    return {"bf16-pure": "torch.bfloat16", "fp16-pure": "torch.float16"}.get(p)


OPT_LINES = {
    "sgd": "torch.optim.SGD(model.parameters(), lr=%s)",
    "sgdm": "torch.optim.SGD(model.parameters(), lr=%s, momentum=0.9, weight_decay=1e-4)",
    "adam": "torch.optim.Adam(model.parameters(), lr=%s)",
    "adamw": "torch.optim.AdamW(model.parameters(), lr=%s, weight_decay=0.05)",
}


def optimizer_setup(src, v, indent):
    o = v.run["optimizer"]
    lr = {"sgd": 0.05, "sgdm": 0.1, "adam": 3e-4, "adamw": 3e-4}[o]
    if v.style in ("argparse-flags", "config"):
        name = {"sgdm": "sgd", "sgd": "sgd"}.get(o, o)
        momentum = 0.9 if o != "sgd" else 0.0
        if v.style == "argparse-flags":
            v.arg("optimizer", name, "str", typical="adamw")
            v.arg("lr", lr, "float", typical=3e-4)
            v.arg("momentum", momentum, "float", typical=0.9)
            opt_ref, lr_ref, mom_ref = "args.optimizer", "args.lr", "args.momentum"
        else:
            opt_ref = v.cfg("optim", "name", name)
            lr_ref = v.cfg("optim", "lr", lr)
            mom_ref = v.cfg("optim", "momentum", momentum)
        branches = [
            ('"sgd"', "torch.optim.SGD(model.parameters(), lr=%s, momentum=%s, weight_decay=1e-4)"
             % (lr_ref, mom_ref)),
            ('"adam"', "torch.optim.Adam(model.parameters(), lr=%s)" % lr_ref),
            ('"adamw"', "torch.optim.AdamW(model.parameters(), lr=%s, weight_decay=0.05)" % lr_ref),
        ]
        v.rng.shuffle(branches)  # people order these branches every way
        for i, (lit, line) in enumerate(branches):
            if i < len(branches) - 1:
                src.add('%s %s == %s:' % ("if" if i == 0 else "elif", opt_ref, lit), indent)
            else:
                src.add("else:", indent)
            src.add("optimizer = " + line, indent + 1)
        return
    if v.style == "argparse-literal":
        lr_ref = v.arg("lr", lr, "float", typical=1e-3)
    else:
        lr_ref = repr(lr)
    src.add("optimizer = " + OPT_LINES[o] % lr_ref, indent)


def ckpt_attr(v):
    """How the model knows whether to checkpoint: an expression, or None when the style writes
    checkpointing only where it is used."""
    if v.style == "argparse-flags":
        if v.run["mode"] == "train":
            v.opts["grad_ckpt"] = ("flag", False)
            if v.run["ckpt"]:
                v.flags.append("--grad_ckpt")
        return "args.grad_ckpt" if v.run["mode"] == "train" else None
    if v.style == "config":
        if v.run["mode"] == "train":
            v.config.setdefault("train", {})["grad_ckpt"] = bool(v.run["ckpt"])
            return 'cfg["train"]["grad_ckpt"]'
        return None
    return None


def train_loop(src, v, data_kind, forward_loss, indent=1):
    """The loop over batches, with the run's precision and optimizer. `forward_loss` computes
    `loss` from the batch variables (train) or `out` (infer)."""
    train = v.run["mode"] == "train"
    if train:
        optimizer_setup(src, v, indent)
    autocast, scaler = precision_setup(src, v, indent)
    src.add('corpus_mark("model", model)', indent)
    src.add("")
    src.add("model.train()" if train else "model.eval()", indent)
    body = indent + 1
    if not train:
        src.add("with torch.no_grad():", indent)
        indent += 1
        body += 1
    src.add("for step, batch in enumerate(loader):", indent)
    src.add("batch = [t.to(device, non_blocking=True) for t in batch]", body)
    inner = body
    if autocast:
        src.add(autocast, body)
        inner = body + 1
    for line in forward_loss:
        src.add(line, inner)
    if train:
        src.add("optimizer.zero_grad()", body)
        if scaler:
            src.add("scaler.scale(loss).backward()", body)
            src.add("scaler.step(optimizer)", body)
            src.add("scaler.update()", body)
        else:
            src.add("loss.backward()", body)
            src.add("optimizer.step()", body)
    src.add('corpus_mark("step%d" % (step + 1))', body)
    src.add("if step + 1 >= steps:", body)
    src.add("break", body + 1)
    if train:
        src.add('print(f"step {step + 1}: loss {loss.item():.4f}")', indent)


def loader_lines(v, tensors, batch_ref, steps_ref):
    """A DataLoader over a synthetic TensorDataset of `steps` batches. The data-loader workers
    are 0 unless the run names `num_workers` (the changing corpus, bench/corpus/changing.py):
    then they live where the style keeps its hyper-parameters."""
    workers = "0"
    if "num_workers" in v.run:
        n = v.run["num_workers"]
        if v.style == "config":
            workers = v.cfg("data", "num_workers", n)
        elif v.style == "kwargs":
            workers = repr(n)
        else:
            workers = v.arg("num_workers", n, "int", typical=4)
    return [
        "dataset = TensorDataset(%s)" % ", ".join(tensors),
        "loader = DataLoader(dataset, batch_size=%s, shuffle=True, drop_last=True, "
        "num_workers=%s)" % (batch_ref, workers),
    ]


def steps_ref(v, steps):
    if v.style == "config":
        return v.cfg("train", "steps", steps)
    if v.style == "kwargs":
        return repr(steps)
    return v.arg("steps", steps, "int", typical=100)


def device_lines(src, indent=1):
    src.add('device = torch.device("cuda" if torch.cuda.is_available() else "cpu")', indent)
    src.add("torch.manual_seed(0)", indent)


def config_load(src, v, indent=1):
    if v.style == "config":
        src.add("with open(args.config) as f:", indent)
        src.add("cfg = json.load(f)", indent + 1)


# ---------------------------------------------------------------------------------------------
# Families.

def gen_mlp(v, steps):
    r = v.run
    src, body = Src(), Src()
    header(src, "MLP %s on synthetic tabular data." % ("training" if r["mode"] == "train" else
                                                       "inference"), "mlp", r["mode"], False)
    st = v.style
    if st == "kwargs":
        # Hidden layers written out one by one (the depth is fixed by the code).
        body.add("class MLP(nn.Module):")
        body.add("def __init__(self, in_features=%d, hidden=%d, num_classes=%d, dropout=0.1):"
                 % (r["in_features"], 1024, r["num_classes"]), 1)
        body.add("super().__init__()", 2)
        body.add("self.net = nn.Sequential(", 2)
        body.add("nn.Linear(in_features, hidden), nn.GELU(), nn.Dropout(dropout),", 3)
        for _ in range(r["depth"] - 1):
            body.add("nn.Linear(hidden, hidden), nn.GELU(), nn.Dropout(dropout),", 3)
        body.add("nn.Linear(hidden, num_classes),", 3)
        body.add(")", 2)
        body.add("")
        body.add("def forward(self, x):", 1)
        body.add("return self.net(x)", 2)
    else:
        ref = "cfg.%s" if st != "config" else 'cfg["%s"]'
        body.add("class MLP(nn.Module):")
        body.add("def __init__(self, cfg):", 1)
        body.add("super().__init__()", 2)
        body.add("layers = [nn.Linear(%s, %s), nn.GELU()]" % (ref % "in_features", ref % "hidden"), 2)
        body.add("for _ in range(%s - 1):" % (ref % "depth"), 2)
        body.add("layers += [nn.Linear(%s, %s), nn.GELU(), nn.Dropout(0.1)]"
                 % (ref % "hidden", ref % "hidden"), 3)
        body.add("layers.append(nn.Linear(%s, %s))" % (ref % "hidden", ref % "num_classes"), 2)
        body.add("self.net = nn.Sequential(*layers)", 2)
        body.add("")
        body.add("def forward(self, x):", 1)
        body.add("return self.net(x)", 2)
    body.add("")
    body.add("")
    body.add("def main():")
    body.add("args = parse_args()", 1)
    config_load(body, v)
    device_lines(body)
    if st == "config":
        for k in ("in_features", "hidden", "depth", "num_classes"):
            v.cfg("model", k, r[k])
        bs = v.cfg("train", "batch_size", r["batch_size"])
        body.add("batch_size = %s" % bs, 1)
        bs = "batch_size"
        n_in, n_cls = 'cfg["model"]["in_features"]', 'cfg["model"]["num_classes"]'
        build = 'model = MLP(cfg["model"]).to(device)'
    elif st == "kwargs":
        bs = v.arg("batch_size", r["batch_size"], "int", typical=256)
        n_in, n_cls = repr(r["in_features"]), repr(r["num_classes"])
        if r["hidden"] == 1024:
            build = "model = MLP().to(device)"
        else:
            hid = v.arg("hidden", r["hidden"], "int", typical=1024)
            build = "model = MLP(hidden=%s).to(device)" % hid
    else:
        bs = v.arg("batch_size", r["batch_size"], "int", typical=256)
        n_in = v.arg("in_features", r["in_features"], "int")
        v.arg("hidden", r["hidden"], "int", typical=1024)
        v.arg("depth", r["depth"], "int", typical=4)
        n_cls = v.arg("num_classes", r["num_classes"], "int")
        build = "model = MLP(args).to(device)"
    steps = steps_ref(v, steps)
    body.add("steps = %s" % steps, 1)
    body.add("features = torch.randn(steps * %s, %s)" % (bs, n_in), 1)
    body.add("labels = torch.randint(0, %s, (steps * %s,))" % (n_cls, bs), 1)
    for line in loader_lines(v, ["features", "labels"], bs, steps):
        body.add(line, 1)
    body.add('corpus_mark("baseline")', 1)
    body.add(build, 1)
    dt = input_dtype(v)
    cast = "x = batch[0]" + (".to(%s)" % dt if dt else "")
    fwd = [cast, "out = model(x)"]
    if r["mode"] == "train":
        fwd.append("loss = nn.functional.cross_entropy(out.float(), batch[1])")
    train_loop(body, v, "tabular", fwd)
    argparse_block(src, v, "MLP on synthetic data")
    return src.text() + "\n\n" + body.text() + MAIN


def gen_resnet(v, steps):
    r = v.run
    st = v.style
    src, body = Src(), Src()
    ck = ckpt_attr(v)
    uses_ckpt = r["mode"] == "train" and (ck is not None or r["ckpt"])
    header(src, "ResNet %s on synthetic images (torchvision, weights=None)."
           % ("training" if r["mode"] == "train" else "inference"), "resnet", r["mode"], uses_ckpt)
    if uses_ckpt:
        # Checkpoint each residual stage: the stem runs normally, the four stages are recomputed.
        body.add("def forward_checkpointed(model, x):")
        body.add("x = model.maxpool(model.relu(model.bn1(model.conv1(x))))", 1)
        body.add("for stage in (model.layer1, model.layer2, model.layer3, model.layer4):", 1)
        body.add("x = checkpoint(stage, x, use_reentrant=False)", 2)
        body.add("x = torch.flatten(model.avgpool(x), 1)", 1)
        body.add("return model.fc(x)", 1)
        body.add("")
        body.add("")
    body.add("def main():")
    body.add("args = parse_args()", 1)
    config_load(body, v)
    device_lines(body)
    if st == "config":
        arch = v.cfg("model", "arch", r["arch"])
        ncls = v.cfg("model", "num_classes", r["num_classes"])
        bs = v.cfg("train", "batch_size", r["batch_size"])
        img = v.cfg("data", "image_size", r["image_size"])
        body.add("batch_size = %s" % bs, 1)
        body.add("image_size = %s" % img, 1)
        bs, img = "batch_size", "image_size"
        build = "model = getattr(torchvision.models, %s)(weights=None, num_classes=%s)" % (arch, ncls)
    elif st == "argparse-flags":
        arch = v.arg("arch", r["arch"], "str", typical="resnet50")
        bs = v.arg("batch_size", r["batch_size"], "int", typical=256)
        img = v.arg("image_size", r["image_size"], "int", typical=224)
        ncls = v.arg("num_classes", r["num_classes"], "int")
        build = "model = torchvision.models.__dict__[args.arch](num_classes=args.num_classes)"
    else:
        bs = v.arg("batch_size", r["batch_size"], "int", typical=256)
        img = v.arg("image_size", r["image_size"], "int", typical=224)
        ncls = v.arg("num_classes", r["num_classes"], "int")
        build = "model = torchvision.models.%s(weights=None, num_classes=%s)" % (r["arch"], ncls)
    steps = steps_ref(v, steps)
    body.add("steps = %s" % steps, 1)
    body.add("# decoded images as uint8, normalised on the device", 1)
    body.add("images = torch.randint(0, 256, (steps * %s, 3, %s, %s), dtype=torch.uint8)"
             % (bs, img, img), 1)
    body.add("labels = torch.randint(0, %s, (steps * %s,))" % (ncls, bs), 1)
    for line in loader_lines(v, ["images", "labels"], bs, steps):
        body.add(line, 1)
    body.add('corpus_mark("baseline")', 1)
    body.add(build, 1)
    body.add("model = model.to(device)", 1)
    if r["mode"] == "train":
        body.add("criterion = nn.CrossEntropyLoss()", 1)
    dt = input_dtype(v) or "torch.float32"
    fwd = ["x = batch[0].to(%s).div_(255)" % dt]
    if uses_ckpt and ck:
        fwd += ["out = forward_checkpointed(model, x) if %s else model(x)" % ck]
    elif uses_ckpt:
        fwd += ["out = forward_checkpointed(model, x)"]
    else:
        fwd += ["out = model(x)"]
    if r["mode"] == "train":
        fwd.append("loss = criterion(out, batch[1])")
    train_loop(body, v, "image", fwd)
    argparse_block(src, v, "ResNet on synthetic images")
    return src.text() + "\n\n" + body.text() + MAIN


def gen_encoder(v, steps):
    r = v.run
    st = v.style
    lm = r["head"] == "lm"
    src, body = Src(), Src()
    ck = ckpt_attr(v)
    uses_ckpt = r["mode"] == "train" and (ck is not None or r["ckpt"])
    header(src, "nn.TransformerEncoder %s %s on synthetic tokens."
           % ("language model" if lm else "text classifier",
              "training" if r["mode"] == "train" else "inference"), "encoder", r["mode"], uses_ckpt)
    names = ("vocab_size", "d_model", "n_heads", "d_ff", "n_layers", "seq_len")
    flag = ", grad_ckpt=False" if (uses_ckpt and ck) else ""
    body.add("class TextTransformer(nn.Module):")
    if st == "kwargs":
        body.add("def __init__(self, vocab_size=%d, d_model=512, n_heads=8, d_ff=2048, n_layers=6,"
                 % r["vocab_size"], 1)
        body.add("max_len=512, num_classes=%d, dropout=0.1%s):" % (r["num_classes"], flag), 3)
        body.add("super().__init__()", 2)
        body.add("self.tok_emb = nn.Embedding(vocab_size, d_model)", 2)
        body.add("self.pos_emb = nn.Embedding(max_len, d_model)", 2)
        body.add("layer = nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout, "
                 "batch_first=True)", 2)
        body.add("self.encoder = nn.TransformerEncoder(layer, num_layers=n_layers)", 2)
        if lm:
            body.add("self.head = nn.Linear(d_model, vocab_size, bias=False)", 2)
        else:
            body.add("self.head = nn.Linear(d_model, num_classes)", 2)
    else:
        ref = "cfg.%s" if st != "config" else 'cfg["%s"]'
        body.add("def __init__(self, cfg%s):" % flag, 1)
        body.add("super().__init__()", 2)
        body.add("self.tok_emb = nn.Embedding(%s, %s)" % (ref % "vocab_size", ref % "d_model"), 2)
        body.add("self.pos_emb = nn.Embedding(%s, %s)" % (ref % "seq_len", ref % "d_model"), 2)
        body.add("layer = nn.TransformerEncoderLayer(d_model=%s, nhead=%s, dim_feedforward=%s,"
                 % (ref % "d_model", ref % "n_heads", ref % "d_ff"), 2)
        body.add("dropout=0.1, batch_first=True)", 6)
        body.add("self.encoder = nn.TransformerEncoder(layer, num_layers=%s)" % (ref % "n_layers"), 2)
        if lm:
            body.add("self.head = nn.Linear(%s, %s, bias=False)" % (ref % "d_model", ref % "vocab_size"), 2)
        else:
            body.add("self.head = nn.Linear(%s, %s)" % (ref % "d_model", ref % "num_classes"), 2)
    if flag:
        body.add("self.grad_ckpt = grad_ckpt", 2)
    body.add("")
    body.add("def forward(self, tokens):", 1)
    body.add("positions = torch.arange(tokens.size(1), device=tokens.device)", 2)
    body.add("x = self.tok_emb(tokens) + self.pos_emb(positions)", 2)
    if lm:
        body.add("mask = torch.triu(torch.full((tokens.size(1), tokens.size(1)), float(\"-inf\"),", 2)
        body.add("device=tokens.device), diagonal=1)", 9)
    else:
        body.add("mask = None", 2)
    if uses_ckpt and flag:
        body.add("for layer in self.encoder.layers:", 2)
        body.add("if self.grad_ckpt and self.training:", 3)
        body.add("x = checkpoint(layer, x, mask, use_reentrant=False)", 4)
        body.add("else:", 3)
        body.add("x = layer(x, src_mask=mask)", 4)
    elif uses_ckpt:
        body.add("for layer in self.encoder.layers:", 2)
        body.add("x = checkpoint(layer, x, mask, use_reentrant=False)", 3)
    else:
        body.add("x = self.encoder(x, mask=mask)", 2)
    if lm:
        body.add("return self.head(x)", 2)
    else:
        body.add("return self.head(x.mean(dim=1))", 2)
    body.add("")
    body.add("")
    body.add("def main():")
    body.add("args = parse_args()", 1)
    config_load(body, v)
    device_lines(body)
    ck_kw = (", grad_ckpt=%s" % ck) if (uses_ckpt and ck) else ""
    if st == "config":
        for k in names:
            v.cfg("model", k, r[k])
        if not lm:
            v.cfg("model", "num_classes", r["num_classes"])
        bs = v.cfg("train", "batch_size", r["batch_size"])
        body.add("batch_size = %s" % bs, 1)
        body.add('seq_len = cfg["model"]["seq_len"]', 1)
        bs, seq, vocab = "batch_size", "seq_len", 'cfg["model"]["vocab_size"]'
        build = 'model = TextTransformer(cfg["model"]%s).to(device)' % ck_kw
    elif st == "kwargs":
        bs = v.arg("batch_size", r["batch_size"], "int", typical=32)
        seq = v.arg("seq_len", r["seq_len"], "int", typical=512)
        vocab = "VOCAB_SIZE"
        body.lines.insert(0, "VOCAB_SIZE = %d" % r["vocab_size"])
        body.lines.insert(1, "")
        body.lines.insert(2, "")
        defaults = dict(d_model=512, n_heads=8, d_ff=2048, n_layers=6)
        kw = []
        for k, d in defaults.items():
            if r[k] != d:
                kw.append("%s=%s" % (k, v.arg(k, r[k], "int", typical=d)))
        kw.append("max_len=%s" % seq)
        build = "model = TextTransformer(%s%s).to(device)" % (", ".join(kw), ck_kw)
    else:
        bs = v.arg("batch_size", r["batch_size"], "int", typical=32)
        seq = v.arg("seq_len", r["seq_len"], "int", typical=512)
        vocab = v.arg("vocab_size", r["vocab_size"], "int")
        v.arg("d_model", r["d_model"], "int", typical=512)
        v.arg("n_heads", r["n_heads"], "int", typical=8)
        v.arg("d_ff", r["d_ff"], "int", typical=2048)
        v.arg("n_layers", r["n_layers"], "int", typical=6)
        if not lm:
            v.arg("num_classes", r["num_classes"], "int")
        build = "model = TextTransformer(args%s).to(device)" % ck_kw
    steps = steps_ref(v, steps)
    body.add("steps = %s" % steps, 1)
    body.add("tokens = torch.randint(0, %s, (steps * %s, %s + 1))" % (vocab, bs, seq), 1)
    if lm:
        tensors = ["tokens"]
    else:
        body.add("labels = torch.randint(0, %d, (steps * %s,))" % (r["num_classes"], bs), 1)
        tensors = ["tokens", "labels"]
    for line in loader_lines(v, tensors, bs, steps):
        body.add(line, 1)
    body.add('corpus_mark("baseline")', 1)
    body.add(build, 1)
    if lm:
        fwd = ["logits = model(batch[0][:, :-1])"]
        if r["mode"] == "train":
            fwd.append("loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), "
                       "batch[0][:, 1:].reshape(-1))")
    else:
        fwd = ["logits = model(batch[0][:, :-1])"]
        if r["mode"] == "train":
            fwd.append("loss = F.cross_entropy(logits.float(), batch[1])")
    train_loop(body, v, "tokens", fwd)
    argparse_block(src, v, "Transformer encoder on synthetic tokens")
    return src.text() + "\n\n" + body.text() + MAIN


def gen_gpt(v, steps):
    r = v.run
    st = v.style
    src, body = Src(), Src()
    ck = ckpt_attr(v)
    uses_ckpt = r["mode"] == "train" and (ck is not None or r["ckpt"])
    header(src, "A small GPT (nanoGPT style) %s on synthetic tokens."
           % ("training" if r["mode"] == "train" else "inference"), "gpt", r["mode"], uses_ckpt,
           dataclass=True)
    fields = ("block_size", "vocab_size", "n_layer", "n_head", "n_embd", "dropout")
    defaults = dict(block_size=1024, vocab_size=50304, n_layer=12, n_head=12, n_embd=768,
                    dropout=0.0)
    kw_defaults = dict(defaults)
    if st == "kwargs":
        kw_defaults = {k: r[k] for k in fields}  # the user edited the dataclass defaults
    body.add("@dataclasses.dataclass")
    body.add("class GPTConfig:")
    for k in fields:
        body.add("%s: %s = %r" % (k, "float" if k == "dropout" else "int", kw_defaults[k]), 1)
    body.add("bias: bool = True", 1)
    if uses_ckpt:
        body.add("grad_ckpt: bool = %s" % ("True" if (ck is None and r["ckpt"]) else "False"), 1)
    body.add('''

class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        # flash attention where PyTorch has it (>= 2.0)
        self.flash = hasattr(torch.nn.functional, "scaled_dot_product_attention")
        if not self.flash:
            self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                                 .view(1, 1, config.block_size, config.block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.flash:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None,
                                               dropout_p=self.dropout if self.training else 0,
                                               is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying

    def forward(self, idx):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:''')
    if uses_ckpt:
        body.add("if self.config.grad_ckpt and self.training:", 3)
        body.add("x = checkpoint(block, x, use_reentrant=False)", 4)
        body.add("else:", 3)
        body.add("x = block(x)", 4)
    else:
        body.add("x = block(x)", 3)
    body.add("x = self.transformer.ln_f(x)", 2)
    body.add("return self.lm_head(x)", 2)
    body.add("")
    body.add("")
    body.add("def main():")
    body.add("args = parse_args()", 1)
    config_load(body, v)
    device_lines(body)
    ck_kw = (", grad_ckpt=%s" % ck) if (uses_ckpt and ck) else ""
    if st == "config":
        for k in fields:
            v.cfg("model", k, r[k])
        bs = v.cfg("train", "batch_size", r["batch_size"])
        body.add("batch_size = %s" % bs, 1)
        body.add('gptconf = GPTConfig(**cfg["model"]%s)' % ck_kw, 1)
        bs, blk, vocab = "batch_size", "gptconf.block_size", "gptconf.vocab_size"
    elif st == "kwargs":
        bs = v.arg("batch_size", r["batch_size"], "int", typical=12)
        body.add("gptconf = GPTConfig(%s)" % ck_kw.lstrip(", "), 1)
        blk, vocab = "gptconf.block_size", "gptconf.vocab_size"
    else:
        bs = v.arg("batch_size", r["batch_size"], "int", typical=12)
        kws = []
        for k in fields:
            typ = "float" if k == "dropout" else "int"
            kws.append("%s=%s" % (k, v.arg(k, r[k], typ, typical=defaults[k])))
        if ck_kw:
            kws.append(ck_kw.lstrip(", "))
        body.add("gptconf = GPTConfig(%s)" % ", ".join(kws), 1)
        blk, vocab = "args.block_size", "args.vocab_size"
    steps = steps_ref(v, steps)
    body.add("steps = %s" % steps, 1)
    body.add("data = torch.randint(0, %s, (steps * %s, %s + 1))" % (vocab, bs, blk), 1)
    for line in loader_lines(v, ["data"], bs, steps):
        body.add(line, 1)
    body.add('corpus_mark("baseline")', 1)
    big = v.run.get("build_on_device", False)
    if big:
        body.add("# build the weights on the GPU directly where PyTorch can (>= 2.0)", 1)
        body.add('on_device = torch.device(device) if hasattr(torch, "set_default_device") '
                 'else contextlib.nullcontext()', 1)
        body.add("with on_device:", 1)
        body.add("model = GPT(gptconf)", 2)
        body.add("model = model.to(device)", 1)
    else:
        body.add("model = GPT(gptconf).to(device)", 1)
    fwd = ["logits = model(batch[0][:, :-1])"]
    if r["mode"] == "train":
        fwd.append("loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), "
                   "batch[0][:, 1:].reshape(-1))")
    train_loop(body, v, "tokens", fwd)
    argparse_block(src, v, "GPT on synthetic tokens")
    return src.text() + "\n\n" + body.text() + MAIN


def gen_seq2seq(v, steps):
    r = v.run
    st = v.style
    src, body = Src(), Src()
    header(src, "Sequence-to-sequence transformer %s on synthetic token pairs."
           % ("training" if r["mode"] == "train" else "inference"), "seq2seq", r["mode"], False)
    body.add("class Seq2Seq(nn.Module):")
    if st == "argparse-literal" or st == "argparse-flags":
        body.add("def __init__(self, cfg):", 1)
        body.add("super().__init__()", 2)
        body.add("self.src_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)", 2)
        body.add("self.tgt_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)", 2)
        body.add("self.pos_emb = nn.Embedding(cfg.seq_len, cfg.d_model)", 2)
        body.add("self.transformer = nn.Transformer(d_model=cfg.d_model, nhead=cfg.n_heads,", 2)
        body.add("num_encoder_layers=cfg.enc_layers,", 10)
        body.add("num_decoder_layers=cfg.dec_layers,", 10)
        body.add("dim_feedforward=cfg.d_ff, dropout=0.1, batch_first=True)", 10)
        body.add("self.out = nn.Linear(cfg.d_model, cfg.vocab_size)", 2)
        body.add("")
        body.add("def forward(self, src, tgt):", 1)
        body.add("pos_s = torch.arange(src.size(1), device=src.device)", 2)
        body.add("pos_t = torch.arange(tgt.size(1), device=tgt.device)", 2)
        body.add("causal = self.transformer.generate_square_subsequent_mask(tgt.size(1)).to(src.device)", 2)
        body.add("h = self.transformer(self.src_emb(src) + self.pos_emb(pos_s),", 2)
        body.add("self.tgt_emb(tgt) + self.pos_emb(pos_t), tgt_mask=causal)", 9)
        body.add("return self.out(h)", 2)
    else:
        if st == "config":
            ref = 'cfg["%s"]'
            body.add("def __init__(self, cfg):", 1)
        else:
            ref = "%s"
            body.add("def __init__(self, vocab_size=%d, d_model=512, n_heads=8, d_ff=2048,"
                     % r["vocab_size"], 1)
            body.add("enc_layers=6, dec_layers=6, seq_len=256):", 3)
        body.add("super().__init__()", 2)
        body.add("self.src_emb = nn.Embedding(%s, %s)" % (ref % "vocab_size", ref % "d_model"), 2)
        body.add("self.tgt_emb = nn.Embedding(%s, %s)" % (ref % "vocab_size", ref % "d_model"), 2)
        body.add("self.pos_emb = nn.Embedding(%s, %s)" % (ref % "seq_len", ref % "d_model"), 2)
        body.add("enc_layer = nn.TransformerEncoderLayer(%s, %s, %s, 0.1, batch_first=True)"
                 % (ref % "d_model", ref % "n_heads", ref % "d_ff"), 2)
        body.add("dec_layer = nn.TransformerDecoderLayer(%s, %s, %s, 0.1, batch_first=True)"
                 % (ref % "d_model", ref % "n_heads", ref % "d_ff"), 2)
        body.add("self.encoder = nn.TransformerEncoder(enc_layer, %s)" % (ref % "enc_layers"), 2)
        body.add("self.decoder = nn.TransformerDecoder(dec_layer, %s)" % (ref % "dec_layers"), 2)
        body.add("self.out = nn.Linear(%s, %s)" % (ref % "d_model", ref % "vocab_size"), 2)
        body.add("")
        body.add("def forward(self, src, tgt):", 1)
        body.add("pos_s = torch.arange(src.size(1), device=src.device)", 2)
        body.add("pos_t = torch.arange(tgt.size(1), device=tgt.device)", 2)
        body.add("causal = torch.triu(torch.full((tgt.size(1), tgt.size(1)), float(\"-inf\"),", 2)
        body.add("device=tgt.device), diagonal=1)", 10)
        body.add("memory = self.encoder(self.src_emb(src) + self.pos_emb(pos_s))", 2)
        body.add("h = self.decoder(self.tgt_emb(tgt) + self.pos_emb(pos_t), memory, tgt_mask=causal)", 2)
        body.add("return self.out(h)", 2)
    body.add("")
    body.add("")
    body.add("def main():")
    body.add("args = parse_args()", 1)
    config_load(body, v)
    device_lines(body)
    names = ("vocab_size", "d_model", "n_heads", "d_ff", "enc_layers", "dec_layers", "seq_len")
    if st == "config":
        for k in names:
            v.cfg("model", k, r[k])
        bs = v.cfg("train", "batch_size", r["batch_size"])
        body.add("batch_size = %s" % bs, 1)
        body.add('seq_len = cfg["model"]["seq_len"]', 1)
        bs, seq, vocab = "batch_size", "seq_len", 'cfg["model"]["vocab_size"]'
        build = 'model = Seq2Seq(cfg["model"]).to(device)'
    elif st == "kwargs":
        bs = v.arg("batch_size", r["batch_size"], "int", typical=64)
        seq = v.arg("seq_len", r["seq_len"], "int", typical=256)
        vocab = repr(r["vocab_size"])
        defaults = dict(d_model=512, n_heads=8, d_ff=2048, enc_layers=6, dec_layers=6)
        kw = ["%s=%s" % (k, r[k]) for k, d in defaults.items() if r[k] != d]
        kw.append("seq_len=%s" % seq)
        build = "model = Seq2Seq(%s).to(device)" % ", ".join(kw)
    else:
        bs = v.arg("batch_size", r["batch_size"], "int", typical=64)
        seq = v.arg("seq_len", r["seq_len"], "int", typical=256)
        vocab = v.arg("vocab_size", r["vocab_size"], "int")
        for k, d in (("d_model", 512), ("n_heads", 8), ("d_ff", 2048), ("enc_layers", 6),
                     ("dec_layers", 6)):
            v.arg(k, r[k], "int", typical=d)
        build = "model = Seq2Seq(args).to(device)"
    steps = steps_ref(v, steps)
    body.add("steps = %s" % steps, 1)
    body.add("src_tokens = torch.randint(0, %s, (steps * %s, %s))" % (vocab, bs, seq), 1)
    body.add("tgt_tokens = torch.randint(0, %s, (steps * %s, %s + 1))" % (vocab, bs, seq), 1)
    for line in loader_lines(v, ["src_tokens", "tgt_tokens"], bs, steps):
        body.add(line, 1)
    body.add('corpus_mark("baseline")', 1)
    body.add(build, 1)
    fwd = ["logits = model(batch[0], batch[1][:, :-1])"]
    if r["mode"] == "train":
        fwd.append("loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), "
                   "batch[1][:, 1:].reshape(-1))")
    train_loop(body, v, "seq2seq", fwd)
    argparse_block(src, v, "Seq2seq transformer on synthetic tokens")
    return src.text() + "\n\n" + body.text() + MAIN


GENERATORS = {"mlp": gen_mlp, "resnet": gen_resnet, "encoder": gen_encoder, "gpt": gen_gpt,
              "seq2seq": gen_seq2seq}


# ---------------------------------------------------------------------------------------------

def run_id(i, run):
    r = run
    parts = ["c%03d" % (i + 1), r["family"]]
    if r["family"] == "resnet":
        parts.append(r["arch"])
    parts.append(r["mode"])
    parts.append("b%d" % r["batch_size"])
    if "seq_len" in r:
        parts.append("s%d" % r["seq_len"])
    if "block_size" in r:
        parts.append("s%d" % r["block_size"])
    if "image_size" in r:
        parts.append("i%d" % r["image_size"])
    parts.append(r["precision"])
    if r.get("optimizer"):
        parts.append(r["optimizer"])
    if r.get("ckpt"):
        parts.append("ckpt")
    return "_".join(parts)


def sbatch(entry, argv, run, size):
    mem = "32G" if size == "cpu" else "64G"
    lines = [
        "#!/bin/bash",
        "#SBATCH --job-name=%s" % run["id"],
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH --gres=gpu:1",
        "#SBATCH --mem=%s" % mem,
        "#SBATCH --time=00:30:00",
        "",
        "python %s %s" % (entry, " ".join(argv)) if argv else "python %s" % entry,
        "",
    ]
    return "\n".join(lines)


def generate(size, seed, out):
    runs = cpu_runs() if size == "cpu" else gpu_runs()
    steps = 3 if size == "cpu" else 4
    rng = random.Random("rightsize-corpus-%s-%d" % (size, seed))
    # Styles: an equal share of each, shuffled over the runs with the seeded generator.
    styles = [STYLES[i % len(STYLES)] for i in range(len(runs))]
    rng.shuffle(styles)
    if os.path.exists(os.path.join(out, "runs")):
        shutil.rmtree(os.path.join(out, "runs"))
    os.makedirs(os.path.join(out, "runs"), exist_ok=True)
    manifest = []
    for i, run in enumerate(runs):
        run = dict(run)
        run["id"] = run_id(i, run)
        run["style"] = styles[i]
        if size == "gpu" and run["family"] == "gpt" and run["n_embd"] * run["n_embd"] * run["n_layer"] > 5e7:
            run["build_on_device"] = True
        v = Values(styles[i], run, random.Random("%s-%d-%s" % (size, seed, run["id"])))
        code = GENERATORS[run["family"]](v, steps)
        entry = "train.py" if run["mode"] == "train" else "infer.py"
        argv = []
        if v.style == "config":
            argv = ["--config", "config.json"]
        argv += v.cmdline + v.flags
        d = os.path.join(out, "runs", run["id"])
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, entry), "w") as f:
            f.write(code)
        if v.config:
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(v.config, f, indent=2)
                f.write("\n")
        with open(os.path.join(d, "job.sbatch"), "w") as f:
            f.write(sbatch(entry, argv, run, size))
        run["entry"] = entry
        run["argv"] = argv
        run["steps"] = steps
        run["dir"] = "runs/" + run["id"]
        run["needs"] = ["torchvision"] if run["family"] == "resnet" else []
        run["sha256"] = hashlib.sha256(code.encode()).hexdigest()[:16]
        manifest.append(run)
    doc = {"schema": "rightsize.corpus/v1", "size": size, "seed": seed,
           "generator": "bench/corpus/generate.py", "runs": manifest}
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    keys = ["id", "family", "mode", "style", "batch_size", "precision", "optimizer", "ckpt",
            "arch", "image_size", "seq_len", "block_size", "hidden", "depth", "d_model",
            "n_layers", "n_embd", "n_layer", "enc_layers", "dec_layers", "vocab_size", "steps",
            "entry", "argv"]
    with open(os.path.join(out, "manifest.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(keys)
        for run in manifest:
            w.writerow([" ".join(run[k]) if k == "argv" else run.get(k, "") for k in keys])
    return doc


def manifest_digest(doc):
    """A digest of the runs (ids and program hashes): two corpora with the same digest hold the
    same programs."""
    h = hashlib.sha256()
    for run in doc["runs"]:
        h.update(("%s %s %s\n" % (run["id"], run["sha256"], " ".join(run["argv"]))).encode())
    return h.hexdigest()[:16]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", choices=("cpu", "gpu"), default="cpu",
                   help="cpu: small runs for one CPU thread; gpu: sizes for an 80-141 GB GPU")
    p.add_argument("--seed", type=int, default=8)
    p.add_argument("--out", required=True, help="folder to write (its runs/ is replaced)")
    a = p.parse_args()
    doc = generate(a.size, a.seed, a.out)
    print("wrote %d runs to %s (size %s, seed %d, digest %s)"
          % (len(doc["runs"]), a.out, a.size, a.seed, manifest_digest(doc)))


if __name__ == "__main__":
    sys.exit(main())
