#!/usr/bin/env python3
"""Run the measured corpus (bench/corpus/generate.py) and record what each run really used.

Each run is its own process (`python train.py ARGS` in its folder, as its job.sbatch says).
Recorded per run: outcome (ok, oom, error, timeout, skipped), wall time, time per step, the
parameter count, host memory (peak RSS of the process from wait4(), and RSS at the probe's
marks: before the model is built, after, after the first optimizer step), and on CUDA
torch.cuda.max_memory_reserved / max_memory_allocated (printed by the program itself), the
GPU's memory in use and utilisation sampled through NVML (pynvml when importable, else
`nvidia-smi --query-gpu ... -lms`), and the idle memory before the run.

Writes OUT (CSV, one row per run), OUT with .json (the sidecar: date, command, hardware,
versions, settings, corpus digest, what each column is) and OUT with .jsonl (the raw probe
record of each run). Standard library only; the programs need torch (and torchvision for
the ResNets: a run whose module is missing is "skipped", with the reason).

  python3 bench/corpus/run.py --size cpu --device cpu --out data/corpus/cpu-DATE.csv
  python3 bench/corpus/run.py --size gpu --device cuda --out OUT/gpu-DATE.csv --time-cap 420
"""
import argparse
import csv
import datetime
import importlib.util
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate  # noqa: E402

COLUMNS = [
    ("id", "run id (bench/corpus/generate.py)"),
    ("family", "mlp, resnet, encoder, gpt, seq2seq"),
    ("mode", "train or infer"),
    ("style", "how the program is written (argparse-literal, argparse-flags, config, kwargs)"),
    ("model", "torchvision arch, or the family"),
    ("batch_size", "per step"),
    ("seq_len", "tokens per sample (transformers)"),
    ("image_size", "pixels per side (ResNets)"),
    ("precision", "fp32; bf16/fp16 = autocast; bf16-pure/fp16-pure = weights cast"),
    ("optimizer", "sgd, sgdm (momentum 0.9), adam, adamw; empty for inference"),
    ("ckpt", "activation checkpointing on"),
    ("outcome", "ok, oom (out of memory caught in the program), error, timeout, skipped"),
    ("exit_code", "the process's exit status (negative: killed by that signal)"),
    ("wall_s", "wall time of the process, start to exit"),
    ("step_s", "mean time of the steps after the first"),
    ("parameters", "sum(p.numel()) of the model, as built"),
    ("host_peak_rss_bytes", "peak RSS of the process (ru_maxrss from wait4)"),
    ("host_baseline_rss_bytes", "RSS just before the model is built (torch imported, data made)"),
    ("host_baseline_maxrss_bytes", "peak RSS up to that point"),
    ("host_model_rss_bytes", "RSS after the model is built and moved, before the first step"),
    ("host_step1_rss_bytes", "RSS after the first optimizer step (train) or batch (infer)"),
    ("host_peak_over_baseline_bytes", "peak RSS - baseline RSS: what the job added on top"),
    ("cuda_max_reserved_bytes", "torch.cuda.max_memory_reserved() at the end"),
    ("cuda_max_allocated_bytes", "torch.cuda.max_memory_allocated() at the end"),
    ("cuda_model_allocated_bytes", "torch.cuda.memory_allocated() after the model is built"),
    ("cuda_step1_allocated_bytes", "torch.cuda.memory_allocated() after the first step"),
    ("nvml_idle_used_bytes", "GPU memory in use before the run started (NVML)"),
    ("nvml_peak_used_bytes", "peak GPU memory in use during the run (NVML, sampled)"),
    ("nvml_peak_over_idle_bytes", "nvml_peak_used - nvml_idle_used: the run's own footprint"),
    ("gpu_util_mean_pct", "mean GPU utilisation over the samples while the run was alive"),
    ("gpu_util_max_pct", "max GPU utilisation"),
    ("nvml_samples", "NVML samples taken"),
    ("error", "the last line of stderr, or the skip reason"),
]


# ---------------------------------------------------------------------------------------------
# The GPU sampler.

