// The facts calls decide besides the model (data loader, trainer, precision, optimizer,
// checkpointing, parallelism, sequence length and image size), the frameworks imported, the
// DeepSpeed/launcher config files, and the fallbacks when no call decided a fact. See
// analyzer.h.
#include <algorithm>
#include <cctype>

#include "code/analyzer.h"

namespace rightsize::code::internal {

void Analyzer::Undecided(const std::string& what, const std::string& reason, SourceLine where) {
  pending_[what] = {what, reason, std::move(where)};
}

void Analyzer::ExtractFrameworks() {
  static constexpr std::pair<std::string_view, std::string_view> kFrameworks[] = {
      {"deepspeed", "DeepSpeed"},
      {"lightning", "Lightning"},
      {"pytorch_lightning", "Lightning"},
      {"accelerate", "HF Accelerate"},
      {"transformers", "HF Transformers"},
      {"jax", "JAX"},
      {"flax", "JAX"},
      {"tensorflow", "TensorFlow"},
      {"keras", "TensorFlow"},
      {"torch", "PyTorch"},
      {"torchvision", "PyTorch"},
  };
  int best = -1;
  for (const auto& [module, where] : imports_) {
    std::string_view root = std::string_view(module).substr(0, module.find('.'));
    for (int i = 0; i < static_cast<int>(std::size(kFrameworks)); ++i) {
      if (kFrameworks[i].first != root) continue;
      std::string name(kFrameworks[i].second);
      if (std::find(facts_.frameworks.begin(), facts_.frameworks.end(), name) ==
          facts_.frameworks.end()) {
        facts_.frameworks.push_back(name);
      }
      if (best < 0 || i < best) {
        best = i;
        facts_.framework = {};
        Set(facts_.framework, name, where, fmt::format("import {}", module), kRankCall);
      }
    }
  }
  if (!facts_.framework.known()) {
    Undecided("framework", "no deep-learning framework is imported", {facts_.entry, 0});
  }
}

Analyzer::CallMatch Analyzer::ExtractTrainingLoopCall(const CallSite& c) {
  std::string_view name = c.name;
  SourceLine where = Where(c);
  if (name == "DataLoader") {
    TSNode bs = Kw(c.file, c.node, "batch_size");
    if (ts_node_is_null(bs)) bs = Pos(c.node, 1);
    std::string first = Text(c.file, Pos(c.node, 0));
    bool train = Lower(first).find("train") != std::string::npos;
    bool eval = Lower(first).find("val") != std::string::npos ||
                Lower(first).find("test") != std::string::npos;
    if (!eval) {
      if (ts_node_is_null(bs)) {
        Set(facts_.batch_size, int64_t{1}, where, "DataLoader default batch_size=1", kRankDefault);
      } else {
        SetNumber(facts_.batch_size, Eval(c.file, bs, 0), where, "batch_size",
                  train ? kRankCall + 1 : kRankCall);
      }
      Value w = KwValue(c, "num_workers");
      if (w.IsNumber()) {
        SetNumber(facts_.num_workers, w, where, "num_workers", kRankCall);
      } else if (!ts_node_is_null(Kw(c.file, c.node, "num_workers"))) {
        Undecided("num_workers", w.reason, where);
      }
    }
  } else if (name == "TrainingArguments" || name == "SFTConfig" ||
             name == "Seq2SeqTrainingArguments") {
    Set(facts_.training, true, where, fmt::format("{}()", name), kRankCall);
    Value bs = KwValue(c, "per_device_train_batch_size");
    if (ts_node_is_null(Kw(c.file, c.node, "per_device_train_batch_size"))) {
      Set(facts_.batch_size, int64_t{8}, where,
          "TrainingArguments default per_device_train_batch_size=8", kRankDefault);
    } else {
      SetNumber(facts_.batch_size, bs, where, "batch_size", kRankCall + 1);
    }
    SetNumber(facts_.grad_accum, KwValue(c, "gradient_accumulation_steps"), where, "grad_accum",
              kRankCall);
    if (KwValue(c, "bf16").Truthy()) {
      Set(facts_.precision, Precision::kMixedBf16, where, "TrainingArguments(bf16=True)",
          kRankCall);
    }
    if (KwValue(c, "fp16").Truthy()) {
      Set(facts_.precision, Precision::kMixedFp16, where, "TrainingArguments(fp16=True)",
          kRankCall);
    }
    if (KwValue(c, "gradient_checkpointing").Truthy()) {
      Set(facts_.checkpointing, Checkpointing::kFull, where,
          "TrainingArguments(gradient_checkpointing=True)", kRankCall);
    }
    if (KwValue(c, "torch_compile").Truthy()) {
      Set(facts_.compiled, true, where, "TrainingArguments(torch_compile=True)", kRankCall);
    }
    SetNumber(facts_.num_workers, KwValue(c, "dataloader_num_workers"), where, "num_workers",
              kRankCall);
    Value optim = KwValue(c, "optim");
    std::string o = optim.kind == Value::Kind::kString ? Lower(optim.text) : "adamw_torch";
    Optimizer opt = o.find("8bit") != std::string::npos        ? Optimizer::kAdam8bit
                    : o.find("adafactor") != std::string::npos ? Optimizer::kAdafactor
                    : o.find("sgd") != std::string::npos       ? Optimizer::kSgdMomentum
                                                               : Optimizer::kAdam;
    Set(facts_.optimizer, opt, where,
        optim.known() ? fmt::format("TrainingArguments(optim=\"{}\")", o)
                      : "the HF Trainer's default AdamW",
        optim.known() ? kRankCall : kRankDefault);
    if (o.find("paged") != std::string::npos) {
      Set(facts_.paged_optimizer, true, where, fmt::format("TrainingArguments(optim=\"{}\")", o),
          kRankCall);
    }
    if (KwValue(c, "use_liger_kernel").Truthy()) {
      Set(facts_.loss_chunks, int64_t{0}, where,
          "TrainingArguments(use_liger_kernel=True): Liger's fused linear cross-entropy",
          kRankCall);
    }
    Value ds = KwValue(c, "deepspeed");
    if (ds.kind == Value::Kind::kString) config_refs_.push_back(ds.text);
    Value fsdp = KwValue(c, "fsdp");
    if (fsdp.kind == Value::Kind::kString && !fsdp.text.empty()) {
      int stage = fsdp.text.find("shard_grad_op") != std::string::npos ? 2 : 3;
      Set(facts_.zero_stage, stage, where, fmt::format("TrainingArguments(fsdp=\"{}\")", fsdp.text),
          kRankCall);
      Set(facts_.parallelism, std::string("FSDP"), where, "TrainingArguments(fsdp=…)", kRankCall);
    }
    Set(facts_.parallelism, std::string("HF Trainer (DDP)"), where,
        "the HF Trainer runs DDP over the processes it is launched with", kRankDefault);
  } else if ((name == "Trainer" && (c.callee.find("pl.") != std::string::npos ||
                                    c.callee.find("L.") != std::string::npos ||
                                    c.callee.find("lightning") != std::string::npos)) ||
             name == "Fabric") {
    // Lightning's Trainer, or Fabric (the same precision, devices and strategy arguments; a
    // Fabric program trains only if it builds an optimizer).
    if (name == "Trainer") Set(facts_.training, true, where, "Lightning Trainer", kRankCall);
    Value precision = KwValue(c, "precision");
    std::string p = precision.kind == Value::Kind::kNumber ? fmt::format("{}", precision.number)
                                                           : Lower(precision.text);
    if (p.starts_with("bf16")) {
      Set(facts_.precision,
          p.find("true") != std::string::npos ? Precision::kBf16 : Precision::kMixedBf16, where,
          fmt::format("Trainer(precision={})", Text(c.file, Kw(c.file, c.node, "precision"))),
          kRankCall);
    } else if (p.starts_with("16")) {
      Set(facts_.precision,
          p.find("true") != std::string::npos ? Precision::kFp16 : Precision::kMixedFp16, where,
          fmt::format("Trainer(precision={})", Text(c.file, Kw(c.file, c.node, "precision"))),
          kRankCall);
    }
    SetNumber(facts_.grad_accum, KwValue(c, "accumulate_grad_batches"), where, "grad_accum",
              kRankCall);
    Value devices = KwValue(c, "devices");
    Value strategy = KwValue(c, "strategy");
    std::string s = Lower(strategy.text);
    if (devices.IsNumber() && devices.number > 1 && facts_.launcher == "python") {
      Set(facts_.processes, static_cast<int>(devices.number), where,
          fmt::format("Trainer(devices={}) spawns one process per device", devices.number),
          kRankLauncher);
    } else if (devices.kind == Value::Kind::kNumber && devices.number == -1) {
      Set(facts_.processes, std::max(1, gpus_requested_), where, "Trainer(devices=-1): every GPU",
          kRankLauncher);
    }
    if (s.find("fsdp") != std::string::npos) {
      Set(facts_.zero_stage, 3, where, fmt::format("Trainer(strategy=\"{}\")", s), kRankCall);
    } else if (s.find("deepspeed_stage_") != std::string::npos) {
      Set(facts_.zero_stage, s[s.find("deepspeed_stage_") + 16] - '0', where,
          fmt::format("Trainer(strategy=\"{}\")", s), kRankCall);
    }
    // strategy=FSDPStrategy(…): that call decides the parallelism.
    bool strategy_object =
        !ts_node_is_null(Kw(c.file, c.node, "strategy")) && strategy.kind != Value::Kind::kString;
    if (!strategy_object && ((devices.IsNumber() && (devices.number > 1 || devices.number == -1)) ||
                             !s.empty() || (facts_.processes.value.value_or(1) > 1))) {
      Set(facts_.parallelism, s.empty() ? std::string("Lightning (DDP)") : "Lightning " + s, where,
          fmt::format("Lightning {}", name), kRankCall);
    }
  } else if (name == "Accelerator") {
    Value mp = KwValue(c, "mixed_precision");
    if (mp.text == "bf16") {
      Set(facts_.precision, Precision::kMixedBf16, where, "Accelerator(mixed_precision=\"bf16\")",
          kRankCall);
    }
    if (mp.text == "fp16") {
      Set(facts_.precision, Precision::kMixedFp16, where, "Accelerator(mixed_precision=\"fp16\")",
          kRankCall);
    }
    SetNumber(facts_.grad_accum, KwValue(c, "gradient_accumulation_steps"), where, "grad_accum",
              kRankCall);
    Set(facts_.parallelism, std::string("Accelerate (DDP)"), where,
        "Accelerator() wraps the model for the processes launched", kRankCall);
  } else {
    return CallMatch::kNone;
  }
  return CallMatch::kMatched;
}

Analyzer::CallMatch Analyzer::ExtractPrecisionCall(const CallSite& c) {
  std::string_view name = c.name;
  SourceLine where = Where(c);
  if (name == "autocast") {
    if (TruthOf(KwValue(c, "enabled")) == false) return CallMatch::kDone;
    TSNode dtype_node = Kw(c.file, c.node, "dtype");
    if (ts_node_is_null(dtype_node)) dtype_node = Pos(c.node, 1);  // autocast("cuda", torch.…)
    Value dtype = Eval(c.file, dtype_node, 0);
    if (!ts_node_is_null(dtype_node) && !dtype.known()) {
      // Not fp16 by default: a wrong guess halves the activations the estimate counts.
      Undecided("precision",
                fmt::format("{}(dtype={}): {}", c.callee, Text(c.file, dtype_node), dtype.reason),
                where);
      return CallMatch::kDone;
    }
    std::string device = KwValue(c, "device_type").text;
    if (device.empty()) device = Eval(c.file, Pos(c.node, 0), 0).text;
    bool bf16 = dtype.kind == Value::Kind::kName
                    ? dtype.text.ends_with("bfloat16")
                    : device == "cpu";  // autocast's default: bf16 on CPU, fp16 on CUDA
    if (dtype.kind == Value::Kind::kName && dtype.text.ends_with("float32")) {
      return CallMatch::kDone;
    }
    SetInBranch(facts_.precision, bf16 ? Precision::kMixedBf16 : Precision::kMixedFp16, where,
                fmt::format("{}({})", c.callee,
                            dtype.kind == Value::Kind::kName ? "dtype=" + dtype.text
                            : bf16                           ? "CPU default bfloat16"
                                                             : "default float16"),
                kRankCall);
  } else if (name == "GradScaler") {
    TSNode enabled_node = Kw(c.file, c.node, "enabled");
    auto enabled = TruthOf(KwValue(c, "enabled"));
    if (enabled == false) return CallMatch::kDone;
    if (!ts_node_is_null(enabled_node) && !enabled) {
      Undecided(
          "precision",
          fmt::format("GradScaler(enabled={}) could not be evaluated", Text(c.file, enabled_node)),
          where);
      return CallMatch::kDone;
    }
    SetInBranch(facts_.precision, Precision::kMixedFp16, where, "GradScaler (fp16 AMP)",
                kRankDefault);
  } else if (name == "half" || name == "bfloat16") {
    Set(facts_.precision, name == "half" ? Precision::kFp16 : Precision::kBf16, where,
        fmt::format(".{}() on the model", name), kRankDefault);
    NoteMove(c, &casts_);
  } else if (name == "cuda" && c.callee.find('.') != std::string::npos) {
    NoteMove(c, &device_moves_);
  } else if (name == "to" && c.callee.find('.') != std::string::npos) {
    std::string args = Text(c.file, Field(c.node, "arguments"));
    // `.to(torch.bfloat16 if args.precision == "bf16-pure" else torch.float16)`: the one taken.
    TSNode dtype_node = Kw(c.file, c.node, "dtype");
    Value dtype = Eval(c.file, ts_node_is_null(dtype_node) ? Pos(c.node, 0) : dtype_node, 0);
    if (dtype.kind == Value::Kind::kName) args = dtype.text;
    bool cast = false;
    if (args.find("torch.bfloat16") != std::string::npos) {
      Set(facts_.precision, Precision::kBf16, where, ".to(torch.bfloat16)", kRankDefault);
      cast = true;
    }
    if (args.find("torch.float16") != std::string::npos ||
        args.find("torch.half") != std::string::npos) {
      Set(facts_.precision, Precision::kFp16, where, ".to(torch.float16)", kRankDefault);
      cast = true;
    }
    if (cast) {
      NoteMove(c, &casts_);
    } else if (args.find("cuda") != std::string::npos || args.find("device") != std::string::npos) {
      NoteMove(c, &device_moves_);
    }
  } else if (name == "BitsAndBytesConfig") {
    if (KwValue(c, "load_in_4bit").Truthy()) {
      Set(facts_.precision, Precision::kInt4, where, "BitsAndBytesConfig(load_in_4bit=True)",
          kRankConfig);
    }
    if (KwValue(c, "load_in_8bit").Truthy()) {
      Set(facts_.precision, Precision::kInt8, where, "BitsAndBytesConfig(load_in_8bit=True)",
          kRankConfig);
    }
    Value dq = KwValue(c, "bnb_4bit_use_double_quant");
    Set(facts_.double_quant, dq.Truthy(), where,
        dq.known() ? fmt::format("BitsAndBytesConfig(bnb_4bit_use_double_quant={})",
                                 dq.Truthy() ? "True" : "False")
                   : "BitsAndBytesConfig's default: no double quantisation",
        dq.known() ? kRankCall : kRankDefault);
    Value compute = KwValue(c, "bnb_4bit_compute_dtype");
    if (compute.kind == Value::Kind::kName && compute.text.ends_with("16")) {
      Set(facts_.weight_dtype,
          compute.text.ends_with("bfloat16") ? Precision::kBf16 : Precision::kFp16, where,
          fmt::format("BitsAndBytesConfig(bnb_4bit_compute_dtype={})", compute.text), kRankDefault);
    }
  } else {
    return CallMatch::kNone;
  }
  return CallMatch::kMatched;
}

Analyzer::CallMatch Analyzer::ExtractOptimizerCall(const CallSite& c) {
  std::string_view name = c.name;
  SourceLine where = Where(c);
  // bitsandbytes' paged optimizers keep their states in unified memory.
  if (name.starts_with("Paged") && (name.find("Adam") != std::string_view::npos ||
                                    name.find("Lion") != std::string_view::npos)) {
    SetInBranch(facts_.paged_optimizer, true, where, fmt::format("{}()", c.callee), kRankCall);
  }
  if (name == "Adam" || name == "AdamW" || name == "FusedAdam" || name == "DeepSpeedCPUAdam" ||
      name == "PagedAdamW" || name == "PagedAdam" || name == "PagedAdamW32bit" || name == "Lamb" ||
      name == "LAMB" || name == "NAdam" || name == "RAdam") {
    SetInBranch(facts_.optimizer, Optimizer::kAdam, where, fmt::format("{}()", c.callee),
                kRankCall);
    Set(facts_.training, true, where, fmt::format("{}()", c.callee), kRankCall);
  } else if (name.find("8bit") != std::string_view::npos &&
             name.find("Adam") != std::string_view::npos) {
    SetInBranch(facts_.optimizer, Optimizer::kAdam8bit, where, fmt::format("{}()", c.callee),
                kRankCall);
    Set(facts_.training, true, where, fmt::format("{}()", c.callee), kRankCall);
  } else if (name == "register_post_accumulate_grad_hook") {
    // PyTorch's optimizer-in-backward: each parameter stepped (and its gradient freed) by a hook
    // as soon as its gradient is whole.
    SetInBranch(facts_.optimizer_in_backward, true, where,
                fmt::format("{}(): the optimizer steps in the backward pass", c.callee), kRankCall);
  } else if (name == "save_on_cpu" && c.callee.find("graph") != std::string::npos) {
    SetInBranch(facts_.activation_offload, true, where,
                fmt::format("{}(): saved activations kept in host memory", c.callee), kRankCall);
  } else if (name.starts_with("apply_liger_kernel_to_") ||
             (name == "from_pretrained" && c.callee.find("AutoLigerKernel") != std::string::npos)) {
    // Liger's patch (fused_linear_cross_entropy=True by default) fuses the output layer with
    // the loss.
    if (TruthOf(KwValue(c, "fused_linear_cross_entropy")) != false) {
      SetInBranch(facts_.loss_chunks, int64_t{0}, where,
                  fmt::format("{}(): Liger's fused linear cross-entropy", c.callee), kRankCall);
    }
    if (name == "from_pretrained") return CallMatch::kNone;  // the model is read too
  } else if (name == "SGD") {
    TSNode m = Kw(c.file, c.node, "momentum");
    if (ts_node_is_null(m)) m = Pos(c.node, 2);
    Value mv = Eval(c.file, m, 0);
    bool momentum = ts_node_is_null(m) ? false : (!mv.IsNumber() || mv.number > 0);
    SetInBranch(facts_.optimizer, momentum ? Optimizer::kSgdMomentum : Optimizer::kSgd, where,
                fmt::format("SGD({})", momentum ? "momentum" : "no momentum"), kRankCall);
    Set(facts_.training, true, where, "SGD()", kRankCall);
  } else if (name == "Adafactor") {
    SetInBranch(facts_.optimizer, Optimizer::kAdafactor, where, "Adafactor()", kRankCall);
    Set(facts_.training, true, where, "Adafactor()", kRankCall);
  } else if (name == "RMSprop" || name == "Adagrad" || name == "Lion") {
    SetInBranch(facts_.optimizer, Optimizer::kSgdMomentum, where,
                fmt::format("{}() keeps one state per parameter", name), kRankCall);
    Set(facts_.training, true, where, fmt::format("{}()", name), kRankCall);
  } else if (name == "backward" || (name == "fit" && c.callee != "fit") ||
             (name == "train" && c.callee.find("trainer") != std::string::npos)) {
    Set(facts_.training, true, where, fmt::format("{}()", c.callee), kRankDefault);
  } else if (name == "gradient_checkpointing_enable" || name == "apply_activation_checkpointing" ||
             name == "checkpoint_sequential" ||
             (name == "checkpoint" && (c.callee.find("utils.checkpoint") != std::string::npos ||
                                       c.callee == "checkpoint"))) {
    SetInBranch(facts_.checkpointing, Checkpointing::kFull, where, fmt::format("{}()", c.callee),
                kRankCall);
  } else if (name == "scaled_dot_product_attention" || name == "flash_attn_func") {
    Set(facts_.attention, name == "flash_attn_func" ? Attention::kFlashAttention : Attention::kSdpa,
        where, fmt::format("{}()", c.callee), kRankCall);
  } else if (name == "to_bettertransformer") {
    // Optimum's BetterTransformer swaps the model's attention for torch's SDPA.
    Set(facts_.attention, Attention::kSdpa, where, ".to_bettertransformer(): SDPA attention",
        kRankCall);
  } else {
    return CallMatch::kNone;
  }
  return CallMatch::kMatched;
}

Analyzer::CallMatch Analyzer::ExtractParallelCall(const CallSite& c) {
  std::string_view name = c.name;
  SourceLine where = Where(c);
  if (name == "DistributedDataParallel" || name == "DDP") {
    Set(facts_.parallelism, std::string("DDP"), where, fmt::format("{}()", c.callee), kRankCall);
  } else if (name == "FullyShardedDataParallel" || name == "FSDP" || name == "fully_shard") {
    Set(facts_.parallelism, std::string("FSDP"), where, fmt::format("{}()", c.callee), kRankCall);
    std::string args = Text(c.file, Field(c.node, "arguments"));
    int stage = args.find("SHARD_GRAD_OP") != std::string::npos ? 2
                : args.find("NO_SHARD") != std::string::npos    ? 0
                                                                : 3;
    Set(facts_.zero_stage, stage, where, stage == 3 ? "FSDP full shard" : "FSDP sharding_strategy",
        kRankCall);
    if (args.find("CPUOffload") != std::string::npos) {
      Set(facts_.optimizer_offload, true, where, "FSDP CPUOffload", kRankCall);
    }
  } else if (name == "FSDPStrategy") {
    // Lightning's FSDP: FULL_SHARD unless sharding_strategy says otherwise.
    Set(facts_.parallelism, std::string("Lightning FSDP"), where, "FSDPStrategy()", kRankCall);
    Value sharding = KwValue(c, "sharding_strategy");
    std::string how = sharding.known()
                          ? "FSDPStrategy(sharding_strategy=" +
                                Text(c.file, Kw(c.file, c.node, "sharding_strategy")) + ")"
                          : "FSDPStrategy(): FULL_SHARD by default";
    std::string text =
        sharding.known() ? sharding.text : Text(c.file, Kw(c.file, c.node, "sharding_strategy"));
    int stage = text.find("SHARD_GRAD_OP") != std::string::npos ? 2
                : text.find("NO_SHARD") != std::string::npos    ? 0
                                                                : 3;
    Set(facts_.zero_stage, stage, where, how, kRankCall);
    if (TruthOf(KwValue(c, "cpu_offload")) == true) {
      Set(facts_.optimizer_offload, true, where, "FSDPStrategy(cpu_offload=True)", kRankCall);
    }
    if (!ts_node_is_null(Kw(c.file, c.node, "activation_checkpointing_policy")) ||
        !ts_node_is_null(Kw(c.file, c.node, "activation_checkpointing"))) {
      SetInBranch(facts_.checkpointing, Checkpointing::kFull, where,
                  "FSDPStrategy(activation_checkpointing…)", kRankCall);
    }
  } else if (name == "DeepSpeedStrategy") {
    Set(facts_.parallelism, std::string("Lightning DeepSpeed"), where, "DeepSpeedStrategy()",
        kRankCall);
    Value stage = KwValue(c, "stage");
    Set(facts_.zero_stage, stage.IsNumber() ? static_cast<int>(stage.number) : 2, where,
        stage.IsNumber() ? "DeepSpeedStrategy(stage=…)" : "DeepSpeedStrategy(): stage 2 by default",
        kRankCall);
    if (TruthOf(KwValue(c, "offload_optimizer")) == true) {
      Set(facts_.optimizer_offload, true, where, "DeepSpeedStrategy(offload_optimizer=True)",
          kRankCall);
    }
  } else if (name == "DataParallel") {
    Set(facts_.parallelism, std::string("DataParallel"), where,
        "nn.DataParallel: one process, every visible GPU", kRankCall);
    Set(facts_.processes, std::max(1, gpus_requested_), where,
        "nn.DataParallel replicates onto every GPU", kRankCall);
  } else if (name == "initialize" && c.callee.find("deepspeed") != std::string::npos) {
    Set(facts_.parallelism, std::string("DeepSpeed"), where, "deepspeed.initialize()", kRankCall);
    Set(facts_.training, true, where, "deepspeed.initialize()", kRankDefault);
    Value cfg = KwValue(c, "config");
    if (cfg.kind != Value::Kind::kString) cfg = KwValue(c, "config_params");
    if (cfg.kind == Value::Kind::kString) config_refs_.push_back(cfg.text);
  } else if (name == "init_process_group") {
    Set(facts_.parallelism, std::string("torch.distributed"), where, "init_process_group()",
        kRankDefault);
  } else if (name == "spawn" && c.callee.find("mp") != std::string::npos) {
    Value n = KwValue(c, "nprocs");
    SetNumber(facts_.processes, n, where, "processes", kRankLauncher);
  } else if (name == "compile" && c.callee.starts_with("torch")) {
    Set(facts_.compiled, true, where, "torch.compile()", kRankCall);
  } else {
    return CallMatch::kNone;
  }
  return CallMatch::kMatched;
}

namespace {

// "q_proj", r"q_proj", 'q_proj' → q_proj.
std::string Unquote(std::string_view text) {
  size_t open = text.find_first_of("\"'");
  size_t close = text.find_last_of("\"'");
  if (open == std::string_view::npos || close <= open) return std::string(text);
  return std::string(text.substr(open + 1, close - open - 1));
}

}  // namespace

Analyzer::CallMatch Analyzer::ExtractPeftCall(const CallSite& c) {
  std::string_view name = c.name;
  SourceLine where = Where(c);
  if (name == "LoraConfig") {
    LoraCall l;
    l.where = where;
    Value r = KwValue(c, "r");
    if (r.IsNumber() && r.number >= 1) {
      l.rank = static_cast<int64_t>(r.number);
    } else if (!ts_node_is_null(Kw(c.file, c.node, "r"))) {
      Undecided("lora_rank", fmt::format("LoraConfig(r=…): {}", r.reason), where);
    }
    TSNode t = Kw(c.file, c.node, "target_modules");
    if (TypeOf(t) == "identifier") {
      // target_modules=TARGETS: the list it was bound to.
      auto it = bindings_.find(Text(c.file, t));
      if (it != bindings_.end()) t = it->second.back().value;
    }
    if (TypeOf(t) == "list" || TypeOf(t) == "tuple" || TypeOf(t) == "set") {
      for (uint32_t i = 0; i < ts_node_named_child_count(t); ++i) {
        TSNode e = ts_node_named_child(t, i);
        if (TypeOf(e) == "string") l.targets.push_back(Unquote(Text(c.file, e)));
      }
    } else if (!ts_node_is_null(t)) {
      Value v = KwValue(c, "target_modules");
      if (v.kind == Value::Kind::kString) {
        l.target_text = v.text;
      } else if (v.kind != Value::Kind::kNone) {
        Undecided("lora_targets", fmt::format("LoraConfig(target_modules=…): {}", v.reason), where);
      }
    }
    Value d = KwValue(c, "lora_dropout");
    if (d.IsNumber()) l.dropout = d.number;
    lora_ = l;
  } else if (name == "prepare_model_for_kbit_training") {
    Set(facts_.kbit_prepared, true, where, "prepare_model_for_kbit_training()", kRankCall);
    if (TruthOf(KwValue(c, "use_gradient_checkpointing")) != false) {
      SetInBranch(facts_.checkpointing, Checkpointing::kFull, where,
                  "prepare_model_for_kbit_training() enables gradient checkpointing by default",
                  kRankCall);
    }
  } else if (name == "generate") {
    generates_ = true;
  } else if (name == "SFTTrainer" || name == "Trainer") {
    Set(facts_.training, true, where, fmt::format("{}()", c.callee), kRankDefault);
  } else {
    return CallMatch::kNone;
  }
  return CallMatch::kMatched;
}

void Analyzer::ResolveAdapters() {
  bool quantized =
      facts_.precision.value == Precision::kInt4 || facts_.precision.value == Precision::kInt8;
  if (!spec_) {
    if (lora_) {
      Undecided("trainable_parameters",
                "LoRA on a model whose modules are not known: every parameter is counted as "
                "trained",
                lora_->where);
    }
    return;
  }
  std::vector<LinearModule> modules = LinearModulesOf(*spec_);
  if (quantized) {
    double q = 0;
    for (const auto& m : modules) {
      q += static_cast<double>(m.count) * static_cast<double>(m.in) * static_cast<double>(m.out);
    }
    Set(facts_.quantized_parameters, q, facts_.precision.where,
        fmt::format("the nn.Linear weights of the {} blocks; embeddings, the output layer, norms "
                    "and biases stay 16-bit",
                    spec_->family),
        kRankCall);
  }
  if (!lora_) return;
  const LoraCall& l = *lora_;
  bool all = Lower(l.target_text) == "all-linear";
  std::vector<std::string> targets = l.targets;
  if (targets.empty() && l.target_text.empty()) targets = DefaultLoraTargets(spec_->family);
  auto hit = [&](const std::string& module) {
    if (all || std::find(targets.begin(), targets.end(), module) != targets.end()) return true;
    // A regular expression over module paths: the names it spells out.
    size_t at = l.target_text.find(module);
    while (at != std::string::npos) {
      auto word = [&](size_t i) {
        return i < l.target_text.size() &&
               (std::isalnum(static_cast<unsigned char>(l.target_text[i])) != 0 ||
                l.target_text[i] == '_');
      };
      if ((at == 0 || !word(at - 1)) && !word(at + module.size())) return true;
      at = l.target_text.find(module, at + 1);
    }
    return false;
  };
  double trainable = 0, inputs = 0;
  std::vector<std::string> matched;
  for (const auto& m : modules) {
    if (!hit(m.name)) continue;
    trainable += static_cast<double>(m.count) * static_cast<double>(l.rank) *
                 static_cast<double>(m.in + m.out);
    inputs += static_cast<double>(m.count) * static_cast<double>(m.in);
    if (std::find(matched.begin(), matched.end(), m.name) == matched.end()) {
      matched.push_back(m.name);
    }
  }
  std::string how = fmt::format("LoraConfig(r={}){}", l.rank,
                                l.targets.empty() && l.target_text.empty()
                                    ? fmt::format(": PEFT's default targets for {}", spec_->family)
                                    : "");
  if (matched.empty()) {
    Undecided("trainable_parameters",
              fmt::format("LoraConfig's target_modules name none of the {} modules", spec_->family),
              l.where);
    return;
  }
  Set(facts_.lora_rank, l.rank, l.where, how, kRankCall);
  Set(facts_.lora_targets,
      all ? std::string("all-linear") : fmt::format("{}", fmt::join(matched, ",")), l.where, how,
      kRankCall);
  Set(facts_.trainable_parameters, trainable, l.where,
      fmt::format("{}: r·(in + out) per targeted matrix", how), kRankCall);
  Set(facts_.lora_dropout, l.dropout, l.where, how, kRankCall);
  Set(facts_.lora_input_features, inputs, l.where, how, kRankCall);
}

void Analyzer::ExtractShapeCall(const CallSite& c) {
  std::string_view name = c.name;
  SourceLine where = Where(c);
  // Sequence length and image size from the calls that fix them.
  for (std::string_view key :
       {"max_length", "max_seq_length", "block_size", "seq_len", "max_len"}) {
    TSNode n = Kw(c.file, c.node, key);
    if (ts_node_is_null(n) || name == "generate") continue;
    SetNumber(facts_.seq_len, Eval(c.file, n, 0), where, "seq_len", kRankCall);
  }
  if (!ts_node_is_null(Kw(c.file, c.node, "max_new_tokens"))) {
    generates_ = true;
    SetNumber(facts_.max_new_tokens, KwValue(c, "max_new_tokens"), where, "max_new_tokens",
              kRankCall);
    // A text-generation pipeline called on a prompt the program spells out: its length in
    // tokens, at kCharsPerToken characters a token (no tokenizer is run).
    Value prompt = name == "generate" ? Value{} : Eval(c.file, Pos(c.node, 0), 0);
    if (prompt.kind == Value::Kind::kString && !prompt.text.empty()) {
      auto tokens =
          static_cast<int64_t>(std::ceil(static_cast<double>(prompt.text.size()) / kCharsPerToken));
      Set(facts_.seq_len, tokens, where,
          fmt::format("the prompt: {} characters ÷ {:.0f} a token", prompt.text.size(),
                      kCharsPerToken),
          kRankDefault);
    }
  }
  if (name == "RandomResizedCrop" || name == "Resize" || name == "CenterCrop" ||
      name == "RandomCrop") {
    TSNode size = Kw(c.file, c.node, "size");
    if (ts_node_is_null(size)) size = Pos(c.node, 0);
    Value v = Eval(c.file, size, 0);
    if (v.IsNumber()) {
      SetNumber(facts_.image_size, v, where, "image_size",
                name == "RandomResizedCrop" || name == "RandomCrop" ? kRankCall + 1 : kRankCall);
    }
  }
}

void Analyzer::ExtractLearningRate(const CallSite& c) {
  for (std::string_view key : {"lr", "learning_rate"}) {
    if (ts_node_is_null(Kw(c.file, c.node, key))) continue;
    Value v = KwValue(c, key);
    if (!v.IsNumber()) return;
    SourceLine where = v.origin.empty() ? Where(c) : v.origin;
    Set(facts_.learning_rate, v.number, where, fmt::format("{}={}", key, v.number), kRankCall);
    return;
  }
}

void Analyzer::LearningRateFallback() {
  if (facts_.learning_rate.known()) return;
  for (std::string_view n : {"lr", "learning_rate", "LR", "LEARNING_RATE"}) {
    for (const auto& o : options_) {
      if (o.dest != n) continue;
      Value v = ArgValue(o, 0);
      if (!v.IsNumber()) continue;
      SourceLine where = v.origin.empty() ? SourceLine{files_[o.file].name, o.line} : v.origin;
      Set(facts_.learning_rate, v.number, where, "argparse", kRankName);
      return;
    }
    auto it = bindings_.find(std::string(n));
    if (it == bindings_.end() || it->second.back().field) continue;
    const Binding& b = it->second.back();
    Value v = Eval(b.file, b.value, 0);
    if (!v.IsNumber()) continue;
    Set(facts_.learning_rate, v.number, v.origin.empty() ? Where(b.file, b.value) : v.origin,
        "a variable", kRankName);
    return;
  }
}

void Analyzer::ExtractCall(const CallSite& c) {
  ExtractModelCall(c);
  ExtractLearningRate(c);
  // One family decides a call (the first whose name matches), as an else-if chain would;
  // kDone: the family also rules out the shapes.
  CallMatch match = ExtractTrainingLoopCall(c);
  if (match == CallMatch::kNone) match = ExtractPrecisionCall(c);
  if (match == CallMatch::kNone) match = ExtractOptimizerCall(c);
  if (match == CallMatch::kNone) match = ExtractParallelCall(c);
  if (match == CallMatch::kNone) match = ExtractPeftCall(c);
  if (match == CallMatch::kDone) return;
  ExtractShapeCall(c);
}

void Analyzer::ExtractConfigs() {
  ExtractModelConfigFiles();
  ExtractAccelerateConfigs();
  // DeepSpeed's JSON: the launcher-level truth about batch, precision, ZeRO and the optimizer.
  for (const auto& cfg : configs_) {
    auto get = [&](const char* key) -> std::optional<ConfigValue> {
      auto it = cfg.values.find(key);
      if (it == cfg.values.end()) return std::nullopt;
      return it->second;
    };
    bool deepspeed = get("zero_optimization.stage") || get("train_micro_batch_size_per_gpu") ||
                     get("train_batch_size");
    if (!deepspeed) continue;
    auto where = [&](const ConfigValue& v) { return SourceLine{cfg.name, v.line}; };
    if (auto v = get("zero_optimization.stage")) {
      if (auto n = ParseNumber(v->text)) {
        Set(facts_.zero_stage, static_cast<int>(*n), where(*v),
            fmt::format("{}: zero_optimization.stage", cfg.name), kRankConfig);
      }
    }
    if (auto v = get("zero_optimization.offload_optimizer.device"); v && v->text != "none") {
      Set(facts_.optimizer_offload, true, where(*v), "offload_optimizer.device=" + v->text,
          kRankConfig);
    }
    if (auto v = get("zero_optimization.offload_param.device"); v && v->text != "none") {
      Set(facts_.param_offload, true, where(*v), "offload_param.device=" + v->text, kRankConfig);
    }
    if (auto v = get("zero_optimization.stage3_max_live_parameters")) {
      if (auto n = ParseNumber(v->text); n && *n > 0) {  // "auto" keeps DeepSpeed's default
        Set(facts_.max_live_parameters, *n, where(*v),
            cfg.name + ": zero_optimization.stage3_max_live_parameters", kRankConfig);
      }
    }
    if (auto v = get("train_micro_batch_size_per_gpu")) {
      SetNumber(facts_.batch_size,
                FromText(v->text, where(*v), cfg.name + ": train_micro_batch_size_per_gpu"),
                where(*v), "batch_size", kRankConfig);
    }
    if (auto v = get("gradient_accumulation_steps")) {
      SetNumber(facts_.grad_accum, FromText(v->text, where(*v), cfg.name), where(*v), "grad_accum",
                kRankConfig);
    }
    if (auto v = get("bf16.enabled"); v && Lower(v->text) == "true") {
      Set(facts_.precision, Precision::kMixedBf16, where(*v), cfg.name + ": bf16.enabled",
          kRankConfig);
    }
    if (auto v = get("fp16.enabled"); v && Lower(v->text) == "true") {
      Set(facts_.precision, Precision::kMixedFp16, where(*v), cfg.name + ": fp16.enabled",
          kRankConfig);
    }
    if (auto v = get("optimizer.type")) {
      std::string t = Lower(v->text);
      Optimizer o = t.find("sgd") != std::string::npos ? Optimizer::kSgdMomentum : Optimizer::kAdam;
      Set(facts_.optimizer, o, where(*v), cfg.name + ": optimizer.type " + v->text, kRankConfig);
      Set(facts_.training, true, where(*v), cfg.name + ": optimizer", kRankDefault);
    }
    if (auto v = get("activation_checkpointing.partition_activations")) {
      Set(facts_.checkpointing, Checkpointing::kFull, where(*v),
          cfg.name + ": activation_checkpointing", kRankDefault);
    }
    Set(facts_.parallelism, std::string("DeepSpeed"), SourceLine{cfg.name, 1}, cfg.name,
        kRankDefault);
  }
}

// An `accelerate launch --config_file` YAML (what `accelerate config` writes): the
// distributed_type, the DeepSpeed plugin's zero_stage and offload devices (or the DeepSpeed JSON
// it names), FSDP's sharding and offload, mixed_precision and num_processes. accelerate builds
// its DeepSpeed config from these keys, so they are read as DeepSpeed reads its own JSON.
void Analyzer::ExtractAccelerateConfigs() {
  size_t n_configs = configs_.size();
  for (size_t i = 0; i < n_configs; ++i) {
    const ConfigFile& cfg = configs_[i];
    if (!cfg.values.contains("distributed_type")) continue;
    if (auto it = cfg.values.find("deepspeed_config.deepspeed_config_file");
        it != cfg.values.end() && !it->second.text.empty() && it->second.text != "null") {
      config_refs_.push_back(it->second.text);
    }
  }
  LoadConfigs();  // the DeepSpeed JSON an accelerate config names: read below with the others
  for (size_t i = 0; i < n_configs; ++i) {
    const ConfigFile& cfg = configs_[i];
    auto get = [&](const char* key) -> std::optional<ConfigValue> {
      auto it = cfg.values.find(key);
      if (it == cfg.values.end()) return std::nullopt;
      return it->second;
    };
    auto type = get("distributed_type");
    if (!type) continue;
    auto where = [&](const ConfigValue& v) { return SourceLine{cfg.name, v.line}; };
    auto how = [&](const char* key, const ConfigValue& v) {
      return fmt::format("{}: {}: {}", cfg.name, key, v.text);
    };
    auto offloaded = [](const std::optional<ConfigValue>& v) {
      if (!v) return false;
      std::string t = Lower(v->text);
      return t == "cpu" || t == "nvme";
    };
    std::string kind = Lower(type->text);
    if (kind == "deepspeed") {
      Set(facts_.parallelism, std::string("DeepSpeed"), where(*type),
          how("distributed_type", *type), kRankConfig);
      if (auto v = get("deepspeed_config.zero_stage")) {
        if (auto n = ParseNumber(v->text)) {
          Set(facts_.zero_stage, static_cast<int>(*n), where(*v),
              how("deepspeed_config.zero_stage", *v), kRankConfig);
        }
      }
      if (auto v = get("deepspeed_config.offload_optimizer_device"); offloaded(v)) {
        Set(facts_.optimizer_offload, true, where(*v),
            how("deepspeed_config.offload_optimizer_device", *v), kRankConfig);
      }
      if (auto v = get("deepspeed_config.offload_param_device"); offloaded(v)) {
        Set(facts_.param_offload, true, where(*v), how("deepspeed_config.offload_param_device", *v),
            kRankConfig);
      }
    } else if (kind == "fsdp") {
      Set(facts_.parallelism, std::string("FSDP"), where(*type), how("distributed_type", *type),
          kRankConfig);
      int stage = 3;  // accelerate's default sharding strategy is FULL_SHARD
      if (auto v = get("fsdp_config.fsdp_sharding_strategy")) {
        std::string t = Lower(v->text);
        if (t == "shard_grad_op" || t == "2") stage = 2;
        if (t == "no_shard" || t == "3") stage = 0;
        if (t == "hybrid_shard" || t == "4") stage = 3;
      }
      Set(facts_.zero_stage, stage, where(*type), cfg.name + ": fsdp_sharding_strategy",
          kRankConfig);
      if (auto v = get("fsdp_config.fsdp_offload_params"); v && Lower(v->text) == "true") {
        // FSDP's CPUOffload(offload_params=True): the parameters, their gradients and so the
        // optimizer step live on the CPU.
        Set(facts_.param_offload, true, where(*v), how("fsdp_config.fsdp_offload_params", *v),
            kRankConfig);
        Set(facts_.optimizer_offload, true, where(*v), how("fsdp_config.fsdp_offload_params", *v),
            kRankConfig);
      }
    } else if (kind == "multi_gpu") {
      Set(facts_.parallelism, std::string("DDP"), where(*type), how("distributed_type", *type),
          kRankConfig);
    }
    if (auto v = get("mixed_precision")) {
      std::string t = Lower(v->text);
      if (t == "bf16") {
        Set(facts_.precision, Precision::kMixedBf16, where(*v), how("mixed_precision", *v),
            kRankConfig);
      } else if (t == "fp16") {
        Set(facts_.precision, Precision::kMixedFp16, where(*v), how("mixed_precision", *v),
            kRankConfig);
      }
    }
    if (auto v = get("num_processes"); v && launcher_default_processes_) {
      if (auto n = ParseNumber(v->text); n && *n >= 1) {
        // accelerate's --num_processes on the command line wins over the file; the file wins
        // over the launcher's default of one process.
        Set(facts_.processes, static_cast<int>(*n), where(*v), how("num_processes", *v),
            kRankLauncher);
      }
    }
  }
}

// `x.to(...)`, `x.cuda()`, `x.half()`: where the call ends (a chain's inner call ends first),
// the name its receiver starts with ("model" of `model.to`, "MLP" of `MLP().to`) and the name
// the result is assigned to (`model = MLP().to(device)`).
void Analyzer::NoteMove(const CallSite& c, std::vector<MoveSite>* sites) {
  MoveSite m;
  m.file = c.file;
  m.end = ts_node_end_byte(c.node);
  m.line = Where(c).line;
  size_t cut = c.callee.find_first_of(".([");
  m.receiver = c.callee.substr(0, cut);
  TSNode parent = ts_node_parent(c.node);
  if (!ts_node_is_null(parent) && TypeOf(parent) == "assignment") {
    m.target = Text(c.file, Field(parent, "left"));
  }
  if (sites->size() < 64) sites->push_back(std::move(m));
}

// A model built in fp32 (a module's constructor, from_pretrained without torch_dtype) that is
// moved to the GPU and only then cast to 16-bit (`model = MLP().to(device)` …
// `model = model.to(torch.bfloat16)`, `model.cuda().half()`): its fp32 weights were all on the
// GPU before the cast, which replaces them one tensor at a time.
void Analyzer::ResolveCastAfterMove() {
  if (facts_.precision.value != Precision::kBf16 && facts_.precision.value != Precision::kFp16) {
    return;
  }
  if (facts_.weight_dtype.value == Precision::kBf16 ||
      facts_.weight_dtype.value == Precision::kFp16) {
    return;  // loaded in 16-bit (torch_dtype=…): never fp32 on the GPU
  }
  for (const auto& cast : casts_) {
    for (const auto& move : device_moves_) {
      if (move.file != cast.file || move.end > cast.end) continue;
      if (move.receiver != cast.receiver && move.target != cast.receiver) continue;
      Set(facts_.cast_after_move, true, SourceLine{files_[cast.file].name, cast.line},
          fmt::format("cast to 16-bit after the move to the device at {}:{}",
                      files_[move.file].name, move.line),
          kRankCall);
      return;
    }
  }
}

void Analyzer::ExtractFallbacks() {
  auto named = [&](std::initializer_list<std::string_view> names, auto& fact, const char* what) {
    if (fact.known()) return;
    for (auto n : names) {
      for (const auto& o : options_) {
        if (o.dest != n) continue;
        Value v = ArgValue(o, 0);
        SetNumber(fact, v, SourceLine{files_[o.file].name, o.line}, what, kRankName);
        if (fact.known()) return;
      }
      auto it = bindings_.find(std::string(n));
      if (it == bindings_.end()) {
        std::string upper(n);  // module constants: SEQ_LEN = 512
        std::transform(upper.begin(), upper.end(), upper.begin(),
                       [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
        it = bindings_.find(upper);
      }
      if (it != bindings_.end()) {
        // A dataclass field (GPTConfig.block_size): the value its call passes, else the default.
        const Binding& b = it->second.back();
        Value v = b.field ? FieldValue(b.owner, it->first) : Eval(b.file, b.value, 0);
        SetNumber(fact, v, Where(b.file, b.value), what, kRankName);
        if (fact.known()) return;
      }
      // Also without a variable of that name: a config file's key (`--config cfg.json`).
      Value c = ConfigValueOf(n);
      if (c.known()) SetNumber(fact, c, c.origin, what, kRankName);
      if (fact.known()) return;
    }
  };
  named({"batch_size", "per_device_train_batch_size", "micro_batch_size", "train_batch_size", "bs"},
        facts_.batch_size, "batch_size");
  named({"block_size", "seq_len", "seq_length", "max_seq_length", "max_length", "context_length",
         "max_len", "sequence_length"},
        facts_.seq_len, "seq_len");
  named({"max_target_length", "target_max_length", "max_target_len", "target_length",
         "max_target_tokens"},
        facts_.target_len, "target length");
  named({"image_size", "img_size", "input_size", "resolution", "crop_size"}, facts_.image_size,
        "image_size");
  named({"gradient_accumulation_steps", "grad_accum", "accumulation_steps", "accum_steps",
         "grad_accum_steps"},
        facts_.grad_accum, "grad_accum");
  named({"num_workers", "workers", "dataloader_num_workers"}, facts_.num_workers, "num_workers");
  LearningRateFallback();

  // A hand-built model: the layers found, summed.
  if (!facts_.parameters.known()) {
    // A layer outside any stack counts once; one a stack clones counts num_layers times.
    double stacks = encoder_layer_params_ * (encoder_layers_ > 0 ? encoder_layers_ : 1) +
                    decoder_layer_params_ * (decoder_layers_ > 0 ? decoder_layers_ : 1) +
                    nn_transformer_params_;
    double total = linear_params_ + embedding_params_ + stacks;
    if (total > 0) {
      SourceLine where = !layer_where_.empty() ? layer_where_ : linear_where_;
      Set(facts_.parameters, total, where,
          stacks > 0 ? "nn.Transformer layers × num_layers + nn.Linear/nn.Embedding"
                     : "sum of nn.Linear layers",
          kRankName);
      if (facts_.architecture == Architecture::kUnknown) facts_.architecture = Architecture::kMlp;
      if (facts_.architecture == Architecture::kMlp && stacks == 0) {
        Set(facts_.mlp_features, linear_output_sum_, linear_where_,
            "sum of the nn.Linear layers' out_features", kRankName);
        Set(facts_.mlp_widest, linear_widest_, linear_where_, "the widest nn.Linear layer",
            kRankName);
      }
      if (!facts_.model.known()) {
        Set(facts_.model, std::string(stacks > 0 ? "custom transformer" : "custom MLP"), where,
            "nn layers found in the source", kRankName);
      }
      pending_.erase("model");
      pending_.erase("parameters");
    } else if (!facts_.model.known() && pending_.count("model") == 0) {
      Undecided("model", "no known model constructor, from_pretrained name or nn layer found",
                {facts_.entry, 0});
    }
  }
  if (generates_ && !facts_.seq_len.known()) {
    int64_t prompt = std::min<int64_t>(kAssumedPromptTokens,
                                       facts_.max_positions.value.value_or(kAssumedPromptTokens));
    Assume(facts_.seq_len, prompt,
           fmt::format("a {}-token prompt, as generation gives no prompt length", prompt));
  }
  if (generates_ && !facts_.max_new_tokens.known()) {
    Assume(facts_.max_new_tokens, int64_t{20},
           "20 new tokens: generate() without max_new_tokens stops at transformers' default "
           "max_length=20");
  }
  if (facts_.architecture == Architecture::kTransformer && !facts_.seq_len.known() &&
      facts_.max_positions.known()) {
    Assume(facts_.seq_len, *facts_.max_positions.value,
           fmt::format("the model's maximum context ({}), as no max_length/block_size was found",
                       *facts_.max_positions.value));
  }
  if ((facts_.architecture == Architecture::kCnn || facts_.architecture == Architecture::kVit) &&
      !facts_.image_size.known()) {
    Assume(facts_.image_size, int64_t{224}, "224×224, the torchvision default");
  }
  if (!facts_.training.known()) {
    if (facts_.optimizer.known()) {
      Set(facts_.training, true, facts_.optimizer.where, "an optimizer", kRankDefault);
    } else {
      Set(facts_.training, false, {facts_.entry, 0},
          "no optimizer, backward() or trainer found: inference", kRankName);
    }
  }
  if (!*facts_.training.value && !facts_.batch_size.known() &&
      facts_.architecture != Architecture::kUnknown && pending_.count("batch_size") == 0) {
    Assume(facts_.batch_size, int64_t{1}, "batch 1, as inference gives no batch size");
  }
  if (*facts_.training.value && !facts_.optimizer.known()) {
    Assume(facts_.optimizer, Optimizer::kAdam, "AdamW, as the optimizer was not found");
    Undecided("optimizer", "training, but no optimizer constructor was found",
              facts_.training.where);
  }
  if (!facts_.precision.known() && pending_.count("precision") != 0) {
    // The larger of the readings: fp32 keeps every activation at 4 bytes.
    Assume(
        facts_.precision, Precision::kFp32,
        fmt::format("fp32, as the precision could not be read ({})", pending_["precision"].reason));
  } else if (!facts_.precision.known()) {
    Set(facts_.precision, Precision::kFp32, {facts_.entry, 0},
        "no autocast, .half(), torch_dtype or bf16 flag found", kRankName);
  } else {
    pending_.erase("precision");
  }
  if (!facts_.checkpointing.known()) {
    Set(facts_.checkpointing, Checkpointing::kNone, {facts_.entry, 0},
        "no activation checkpointing found", kRankName);
  }
  if (!facts_.zero_stage.known()) {
    Set(facts_.zero_stage, 0, {facts_.entry, 0}, "no ZeRO or FSDP sharding found", kRankName);
  }
  if (!facts_.grad_accum.known()) {
    Assume(facts_.grad_accum, int64_t{1}, "no gradient accumulation found");
  }
  if (!facts_.compiled.known()) {
    Set(facts_.compiled, false, {facts_.entry, 0}, "no torch.compile found", kRankName);
  }
  if (!facts_.parallelism.known()) {
    Set(facts_.parallelism, std::string("none"), {facts_.entry, 0},
        "no DDP, FSDP, DeepSpeed, Accelerate, Lightning or DataParallel found", kRankName);
  }
  if (!facts_.batch_size.known() && facts_.training.value.value_or(false) &&
      pending_.count("batch_size") == 0) {
    Undecided("batch_size", "no DataLoader batch_size or trainer batch size found",
              {facts_.entry, 0});
  }
}

}  // namespace rightsize::code::internal
