#!/usr/bin/env python3
"""Turn the published-measurement table into job folders that `rightsize advise` can read.

Every row of data/published-gpu-memory/runs.csv (a published, measured peak GPU memory of a fully
specified run; see that folder's SOURCES.md) becomes one folder

    OUT/<id>/job.sbatch      the batch script: the launcher the source used (python, torchrun,
                             accelerate launch, srun for MMDetection) and the GPUs it ran on
    OUT/<id>/train.py        (or infer.py) the program, written the way the source's users write
                             it (below)
    OUT/<id>/model/config.json   the model's published config.json (Hugging Face rows)
    OUT/<id>/...             the source's own config beside it where it had one (litgpt and
                             torchtune YAML, an Accelerate/DeepSpeed config, the MMDetection config)

Program styles (column program_style):
  hf-trainer            transformers Trainer + TrainingArguments (the HF single-GPU guide's code:
                        random token ids, AutoModelForSequenceClassification, optim= or a
                        bitsandbytes Adam8bit passed to Trainer).
  litgpt-finetune       litgpt's runs written as the equivalent Hugging Face program a user would
                        write: AutoModelForCausalLM in bf16 (BitsAndBytesConfig NF4 for QLoRA),
                        PEFT LoraConfig/get_peft_model with litgpt's targets and rank, AdamW, a
                        plain PyTorch loop over micro-batches of max_seq_length tokens; FSDP rows
                        use torchrun + FSDP. The litgpt YAML the source ran is written beside it.
  accelerate-loop       the PEFT examples' Accelerate loop (AutoModelForSeq2SeqLM or
                        AutoModelForCausalLM, LoraConfig, DataLoader of batch 8); DeepSpeed rows
                        launch with `accelerate launch --config_file ds_zero3_cpu.yaml`.
  hf-pipeline-generate  transformers pipeline("text-generation") called with max_new_tokens
                        (the LLM optimisation guide's code, prompts included).
  mmdet-config          an MMDetection config file (model, data, optimizer dicts) trained with
                        tools/train.py under srun, 8 GPUs x samples_per_gpu.
  detectron2-zoo        the detectron2 Python API as its tutorials write it: get_cfg(), the model
                        zoo's config merged by path, cfg.SOLVER.IMS_PER_BATCH, DefaultTrainer;
                        torchrun over the 8 GPUs.
  torchtune-recipe      `tune run` with torchtune's single-device recipe and a copy of its YAML
                        config (the model builder, LoRA modules and rank, PagedAdamW8bit with
                        optimizer_in_bwd for the full fine-tune, the chunked cross-entropy,
                        activation checkpointing, compile, bf16).

--model-ref hub (default) loads models by their Hub name, as most users do;
--model-ref local loads them from ./model, the folder holding the published config.json.

Nothing is downloaded and nothing runs: these programs are for reading. Deterministic.

Usage: python3 bench/published/generate.py --out build/published [--table runs.csv]
         [--model-ref hub|local]
"""
import argparse
import csv
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TABLE = os.path.join(ROOT, "data", "published-gpu-memory", "runs.csv")