class GpuSampler:
    """Samples the GPU's used memory and utilisation every `interval_s` while a run is alive."""

    def __init__(self, index, interval_s=0.05):
        self.index, self.interval_s = index, interval_s
        self.source = None
        self._nvml = None
        try:
            import pynvml  # noqa: F401
            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            self.source = "pynvml"
        except Exception:
            if shutil.which("nvidia-smi"):
                self.source = "nvidia-smi"

    def read_once(self):
        """(used bytes, util %) now, or None."""
        if self._nvml:
            mem = self._nvml.nvmlDeviceGetMemoryInfo(self._handle)
            util = self._nvml.nvmlDeviceGetUtilizationRates(self._handle)
            return mem.used, util.gpu
        if self.source == "nvidia-smi":
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=memory.used,utilization.gpu",
                 "--format=csv,noheader,nounits", "-i", str(self.index)],
                capture_output=True, text=True, timeout=20).stdout
            return _parse_smi_line(out.strip().splitlines()[0]) if out.strip() else None
        return None

    def start(self):
        self.samples = []
        self._stop = threading.Event()
        if self._nvml:
            self._thread = threading.Thread(target=self._poll_nvml, daemon=True)
            self._thread.start()
        elif self.source == "nvidia-smi":
            self._proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=memory.used,utilization.gpu",
                 "--format=csv,noheader,nounits", "-i", str(self.index),
                 "-lms", str(max(20, int(self.interval_s * 1000)))],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self._thread = threading.Thread(target=self._read_smi, daemon=True)
            self._thread.start()

    def _poll_nvml(self):
        while not self._stop.is_set():
            try:
                self.samples.append(self.read_once())
            except Exception:
                pass
            self._stop.wait(self.interval_s)

    def _read_smi(self):
        for line in self._proc.stdout:
            s = _parse_smi_line(line)
            if s:
                self.samples.append(s)

    def stop(self):
        if self.source is None:
            return {}
        self._stop.set()
        if self.source == "nvidia-smi" and not self._nvml:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        self._thread.join(timeout=5)
        s = [x for x in self.samples if x]
        if not s:
            return {"nvml_samples": 0}
        return {"nvml_peak_used_bytes": max(m for m, _ in s),
                "gpu_util_mean_pct": round(sum(u for _, u in s) / len(s), 1),
                "gpu_util_max_pct": max(u for _, u in s),
                "nvml_samples": len(s)}


def _parse_smi_line(line):
    parts = [p.strip() for p in line.split(",")]
    if len(parts) < 2:
        return None
    try:
        return int(float(parts[0]) * 1024 * 1024), float(parts[1])
    except ValueError:
        return None


# ---------------------------------------------------------------------------------------------
# Machine and versions.

def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def hardware(device, gpu_index):
    cpu = re.search(r"^model name\s*:\s*(.+)$", _read("/proc/cpuinfo"), re.M)
    mem = re.search(r"^MemTotal:\s*(\d+) kB", _read("/proc/meminfo"), re.M)
    hw = {"cpu_model": cpu.group(1).strip() if cpu else platform.processor(),
          "cpu_cores": os.cpu_count(),
          "memory_bytes": int(mem.group(1)) * 1024 if mem else None,
          "kernel": platform.platform()}
    if device == "cuda" and shutil.which("nvidia-smi"):
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
             "--format=csv,noheader,nounits", "-i", str(gpu_index)],
            capture_output=True, text=True).stdout.strip()
        if out:
            name, driver, total = [p.strip() for p in out.splitlines()[0].split(",")[:3]]
            hw.update(gpu_name=name, gpu_driver=driver, gpu_memory_bytes=int(float(total)) * 2**20)
    return hw


VERSIONS = r'''
import json, platform, sys
v = {"python": platform.python_version(), "python_executable": sys.executable}
try:
    import torch
    v.update(torch=torch.__version__, torch_cuda=torch.version.cuda,
             cudnn=torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
             cuda_available=torch.cuda.is_available(), torch_threads=torch.get_num_threads())
    torch.ones(64, 64) @ torch.ones(64, 64)  # loads the BLAS the process really uses
    with open("/proc/self/maps") as f:
        libs = {l.split()[-1] for l in f if "blas" in l.lower() or "mkl" in l.lower()}
    v["blas_libraries"] = sorted(libs)
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        v.update(cuda_device=p.name, cuda_device_memory_bytes=p.total_memory)
except Exception as e:
    v["torch_error"] = repr(e)
try:
    import torchvision
    v["torchvision"] = torchvision.__version__
except Exception:
    v["torchvision"] = None
print(json.dumps(v))
'''


