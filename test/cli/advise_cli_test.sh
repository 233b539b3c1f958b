#!/usr/bin/env bash
# `rightsize advise` and `rightsize predict --code` end to end on the fixture projects in
# test/data/code/: what a user reads (the lines to change, the memory range) and the JSON.
# Usage: advise_cli_test.sh RIGHTSIZE TESTDIR SRCDIR
set -euo pipefail
source "$2/cli/lib.sh" "$@"
CODE=$TESTDIR/data/code

run_rs advise "$CODE/gpt2_finetune/train.sh"
expect_eq "advise gpt2 exits 0" "$RC" 0
expect_contains "names the model and its line" "$OUT" "gpt2-medium              config.yaml:3"
expect_contains "GPU from --gres" "$OUT" "on A100-80GB (80.0 GiB, the script's --gres)"
expect_contains "out-of-memory advice at the batch size's line" "$OUT" \
  "train.sh:8 batch_size=16 needs ≈ 107 GiB per GPU on one 80.0 GiB GPU (A100-80GB): use 8"
expect_contains "checkpointing priced" "$OUT" "activation checkpointing (−"
expect_contains "unused GPUs" "$OUT" "you request 4 GPUs but the code uses 1"
expect_contains "workers against cores" "$OUT" "config.yaml:6 num_workers=32 with --cpus-per-task=8"

run_rs advise "$CODE/gpt2_finetune/train.sh" --gpu H200-141GB --json
expect_eq "advise --json exits 0" "$RC" 0
expect_eq "schema" "$(json_get "$OUT" 'd["schema"]')" "rightsize.advise/v1"
expect_eq "batch size fact" "$(json_get "$OUT" 'd["code"]["facts"]["batch_size"]["value"]')" 16
expect_eq "batch size line" "$(json_get "$OUT" 'd["code"]["facts"]["batch_size"]["where"]')" "train.sh:8"
expect_eq "a range, p10 < p50 < p90" \
  "$(json_get "$OUT" 'd["gpu_memory"]["p10"] < d["gpu_memory"]["p50"] < d["gpu_memory"]["p90"]')" True
expect_eq "fits an H200: no memory advice first" "$(json_get "$OUT" 'd["advice"][0]["kind"]')" "unused_gpus"

run_rs advise "$CODE/llama_zero3/train.sh"
expect_contains "ZeRO-3 from ds_config.json" "$OUT" "ds_config.json:8"
expect_contains "sharded over 8 GPUs" "$OUT" "÷ 8 GPUs (ZeRO-3)"

run_rs advise "$CODE/dynamic_model/train.sh"
expect_eq "undetermined model still exits 0" "$RC" 0
expect_contains "says why it cannot size the model" "$OUT" "GPU memory: undetermined"
expect_contains "names the getattr line" "$OUT" "train.py:7"

run_rs advise "$CODE/syntax_error/train.sh"
expect_eq "a syntax error exits 0" "$RC" 0
expect_contains "reports the broken line" "$OUT" "parse error: train.py:7"

# The torch the job's Python imports: a virtualenv the script activates holds torch 1.13,
# which has no scaled_dot_product_attention, so the encoder's attention keeps its s² scores.
mkdir -p "$WORK/venv/bin" "$WORK/venv/lib/python3.11/site-packages/torch" "$WORK/enc"
printf 'home = /nonexistent\ninclude-system-site-packages = false\n' >"$WORK/venv/pyvenv.cfg"
printf '\177ELF' >"$WORK/venv/bin/python"
printf "__version__ = '1.13.1'\n" >"$WORK/venv/lib/python3.11/site-packages/torch/version.py"
cp "$CODE/encoder_env/train.py" "$WORK/enc/"
printf '#!/bin/bash\n#SBATCH --gres=gpu:1\nsource %s/venv/bin/activate\npython train.py --batch_size 2\n' \
  "$WORK" >"$WORK/enc/job.sh"
run_rs advise "$WORK/enc/job.sh" --json
expect_eq "advise in a virtualenv exits 0" "$RC" 0
expect_eq "torch version from the virtualenv" \
  "$(json_get "$OUT" 'd["code"]["facts"]["torch_version"]["value"]')" "1.13.1"
expect_eq "the facts keep what the code asks for" \
  "$(json_get "$OUT" 'd["code"]["facts"]["fused_attention"]["kernel"]')" sdpa
expect_eq "the estimate says the old torch keeps the scores" \
  "$(json_get "$OUT" '[t["formula"] for t in d["gpu_memory"]["terms"] if t["name"] == "activations"][0].count("torch 1.13.1 (")')" 1
OLD_P50=$(json_get "$OUT" 'd["gpu_memory"]["p50"]')
OLD_FACTS=$(json_get "$OUT" 'json.dumps({k: v for k, v in d["code"]["facts"].items() if k != "torch_version"}, sort_keys=True)')
run_rs advise "$WORK/enc/job.sh" --python none --json
expect_eq "--python none reads no environment" \
  "$(json_get "$OUT" '"torch_version" in d["code"]["facts"]')" False
expect_eq "the scores are what the old torch adds" \
  "$(json_get "$OUT" "d['gpu_memory']['p50'] < $OLD_P50")" True
expect_eq "the same facts whoever reads the job, but the torch version" \
  "$(json_get "$OUT" 'json.dumps(d["code"]["facts"], sort_keys=True)')" "$OLD_FACTS"

run_rs advise "$CODE/gpt2_finetune/train.sh" --gpu TPU-v9
expect_eq "unknown --gpu is a usage error" "$RC" 1
run_rs advise "$WORK/missing.sh"
expect_eq "missing script" "$RC" 2

# predict --code: a cold start (no history of this program), so the code's estimate is the
# gpu_memory prediction.
run_rs ingest swf "$TESTDIR/data/swf/$(ls "$TESTDIR/data/swf" | grep -m1 swf)" --cluster hpc
expect_eq "ingest a trace" "$RC" 0
run_rs predict "$CODE/llama_zero3/train.sh" --code "$CODE/llama_zero3" --user alice --json
expect_eq "predict --code exits 0" "$RC" 0
expect_eq "gpu_memory from the code" "$(json_get "$OUT" 'd["targets"]["gpu_memory"]["source"]')" code
expect_eq "p50 is 8 GPUs × the per-GPU peak" \
  "$(json_get "$OUT" 'round(d["targets"]["gpu_memory"]["p50"] / d["targets"]["gpu_memory"]["code"]["per_gpu"]["p50"])')" 8
run_rs predict "$CODE/llama_zero3/train.sh" --user alice
expect_contains "predict prints the lines behind the estimate" "$OUT" "GPU memory from the code"
expect_contains "the ZeRO line" "$OUT" "ds_config.json:8"
# predict reads the job's torch only for the caller's own jobs: another user's runs in theirs.
run_rs predict "$WORK/enc/job.sh" --user "$(id -un)" --json
expect_eq "predict for oneself exits 0" "$RC" 0
OWN_P50=$(json_get "$OUT" 'd["targets"]["gpu_memory"]["code"]["per_gpu"]["p50"]')
run_rs predict "$WORK/enc/job.sh" --user someone-else --json
expect_eq "another user's job: this shell's torch is not theirs" \
  "$(json_get "$OUT" "d['targets']['gpu_memory']['code']['per_gpu']['p50'] < $OWN_P50")" True
finish