def count_parameters(c):
    """Parameters of a Hugging Face model from its config.json (the formula of its modeling
    file); None for an architecture this does not know."""
    mt = c.get("model_type")
    if mt in ("llama", "mistral", "gemma", "gemma2", "phi3"):
        h, n_layers, nh = c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"]
        kv = c.get("num_key_value_heads") or nh
        hd = c.get("head_dim") or h // nh
        inter, vocab = c["intermediate_size"], c["vocab_size"]
        tie = c.get("tie_word_embeddings", mt.startswith("gemma"))
        attn = h * nh * hd + 2 * h * kv * hd + nh * hd * h
        norms = 2 * h + (2 * h if mt == "gemma2" else 0)
        return vocab * h + n_layers * (attn + 3 * h * inter + norms) + h + (0 if tie else vocab * h)
    if mt == "phi":
        h, n_layers, inter, vocab = (c["hidden_size"], c["num_hidden_layers"],
                                     c["intermediate_size"], c["vocab_size"])
        layer = 4 * (h * h + h) + 2 * h * inter + inter + h + 2 * h
        return vocab * h + n_layers * layer + 2 * h + vocab * h + vocab
    if mt == "falcon":
        h, n_layers, nh, vocab = (c["hidden_size"], c["num_hidden_layers"],
                                  c["num_attention_heads"], c["vocab_size"])
        hd = h // nh
        kv = 1 if c.get("multi_query") else nh
        layer = h * (h + 2 * kv * hd) + h * h + 8 * h * h + 2 * h
        return vocab * h + n_layers * layer + 2 * h
    if mt == "gpt_neox":
        h, n_layers, inter, vocab = (c["hidden_size"], c["num_hidden_layers"],
                                     c["intermediate_size"], c["vocab_size"])
        layer = 4 * h * h + 4 * h + 2 * h * inter + inter + h + 4 * h
        return vocab * h + n_layers * layer + 2 * h + vocab * h
    if mt == "bloom":
        h, n_layers, vocab = c["hidden_size"], c["n_layer"], c["vocab_size"]
        layer = 4 * h * h + 4 * h + 8 * h * h + 5 * h + 4 * h
        return vocab * h + 2 * h + n_layers * layer + 2 * h
    if mt in ("t5", "mt5"):
        d, ff, heads, kv, vocab = c["d_model"], c["d_ff"], c["num_heads"], c["d_kv"], c["vocab_size"]
        att = 4 * d * heads * kv
        mlp = (3 if c.get("feed_forward_proj", "relu").startswith("gated") else 2) * d * ff
        buckets = c.get("relative_attention_num_buckets", 32) * heads
        enc = c["num_layers"] * (att + mlp + 2 * d) + d + buckets
        dec = c.get("num_decoder_layers", c["num_layers"]) * (2 * att + mlp + 3 * d) + d + buckets
        return vocab * d + enc + dec + (0 if c.get("tie_word_embeddings", True) else vocab * d)
    if mt == "gpt_bigcode":
        h, n_layers, vocab = c["n_embd"], c["n_layer"], c["vocab_size"]
        inter = c.get("n_inner") or 4 * h
        kvd = (h // c["n_head"]) if c.get("multi_query", True) else h
        layer = h * (h + 2 * kvd) + h + 2 * kvd + h * h + h + 2 * h * inter + inter + h + 4 * h
        return vocab * h + c["n_positions"] * h + n_layers * layer + 2 * h
    if mt == "bert":
        h, n_layers, inter, vocab = (c["hidden_size"], c["num_hidden_layers"],
                                     c["intermediate_size"], c["vocab_size"])
        emb = (vocab + c["max_position_embeddings"] + c["type_vocab_size"]) * h + 2 * h
        layer = 4 * (h * h + h) + 2 * h + 2 * h * inter + inter + h + 2 * h
        return emb + n_layers * layer + h * h + h
    return None


def read_table(path=TABLE):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def flag(v):
    return str(v).strip().lower() == "true"


def sbatch(row, launch, gpus=None, ntasks=1):
    gpus = gpus or int(row["gpus"] or 1)
    gres = "gpu:%d" % gpus
    lines = ["#!/bin/bash",
             "#SBATCH --job-name=pub-%s" % row["id"],
             "#SBATCH --nodes=1",
             "#SBATCH --ntasks=%d" % ntasks,
             "#SBATCH --cpus-per-task=8",
             "#SBATCH --gres=%s" % gres,
             "#SBATCH --mem=64G",
             "#SBATCH --time=04:00:00",
             "",
             launch,
             ""]
    return "\n".join(lines)


def rightsize_gpu(row):
    """The `rightsize advise --gpu` name of the GPU the source measured on (None: not stated)."""
    g = row["gpu"]
    for key, name in (("V100-SXM2 16GB", "V100-16GB"), ("A10G", "A10-24GB"),
                      ("A100 80GB", "A100-80GB"), ("A100 40GB", "A100-40GB"),
                      ("RTX 4090", "RTX-4090-24GB")):
        if key in g:
            return name
    return None


def model_ref(row, how):
    return "./model" if how == "local" else row["model"]


def lora_modules(row):
    """PEFT target_modules for the row's LoRA targets, in the model's own module names."""
    t = row["lora_targets"]
    mt = row["_config"].get("model_type", "")
    if t.startswith("query,value (litgpt"):
        return {"falcon": ["query_key_value"], "gpt_neox": ["query_key_value"]}.get(
            mt, ["q_proj", "v_proj"])
    if t.startswith("query,key,value,projection,mlp,head"):
        if mt == "phi":
            return ["q_proj", "k_proj", "v_proj", "dense", "fc1", "fc2", "lm_head"]
        if mt == "phi3":
            return ["qkv_proj", "o_proj", "gate_up_proj", "down_proj", "lm_head"]
        return ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
                "lm_head"]
    if t.startswith("q,v"):
        return ["q", "v"]
    if t.startswith("query_key_value"):
        return ["query_key_value"]
    if t == "q_proj,v_proj,output_proj":
        return ["q_proj", "v_proj", "o_proj"]
    if t.startswith("q_proj,v_proj,k_proj,output_proj,mlp"):
        return ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    return []


# ---------------------------------------------------------------------------------------------
# hf-trainer: the HF single-GPU training guide (BERT-large sequence classification).