def versions(python, env):
    out = subprocess.run([python, "-c", VERSIONS], capture_output=True, text=True, env=env)
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": (out.stderr or out.stdout).strip()[-500:]}


# ---------------------------------------------------------------------------------------------
# One run.

def parse_probe(stdout):
    for line in reversed(stdout.splitlines()):
        if line.startswith("RIGHTSIZE_CORPUS "):
            try:
                return json.loads(line[len("RIGHTSIZE_CORPUS "):])
            except ValueError:
                return None
    return None


def run_one(run, corpus, python, env, timeout_s, sampler):
    cwd = os.path.join(corpus, run["dir"])
    cmd = [python, run["entry"]] + run["argv"]
    row = {}
    idle = None
    if sampler and sampler.source:
        try:
            idle = sampler.read_once()
        except Exception:
            idle = None
        sampler.start()
    t0 = time.time()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    out_chunks, err_chunks = [], []
    readers = [threading.Thread(target=lambda s=proc.stdout, b=out_chunks: b.append(s.read()),
                                daemon=True),
               threading.Thread(target=lambda s=proc.stderr, b=err_chunks: b.append(s.read()),
                                daemon=True)]
    for r in readers:
        r.start()
    killed = []
    timer = threading.Timer(timeout_s, lambda: (killed.append(1), _kill(proc)))
    timer.start()
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    wall = time.time() - t0
    timed_out = bool(killed)
    proc.returncode = os.waitstatus_to_exitcode(status)
    for r in readers:
        r.join(timeout=10)
    gpu = sampler.stop() if (sampler and sampler.source) else {}
    stdout, stderr = "".join(out_chunks), "".join(err_chunks)
    probe = parse_probe(stdout)
    row["exit_code"] = proc.returncode
    row["wall_s"] = round(wall, 2)
    row["host_peak_rss_bytes"] = usage.ru_maxrss * 1024
    if timed_out:
        row["outcome"] = "timeout"
    elif probe and probe.get("outcome") in ("ok", "oom"):
        row["outcome"] = probe["outcome"]
    elif "out of memory" in stderr.lower():
        row["outcome"] = "oom"
    else:
        row["outcome"] = "error"
    if row["outcome"] != "ok":
        last = [l for l in (probe or {}).get("error", "").splitlines() if l.strip()]
        if not last:
            last = [l for l in stderr.splitlines() if l.strip()]
        row["error"] = (last[-1] if last else "")[:300]
    if probe:
        marks = probe.get("marks", {})
        row["parameters"] = probe.get("parameters")
        base, model, step1, end = (marks.get(k, {}) for k in ("baseline", "model", "step1", "end"))
        row["host_baseline_rss_bytes"] = base.get("rss")
        row["host_baseline_maxrss_bytes"] = base.get("maxrss")
        row["host_model_rss_bytes"] = model.get("rss")
        row["host_step1_rss_bytes"] = step1.get("rss")
        if base.get("rss") is not None and end.get("maxrss") is not None:
            row["host_peak_over_baseline_bytes"] = end["maxrss"] - base["rss"]
        row["cuda_max_reserved_bytes"] = end.get("cuda_max_reserved")
        row["cuda_max_allocated_bytes"] = end.get("cuda_max_allocated")
        row["cuda_model_allocated_bytes"] = model.get("cuda_allocated")
        row["cuda_step1_allocated_bytes"] = step1.get("cuda_allocated")
        steps = sorted((int(k[4:]), m["t"]) for k, m in marks.items() if re.match(r"step\d+$", k))
        if len(steps) >= 2:
            row["step_s"] = round((steps[-1][1] - steps[0][1]) / (len(steps) - 1), 4)
    if idle:
        row["nvml_idle_used_bytes"] = idle[0]
    row.update(gpu)
    if idle and gpu.get("nvml_peak_used_bytes") is not None:
        row["nvml_peak_over_idle_bytes"] = gpu["nvml_peak_used_bytes"] - idle[0]
    raw = {"id": run["id"], "cmd": " ".join(shlex.quote(c) for c in cmd), "probe": probe,
           "stderr_tail": stderr[-1500:] if row["outcome"] != "ok" else ""}
    return row, raw


