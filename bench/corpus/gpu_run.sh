#!/usr/bin/env bash
# Collect the GPU corpus in one go: generate the "gpu" size set, run every program once on the
# first GPU, and leave the measured table in $OUT. Meant for a machine that has only this
# repository and a Python with PyTorch (torchvision for the ResNets; without it those runs are
# recorded as skipped). Downloads nothing. Budget: run.py stops starting runs after $CAP seconds
# (default 420), so the whole script stays under 8 minutes.
#
#   OUT=./out bash bench/corpus/gpu_run.sh      # PYTHON=python3 CAP=420 TIMEOUT=75 to change
#
# Afterwards, on the development machine: copy $OUT/gpu-DATE.{csv,json,jsonl} to data/corpus/
# and score it: python3 bench/corpus/score.py data/corpus/gpu-DATE.csv --rightsize build/rightsize
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-./out}
PYTHON=${PYTHON:-python3}
CAP=${CAP:-420}
TIMEOUT=${TIMEOUT:-75}

if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "gpu_run.sh: no $PYTHON on PATH (set PYTHON=/path/to/python with torch)" >&2
  exit 2
fi
if ! "$PYTHON" -c 'import torch' >/dev/null 2>&1; then
  echo "gpu_run.sh: $PYTHON cannot import torch: PyTorch is needed to run the corpus" \
    "(set PYTHON to a Python that has it; nothing can be downloaded here)" >&2
  exit 2
fi
if ! "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu_run.sh: torch $("$PYTHON" -c 'import torch; print(torch.__version__)') sees no CUDA" \
    "GPU (torch.cuda.is_available() is False)" >&2
  exit 3
fi
if ! "$PYTHON" -c 'import torchvision' >/dev/null 2>&1; then
  echo "gpu_run.sh: warning: torchvision is not installed: the ResNet runs will be skipped" >&2
fi

mkdir -p "$OUT"
DATE=$(date -u +%Y-%m-%d)
nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || true
"$PYTHON" "$HERE/generate.py" --size gpu --out "$OUT/corpus"
"$PYTHON" "$HERE/run.py" --corpus "$OUT/corpus" --device cuda --out "$OUT/gpu-$DATE.csv" \
  --time-cap "$CAP" --timeout "$TIMEOUT"
echo "gpu_run.sh: wrote $OUT/gpu-$DATE.csv, .json (hardware, versions) and .jsonl (raw probes)"