def hf_trainer(row, ref):
    bs, ga = int(row["batch_size"]), int(row["grad_accum"] or 1)
    args = ["per_device_train_batch_size=%d" % bs]
    if ga > 1:
        args.append("gradient_accumulation_steps=%d" % ga)
    if flag(row["grad_checkpointing"]):
        args.append("gradient_checkpointing=True")
    if row["precision"] == "fp16-amp":
        args.append("fp16=True")
    if row["optimizer"] == "adafactor":
        args.append('optim="adafactor"')
    bnb = row["optimizer"] == "bnb.Adam8bit"
    out = ['"""%s: %s (generated from data/published-gpu-memory/runs.csv)."""' % (row["id"], row["source"]),
           "import numpy as np",
           "from datasets import Dataset",
           "from transformers import AutoModelForSequenceClassification, Trainer, TrainingArguments, logging",
           ]
    if bnb:
        out += ["import bitsandbytes as bnb", "from torch import nn",
                "from transformers.trainer_pt_utils import get_parameter_names"]
    out += ["",
            "seq_len, dataset_size = %s, 512" % row["seq_len"],
            "dummy_data = {",
            '    "input_ids": np.random.randint(100, 30000, (dataset_size, seq_len)),',
            '    "labels": np.random.randint(0, 1, (dataset_size)),',
            "}",
            "ds = Dataset.from_dict(dummy_data)",
            'ds.set_format("pt")',
            "",
            'model = AutoModelForSequenceClassification.from_pretrained("%s").to("cuda")' % ref,
            "",
            "default_args = {",
            '    "output_dir": "tmp",',
            '    "evaluation_strategy": "steps",',
            '    "num_train_epochs": 1,',
            '    "log_level": "error",',
            '    "report_to": "none",',
            "}",
            "logging.set_verbosity_error()",
            "training_args = TrainingArguments(%s, **default_args)" % ", ".join(args)]
    if bnb:
        out += ["",
                "decay_parameters = get_parameter_names(model, [nn.LayerNorm])",
                'decay_parameters = [name for name in decay_parameters if "bias" not in name]',
                "optimizer_grouped_parameters = [",
                '    {"params": [p for n, p in model.named_parameters() if n in decay_parameters],',
                '     "weight_decay": training_args.weight_decay},',
                '    {"params": [p for n, p in model.named_parameters() if n not in decay_parameters],',
                '     "weight_decay": 0.0},',
                "]",
                "adam_bnb_optim = bnb.optim.Adam8bit(",
                "    optimizer_grouped_parameters,",
                "    betas=(training_args.adam_beta1, training_args.adam_beta2),",
                "    eps=training_args.adam_epsilon,",
                "    lr=training_args.learning_rate,",
                ")",
                "trainer = Trainer(model=model, args=training_args, train_dataset=ds,",
                "                  optimizers=(adam_bnb_optim, None))"]
    else:
        out.append("trainer = Trainer(model=model, args=training_args, train_dataset=ds)")
    out += ["result = trainer.train()", ""]
    return {"train.py": "\n".join(out)}, sbatch(row, "python train.py")


# ---------------------------------------------------------------------------------------------
# Causal-LM fine-tunes (litgpt rows) as a Hugging Face + PEFT program.