def _kill(proc):
    try:
        os.killpg(proc.pid, 9)
    except (ProcessLookupError, PermissionError):
        pass


def interleave(runs):
    """Round-robin over the families, so that a time cap cuts every family a little."""
    by = {}
    for r in runs:
        by.setdefault(r["family"], []).append(r)
    out = []
    while any(by.values()):
        for fam in list(by):
            if by[fam]:
                out.append(by[fam].pop(0))
    return out


def main():
    p = argparse.ArgumentParser(description="Run the measured corpus and record the real use.")
    p.add_argument("--corpus", help="a folder written by generate.py (default: generate "
                   "--size/--seed into a temporary folder)")
    p.add_argument("--size", choices=("cpu", "gpu"), default="cpu")
    p.add_argument("--seed", type=int, default=8)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cpu hides the GPUs (CUDA_VISIBLE_DEVICES=); cuda needs one")
    p.add_argument("--out", required=True, help="the CSV to write (.json and .jsonl beside it)")
    p.add_argument("--python", default=sys.executable, help="the Python with torch")
    p.add_argument("--timeout", type=float, default=180, help="seconds per run")
    p.add_argument("--time-cap", type=float, default=1800,
                   help="seconds in all: runs not started by then are recorded as skipped")
    p.add_argument("--threads", type=int, default=None,
                   help="OMP/OpenBLAS threads (default: 1 on cpu, the library default on cuda)")
    p.add_argument("--mmap-threshold", type=int, default=None,
                   help="glibc MALLOC_MMAP_THRESHOLD_ for the runs (default: 65536 on cpu, so "
                   "that freed tensors leave the RSS and peak RSS follows live memory; 0: leave "
                   "glibc's default, whose heap keeps freed memory and inflates RSS step by step)")
    p.add_argument("--only", default=None, help="regular expression on run ids")
    p.add_argument("--gpu-index", type=int, default=0, help="the GPU NVML samples")
    a = p.parse_args()

    started = time.time()
    tmp = None
    corpus = a.corpus
    if not corpus:
        tmp = tempfile.mkdtemp(prefix="rightsize-corpus-")
        corpus = tmp
    if not os.path.exists(os.path.join(corpus, "manifest.json")):
        generate.generate(a.size, a.seed, corpus)
    with open(os.path.join(corpus, "manifest.json")) as f:
        doc = json.load(f)

    env = dict(os.environ)
    threads = a.threads if a.threads is not None else (1 if a.device == "cpu" else None)
    if threads:
        env["OMP_NUM_THREADS"] = env["OPENBLAS_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    if a.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    mmap = a.mmap_threshold if a.mmap_threshold is not None else (65536 if a.device == "cpu" else 0)
    if mmap:
        env["MALLOC_MMAP_THRESHOLD_"] = str(mmap)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"

    ver = versions(a.python, env)
    if shutil.which("dpkg-query") and ver.get("python_executable", "").startswith("/usr/bin/"):
        # Debian's torch calls itself 1.13.0a0: the package versions say what it is.
        out = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Version}\\n",
                              "python3-torch", "python3-torchvision", "libopenblas0-pthread"],
                             capture_output=True, text=True).stdout
        ver["debian_packages"] = [l for l in out.splitlines() if l.strip()]
    if "torch" not in ver:
        sys.exit("run.py: %s cannot import torch (%s): install PyTorch for that Python "
                 "(Debian: apt-get install python3-torch python3-torchvision)"
                 % (a.python, ver.get("torch_error") or ver.get("error")))
    if a.device == "cuda" and not ver.get("cuda_available"):
        sys.exit("run.py: --device cuda, but torch.cuda.is_available() is False in %s" % a.python)
    hw = hardware(a.device, a.gpu_index)
    sampler = GpuSampler(a.gpu_index) if a.device == "cuda" else None

    runs = doc["runs"]
    if a.only:
        runs = [r for r in runs if re.search(a.only, r["id"])]
    runs = interleave(runs)
    have = {m: importlib.util.find_spec(m) is not None for m in ("torchvision",)}
    if a.python != sys.executable:
        for m in have:
            have[m] = subprocess.run([a.python, "-c", "import " + m], capture_output=True,
                                     env=env).returncode == 0

    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    base = os.path.splitext(a.out)[0]
    rows, raws = [], []
    print("run.py: %d runs of the %s corpus (digest %s) on %s, python %s, torch %s%s"
          % (len(runs), doc["size"], generate.manifest_digest(doc),
             hw.get("gpu_name") if a.device == "cuda" else hw["cpu_model"], ver.get("python"),
             ver.get("torch"), ", %s threads" % threads if threads else ""), flush=True)
    for i, run in enumerate(runs):
        meta = {"id": run["id"], "family": run["family"], "mode": run["mode"],
                "style": run["style"], "model": run.get("arch", run["family"]),
                "batch_size": run["batch_size"],
                "seq_len": run.get("seq_len", run.get("block_size", "")),
                "image_size": run.get("image_size", ""), "precision": run["precision"],
                "optimizer": run.get("optimizer") or "", "ckpt": int(bool(run.get("ckpt")))}
        left = a.time_cap - (time.time() - started)
        missing = [m for m in run.get("needs", []) if not have.get(m, True)]
        if missing:
            row, raw = {"outcome": "skipped", "error": "%s is not installed" % ",".join(missing)}, None
        elif left < 5:
            row, raw = {"outcome": "skipped", "error": "time cap of %.0f s reached" % a.time_cap}, None
        else:
            row, raw = run_one(run, corpus, a.python, env, min(a.timeout, left), sampler)
        row = {**meta, **row}
        rows.append(row)
        if raw:
            raws.append(raw)
        peak = row.get("nvml_peak_over_idle_bytes") or row.get("host_peak_over_baseline_bytes")
        print("[%2d/%d] %-55s %-7s %6.1f s  %s%s" % (
            i + 1, len(runs), run["id"], row["outcome"], row.get("wall_s") or 0,
            "%.2f GiB" % (peak / 2**30) if peak else "",
            ("  " + row["error"][:100]) if row.get("error") else ""), flush=True)

    with open(a.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[c for c, _ in COLUMNS], extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({k: ("" if row.get(k) is None else row.get(k)) for k, _ in COLUMNS})
    with open(base + ".jsonl", "w") as f:
        for raw in raws:
            f.write(json.dumps(raw, sort_keys=True) + "\n")
    counts = {}
    for row in rows:
        counts[row["outcome"]] = counts.get(row["outcome"], 0) + 1
    side = {
        "schema": "rightsize.corpus.measured/v1",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join(shlex.quote(x) for x in sys.argv),
        "corpus": {"size": doc["size"], "seed": doc["seed"], "runs": len(doc["runs"]),
                   "digest": generate.manifest_digest(doc), "generator": doc["generator"]},
        "device": a.device,
        "hardware": hw,
        "versions": ver,
        "settings": {"threads": threads, "timeout_s": a.timeout, "time_cap_s": a.time_cap,
                     "only": a.only, "nvml_source": sampler.source if sampler else None,
                     "env": {k: env[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                 "CUDA_VISIBLE_DEVICES", "MALLOC_MMAP_THRESHOLD_")
                             if k in env}},
        "outcomes": counts,
        "wall_s": round(time.time() - started, 1),
        "columns": dict(COLUMNS),
    }
    with open(base + ".json", "w") as f:
        json.dump(side, f, indent=2)
        f.write("\n")
    print("run.py: %s in %.0f s: %s" % (a.out, time.time() - started,
                                       ", ".join("%d %s" % (n, k) for k, n in sorted(counts.items()))))
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if counts.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
