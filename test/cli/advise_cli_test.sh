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
finish