def causal_finetune(row, ref, extra_files):
    task = row["task"]
    lora = task in ("lora", "qlora")
    qlora = task == "qlora"
    fsdp = row["parallelism"].startswith("fsdp")
    ckpt = flag(row["grad_checkpointing"])
    compiled = row["program_style"] == "torchtune-recipe"
    paged8 = "PagedAdamW8bit" in row["optimizer"]
    out = ['"""%s: %s, %s (generated from data/published-gpu-memory/runs.csv)."""'
           % (row["id"], row["source"], task),
           "import torch"]
    if fsdp:
        out += ["import os", "import torch.distributed as dist",
                "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP",
                "from torch.distributed.fsdp import ShardingStrategy"]
    out.append("from transformers import AutoModelForCausalLM%s"
               % (", BitsAndBytesConfig" if qlora else ""))
    if lora:
        out.append("from peft import LoraConfig, get_peft_model")
    if paged8:
        out.append("import bitsandbytes as bnb")
    out += ["",
            "micro_batch_size = %s" % row["batch_size"],
            "max_seq_length = %s" % row["seq_len"],
            "lr = 2e-4",
            ""]
    if fsdp:
        out += ['dist.init_process_group("nccl")',
                'torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))', ""]
    if qlora:
        out += ["bnb_config = BitsAndBytesConfig(",
                "    load_in_4bit=True,",
                '    bnb_4bit_quant_type="nf4",',
                "    bnb_4bit_compute_dtype=torch.bfloat16,",
                ")",
                "model = AutoModelForCausalLM.from_pretrained(",
                '    "%s", quantization_config=bnb_config, torch_dtype=torch.bfloat16,' % ref,
                '    attn_implementation="sdpa", device_map={"": 0})']
    else:
        out += ["model = AutoModelForCausalLM.from_pretrained(",
                '    "%s", torch_dtype=torch.bfloat16, attn_implementation="sdpa")' % ref]
        if not fsdp:
            out.append('model = model.to("cuda")')
    if ckpt:
        out.append("model.gradient_checkpointing_enable()")
    if lora:
        # litgpt and torchtune keep the non-quantized weights in bf16: no
        # prepare_model_for_kbit_training (it would cast them to fp32).
        out += ["lora_config = LoraConfig(",
                "    r=%s," % row["lora_rank"],
                "    lora_alpha=%s," % (row["lora_alpha"] or 16),
                "    lora_dropout=0.05,",
                "    target_modules=%s," % json.dumps(lora_modules(row)),
                '    task_type="CAUSAL_LM",',
                ")",
                "model = get_peft_model(model, lora_config)"]
    if fsdp:
        out.append("model = FSDP(model, sharding_strategy=ShardingStrategy.FULL_SHARD, "
                   "device_id=torch.cuda.current_device(), use_orig_params=True)")
    if compiled:
        out.append("model = torch.compile(model)")
    params = "[p for p in model.parameters() if p.requires_grad]" if lora else "model.parameters()"
    if paged8:
        out.append("optimizer = bnb.optim.PagedAdamW8bit(%s, lr=lr)" % params)
    else:
        out.append("optimizer = torch.optim.AdamW(%s, lr=lr, weight_decay=0.0, betas=(0.9, 0.95))"
                   % params)
    vocab = row["vocab"] or "32000"
    out += ["",
            "model.train()",
            "for step in range(100):",
            "    input_ids = torch.randint(0, %s, (micro_batch_size, max_seq_length), device=\"cuda\")"
            % vocab,
            "    loss = model(input_ids=input_ids, labels=input_ids).loss",
            "    loss.backward()",
            "    optimizer.step()",
            "    optimizer.zero_grad()",
            ""]
    gpus = int(row["gpus"] or 1)
    if fsdp:
        launch = "torchrun --standalone --nproc_per_node=%d train.py" % gpus
    else:
        launch = "python train.py"
    return {"train.py": "\n".join(out), **extra_files}, sbatch(row, launch)


def litgpt_yaml(row):
    cfg = row["quote"].split("|")[1].strip()
    lines = ["# What the source ran: litgpt finetune --config config_hub/finetune/%s" % cfg,
             "# (written for reference; train.py is the equivalent Hugging Face program)",
             "checkpoint_dir: checkpoints/%s" % row["model"],
             "precision: %s" % row["precision"],
             "devices: %s" % row["gpus"]]
    if row["quantization"]:
        lines.append("quantize: %s" % row["quantization"])
    if row["lora_rank"]:
        lines += ["lora_r: %s" % row["lora_rank"], "lora_alpha: %s" % row["lora_alpha"],
                  "# targets: %s" % row["lora_targets"]]
    lines += ["train:", "  micro_batch_size: %s" % row["batch_size"],
              "  max_seq_length: %s" % row["seq_len"], "optimizer:",
              "  class_path: torch.optim.AdamW", ""]
    return "\n".join(lines)


def torchtune_recipe(row):
    """The source's own job: `tune run` with the single-device recipe and a copy of its config
    (llama3_1/8B_{full,lora,qlora}_single_device.yaml of that release) with the README's batch,
    packed length and compile, and the row's LoRA rank and targets."""
    task = row["task"]
    recipe = "full_finetune_single_device" if task == "full-finetune" else "lora_finetune_single_device"
    builder = {"full-finetune": "llama3_1_8b", "lora": "lora_llama3_1_8b",
               "qlora": "qlora_llama3_1_8b"}[task]
    lines = ["# %s: %s, %s (generated from data/published-gpu-memory/runs.csv): a copy of"
             % (row["id"], row["source"], task),
             "# llama3_1/8B_%s_single_device.yaml with the README's settings"
             % {"full-finetune": "full", "lora": "lora", "qlora": "qlora"}[task],
             "model:", "  _component_: torchtune.models.llama3_1.%s" % builder]
    if row["lora_rank"]:
        targets = [t for t in row["lora_targets"].split(",") if t != "mlp"]
        lines += ["  lora_attn_modules: [%s]" % ", ".join("'%s'" % t for t in targets),
                  "  apply_lora_to_mlp: %s" % ("True" if "mlp" in row["lora_targets"].split(",") else "False"),
                  "  apply_lora_to_output: False",
                  "  lora_rank: %s" % row["lora_rank"], "  lora_alpha: %s" % row["lora_alpha"],
                  "  lora_dropout: 0.0"]
    lines += ["tokenizer:", "  _component_: torchtune.models.llama3.llama3_tokenizer",
              "  path: /tmp/Meta-Llama-3.1-8B-Instruct/original/tokenizer.model",
              "  max_seq_len: %s" % row["seq_len"],
              "dataset:", "  _component_: torchtune.datasets.alpaca_dataset", "  packed: True",
              "seed: null", "shuffle: True",
              "batch_size: %s" % row["batch_size"], "epochs: 1"]
    if task == "full-finetune":
        lines += ["optimizer:", "  _component_: bitsandbytes.optim.PagedAdamW8bit", "  lr: 1e-5",
                  "optimizer_in_bwd: True"]
    else:
        lines += ["optimizer:", "  _component_: torch.optim.AdamW", "  fused: True",
                  "  weight_decay: 0.01", "  lr: 3e-4",
                  "lr_scheduler:", "  _component_: torchtune.training.lr_schedulers.get_cosine_schedule_with_warmup",
                  "  num_warmup_steps: 100"]
    lines += ["loss:", "  _component_: torchtune.modules.loss.CEWithChunkedOutputLoss",
              "gradient_accumulation_steps: %s" % (row["grad_accum"] or 1),
              "compile: True", "device: cuda",
              "enable_activation_checkpointing: True", "enable_activation_offloading: False",
              "dtype: bf16"]
    return ({"torchtune.yaml": "\n".join(lines) + "\n"},
            sbatch(row, "tune run %s --config torchtune.yaml" % recipe))


# ---------------------------------------------------------------------------------------------
# accelerate-loop: the PEFT examples (seq2seq / causal LM LoRA with Accelerate).

DS_ZERO3 = """compute_environment: LOCAL_MACHINE
deepspeed_config:
  gradient_accumulation_steps: 1
  gradient_clipping: 1.0
  offload_optimizer_device: cpu
  offload_param_device: cpu
  zero3_init_flag: true
  zero3_save_16bit_model: true
  zero_stage: 3
distributed_type: DEEPSPEED
downcast_bf16: 'no'
dynamo_backend: 'NO'
fsdp_config: {}
machine_rank: 0
main_training_function: main
megatron_lm_config: {}
mixed_precision: 'no'
num_machines: 1
num_processes: 1
rdzv_backend: static
same_network: true
use_cpu: false
"""


def accelerate_loop(row, ref):
    seq2seq = row["task"].endswith("seq2seq")
    lora = "lora" in row["task"]
    auto = "AutoModelForSeq2SeqLM" if seq2seq else "AutoModelForCausalLM"
    tt = "SEQ_2_SEQ_LM" if seq2seq else "CAUSAL_LM"
    out = ['"""%s: %s (generated from data/published-gpu-memory/runs.csv)."""' % (row["id"], row["source"]),
           "import torch",
           "from accelerate import Accelerator",
           "from torch.utils.data import DataLoader, TensorDataset",
           "from transformers import %s, get_linear_schedule_with_warmup" % auto]
    if lora:
        out.append("from peft import LoraConfig, TaskType, get_peft_model")
    out += ["",
            "",
            "def main():",
            "    accelerator = Accelerator()",
            '    model_name_or_path = "%s"' % ref]
    if lora:
        out += ["    peft_config = LoraConfig(",
                "        task_type=TaskType.%s, inference_mode=False, r=8, lora_alpha=32, lora_dropout=0.1" % tt,
                "    )"]
    out += ["    lr = 3e-3",
            "    num_epochs = 5",
            "    batch_size = %s" % row["batch_size"],
            "    max_length = %s" % row["seq_len"],
            "",
            "    input_ids = torch.randint(0, 32000, (256, max_length))",
            "    labels = torch.randint(0, 32000, (256, %s))" % ("4" if seq2seq else "max_length"),
            "    train_dataloader = DataLoader(TensorDataset(input_ids, labels), shuffle=True,",
            "                                  batch_size=batch_size, pin_memory=True)",
            "",
            "    model = %s.from_pretrained(model_name_or_path)" % auto]
    if lora:
        out += ["    model = get_peft_model(model, peft_config)",
                "    model.print_trainable_parameters()"]
    out += ["    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)",
            "    lr_scheduler = get_linear_schedule_with_warmup(",
            "        optimizer=optimizer, num_warmup_steps=0,",
            "        num_training_steps=(len(train_dataloader) * num_epochs))",
            "    model, train_dataloader, optimizer, lr_scheduler = accelerator.prepare(",
            "        model, train_dataloader, optimizer, lr_scheduler)",
            "",
            "    for epoch in range(num_epochs):",
            "        model.train()",
            "        for step, (x, y) in enumerate(train_dataloader):",
            "            outputs = model(input_ids=x, labels=y)",
            "            loss = outputs.loss",
            "            accelerator.backward(loss)",
            "            optimizer.step()",
            "            lr_scheduler.step()",
            "            optimizer.zero_grad()",
            "",
            "",
            'if __name__ == "__main__":',
            "    main()",
            ""]
    files = {"train.py": "\n".join(out)}
    if "deepspeed" in row["parallelism"]:
        files["ds_zero3_cpu.yaml"] = DS_ZERO3
        launch = "accelerate launch --config_file ds_zero3_cpu.yaml train.py"
    else:
        launch = "accelerate launch --num_processes 1 train.py"
    return files, sbatch(row, launch)


# ---------------------------------------------------------------------------------------------
# hf-pipeline-generate: the LLM optimisation guide (octocoder).

SYSTEM_PROMPT = '''Below are a series of dialogues between various people and an AI technical assistant.
The assistant tries to be helpful, polite, honest, sophisticated, emotionally aware, and humble but knowledgeable.
The assistant is happy to help with code questions and will do their best to understand exactly what is needed.
It also tries to avoid giving false or misleading information, and it caveats when it isn't entirely sure about the right answer.
That said, the assistant is practical really does its best, and doesn't let caution get too much in the way of being useful.

The Starcoder models are a series of 15.5B parameter models trained on 80+ programming languages from The Stack (v1.2) (excluding opt-out requests).
The model uses Multi Query Attention, was trained using the Fill-in-the-Middle objective, and with 8,192 tokens context window for a trillion tokens of heavily deduplicated data.

-----

Question: Write a function that takes two lists and returns a list that has alternating elements from each input list.

Answer: Sure. Here is a function that does that.

def alternating(list1, list2):
   results = []
   for i in range(len(list1)):
       results.append(list1[i])
       results.append(list2[i])
   return results

-----
'''


def pipeline_generate(row, ref):
    quant = row["quantization"]
    if quant.startswith("bnb.int8"):
        load = 'model = AutoModelForCausalLM.from_pretrained("%s", load_in_8bit=True, pad_token_id=0)' % ref
    elif quant.startswith("bnb.fp4"):
        load = ('model = AutoModelForCausalLM.from_pretrained("%s", load_in_4bit=True, '
                'low_cpu_mem_usage=True, pad_token_id=0)' % ref)
    else:
        load = ('model = AutoModelForCausalLM.from_pretrained("%s", torch_dtype=torch.bfloat16, '
                'device_map="auto", pad_token_id=0)' % ref)
    long_prompt = "long prompt" in row["notes"]
    flash = row["attention"].startswith("sdpa")
    out = ['"""%s: %s (generated from data/published-gpu-memory/runs.csv)."""' % (row["id"], row["source"]),
           "import torch",
           "from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline",
           "",
           load,
           'tokenizer = AutoTokenizer.from_pretrained("%s")' % ref]
    if flash:
        out.append("model.to_bettertransformer()")
    out += ["pipe = pipeline(\"text-generation\", model=model, tokenizer=tokenizer)",
            "",
            'prompt = "Question: Please write a function in Python that transforms bytes to Giga bytes.\\n\\nAnswer:"']
    if long_prompt:
        out += ['system_prompt = """%s"""' % SYSTEM_PROMPT,
                "long_prompt = 10 * system_prompt + prompt"]
        p = "long_prompt"
    else:
        p = "prompt"
    call = 'result = pipe(%s, max_new_tokens=%s)[0]["generated_text"][len(%s):]' % (
        p, row["max_new_tokens"], p)
    if flash:
        out += ["with torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False, "
                "enable_mem_efficient=False):",
                "    " + call]
    else:
        out.append(call)
    out += ["print(result)", ""]
    return {"infer.py": "\n".join(out)}, sbatch(row, "python infer.py")


# ---------------------------------------------------------------------------------------------
# mmdet-config: an MMDetection 2.x config trained with tools/train.py.

def mmdet_config(row):
    cfg = row["_config"]
    bb = cfg["backbone"]
    det = cfg["detector"]
    name = row["model"].split(":", 1)[1]
    backbone = ["    backbone=dict(",
                "        type='%s'," % bb["type"],
                "        depth=%d," % bb["depth"]]
    if bb["type"] == "ResNeXt":
        backbone += ["        groups=%d," % bb["groups"], "        base_width=%d," % bb["base_width"]]
    backbone += ["        num_stages=4,",
                 "        out_indices=(0, 1, 2, 3),",
                 "        frozen_stages=1,",
                 "        norm_cfg=dict(type='BN', requires_grad=True),",
                 "        norm_eval=True,",
                 "        style='pytorch',",
                 "        init_cfg=dict(type='Pretrained', checkpoint='torchvision://resnet%d')),"
                 % bb["depth"] if bb["type"] == "ResNet" else
                 "        init_cfg=dict(type='Pretrained', checkpoint='open-mmlab://resnext101_%dx%dd')),"
                 % (bb["groups"], bb["base_width"])]
    neck = ["    neck=dict(",
            "        type='FPN',",
            "        in_channels=%s," % cfg["neck"]["in_channels"],
            "        out_channels=256,",
            "        %s" % ("start_level=1, add_extra_convs='on_input', num_outs=5)," if det == "RetinaNet"
                           else "num_outs=5),")]
    if det == "RetinaNet":
        heads = ["    bbox_head=dict(",
                 "        type='RetinaHead', num_classes=80, in_channels=256, stacked_convs=4,",
                 "        feat_channels=256,",
                 "        anchor_generator=dict(type='AnchorGenerator', octave_base_scale=4,",
                 "                              scales_per_octave=3, ratios=[0.5, 1.0, 2.0],",
                 "                              strides=[8, 16, 32, 64, 128]),",
                 "        loss_cls=dict(type='FocalLoss', use_sigmoid=True, gamma=2.0, alpha=0.25,",
                 "                      loss_weight=1.0),",
                 "        loss_bbox=dict(type='L1Loss', loss_weight=1.0)),"]
    else:
        heads = ["    rpn_head=dict(",
                 "        type='RPNHead', in_channels=256, feat_channels=256,",
                 "        anchor_generator=dict(type='AnchorGenerator', scales=[8],",
                 "                              ratios=[0.5, 1.0, 2.0], strides=[4, 8, 16, 32, 64])),",
                 "    roi_head=dict(",
                 "        type='StandardRoIHead',",
                 "        bbox_roi_extractor=dict(type='SingleRoIExtractor',",
                 "                                roi_layer=dict(type='RoIAlign', output_size=7, sampling_ratio=0),",
                 "                                out_channels=256, featmap_strides=[4, 8, 16, 32]),",
                 "        bbox_head=dict(type='Shared2FCBBoxHead', in_channels=256, fc_out_channels=1024,",
                 "                       roi_feat_size=7, num_classes=80),"]
        if det == "MaskRCNN":
            heads += ["        mask_roi_extractor=dict(type='SingleRoIExtractor',",
                      "                                roi_layer=dict(type='RoIAlign', output_size=14, sampling_ratio=0),",
                      "                                out_channels=256, featmap_strides=[4, 8, 16, 32]),",
                      "        mask_head=dict(type='FCNMaskHead', num_convs=4, in_channels=256,",
                      "                       conv_out_channels=256, num_classes=80)),"]
        else:
            heads[-1] = heads[-1][:-1] + "),"
    spg = cfg["data"]["samples_per_gpu"]
    out = ["# %s: %s, configs/%s.py (generated from data/published-gpu-memory/runs.csv)"
           % (row["id"], row["source"], name),
           "model = dict(",
           "    type='%s'," % det] + backbone + neck + heads + [
           ")",
           "img_norm_cfg = dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], to_rgb=True)",
           "train_pipeline = [",
           "    dict(type='LoadImageFromFile'),",
           "    dict(type='LoadAnnotations', with_bbox=True%s)," % (", with_mask=True" if det == "MaskRCNN" else ""),
           "    dict(type='Resize', img_scale=(1333, 800), keep_ratio=True),",
           "    dict(type='RandomFlip', flip_ratio=0.5),",
           "    dict(type='Normalize', **img_norm_cfg),",
           "    dict(type='Pad', size_divisor=32),",
           "    dict(type='DefaultFormatBundle'),",
           "    dict(type='Collect', keys=['img', 'gt_bboxes', 'gt_labels'%s])," % (", 'gt_masks'" if det == "MaskRCNN" else ""),
           "]",
           "data = dict(",
           "    samples_per_gpu=%d," % spg,
           "    workers_per_gpu=2,",
           "    train=dict(type='CocoDataset', ann_file='data/coco/annotations/instances_train2017.json',",
           "               img_prefix='data/coco/train2017/', pipeline=train_pipeline))",
           "optimizer = dict(type='SGD', lr=%s, momentum=0.9, weight_decay=0.0001)" % cfg["optimizer"]["lr"],
           "optimizer_config = dict(grad_clip=%s)" % ("dict(max_norm=35, norm_type=2)" if det == "RetinaNet" else "None"),
           "lr_config = dict(policy='step', warmup='linear', warmup_iters=500, warmup_ratio=0.001, step=[8, 11])",
           "runner = dict(type='EpochBasedRunner', max_epochs=12)"]
    if cfg.get("fp16"):
        out.append("fp16 = dict(loss_scale=512.)")
    out.append("")
    gpus = int(row["gpus"] or 1)
    launch = ("srun python -u tools/train.py %s.py --work-dir work_dirs/%s --launcher=\"slurm\""
              % (name, name))
    return ({"%s.py" % name: "\n".join(out), "tools/train.py": MMDET_TRAIN},
            sbatch(row, launch, gpus=gpus, ntasks=gpus))


# ---------------------------------------------------------------------------------------------
# detectron2-zoo: a model-zoo config through detectron2's Python API, one process per GPU.

def detectron2_zoo(row):
    cfg = row["_config"]
    gpus = int(row["gpus"] or 1)
    ims = cfg["solver"]["ims_per_batch"]
    program = "\n".join([
        "# %s: %s, configs/%s (generated from data/published-gpu-memory/runs.csv)"
        % (row["id"], row["source"], cfg["zoo_config"]),
        "import torch.distributed as dist",
        "from detectron2 import model_zoo",
        "from detectron2.config import get_cfg",
        "from detectron2.engine import DefaultTrainer",
        "",
        "",
        "def main():",
        "    dist.init_process_group(\"nccl\")",
        "    cfg = get_cfg()",
        "    cfg.merge_from_file(model_zoo.get_config_file(\"%s\"))" % cfg["zoo_config"],
        "    cfg.DATASETS.TRAIN = (\"coco_2017_train\",)",
        "    cfg.SOLVER.IMS_PER_BATCH = %d" % ims,
        "    cfg.OUTPUT_DIR = \"output\"",
        "    trainer = DefaultTrainer(cfg)",
        "    trainer.resume_or_load(resume=False)",
        "    trainer.train()",
        "",
        "",
        "if __name__ == \"__main__\":",
        "    main()",
        ""])
    launch = "torchrun --standalone --nproc_per_node=%d train.py" % gpus
    return {"train.py": program}, sbatch(row, launch, gpus=gpus)


# The part of an MMDetection 2.x checkout's tools/train.py that a job runs (condensed): read the
# config, build the detector and the dataset, train under the slurm launcher.
MMDET_TRAIN = """import argparse

from mmcv import Config
from mmcv.runner import init_dist
from mmdet.apis import train_detector
from mmdet.datasets import build_dataset
from mmdet.models import build_detector


def parse_args():
    parser = argparse.ArgumentParser(description="Train a detector")
    parser.add_argument("config", help="train config file path")
    parser.add_argument("--work-dir", help="the dir to save logs and models")
    parser.add_argument("--launcher", choices=["none", "pytorch", "slurm", "mpi"], default="none")
    return parser.parse_args()


def main():
    args = parse_args()
    cfg = Config.fromfile(args.config)
    cfg.work_dir = args.work_dir
    distributed = args.launcher != "none"
    if distributed:
        init_dist(args.launcher, **cfg.get("dist_params", {}))
    model = build_detector(cfg.model, train_cfg=cfg.get("train_cfg"), test_cfg=cfg.get("test_cfg"))
    model.init_weights()
    datasets = [build_dataset(cfg.data.train)]
    train_detector(model, datasets, cfg, distributed=distributed, validate=False)


if __name__ == "__main__":
    main()
"""


def write_run(row, out, how):
    d = os.path.join(out, row["id"])
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    cfg_path = os.path.join(ROOT, "data", "published-gpu-memory", row["config"])
    with open(cfg_path) as f:
        row["_config"] = json.load(f)
    hf = not row["model"].startswith(("mmdet:", "detectron2:"))
    ref = model_ref(row, how)
    style = row["program_style"]
    if style == "hf-trainer":
        files, job = hf_trainer(row, ref)
    elif style == "litgpt-finetune":
        files, job = causal_finetune(row, ref, {"litgpt.yaml": litgpt_yaml(row)})
    elif style == "torchtune-recipe":
        files, job = torchtune_recipe(row)
    elif style == "accelerate-loop":
        files, job = accelerate_loop(row, ref)
    elif style == "hf-pipeline-generate":
        files, job = pipeline_generate(row, ref)
    elif style == "mmdet-config":
        files, job = mmdet_config(row)
    elif style == "detectron2-zoo":
        files, job = detectron2_zoo(row)
    else:
        raise SystemExit("generate.py: %s: unknown program_style %r" % (row["id"], style))
    files["job.sbatch"] = job
    for name, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(d, name)), exist_ok=True)
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    if hf:
        os.makedirs(os.path.join(d, "model"))
        shutil.copy(cfg_path, os.path.join(d, "model", "config.json"))
    return d


def generate(out, table=TABLE, how="hub"):
    rows = read_table(table)
    os.makedirs(out, exist_ok=True)
    for row in rows:
        write_run(row, out, how)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="folder to write one sub-folder per run into")
    p.add_argument("--table", default=TABLE)
    p.add_argument("--model-ref", choices=("hub", "local"), default="hub",
                   help="load models by Hub name (default) or from ./model with its config.json")
    a = p.parse_args()
    rows = generate(a.out, a.table, a.model_ref)
    print("generate.py: %d runs written to %s" % (len(rows), a.out))


if __name__ == "__main__":
    sys.exit(main())
