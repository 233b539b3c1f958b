#include "code/memory_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "code/model_zoo.h"

namespace rightsize::code {
namespace {

struct PerParam {
  double weights = 0, gradients = 0, optimizer = 0;
  double cast_copies = 0;  // autocast's 16-bit copies of the fp32 weights
  std::string weights_why, gradients_why, optimizer_why;
};

// Bytes per parameter of each model state. `amp`: mixed precision is torch's autocast over fp32
// weights (torch.autocast, torch.cuda.amp, the HF Trainer's fp16/bf16, Lightning's "-mixed",
// Accelerate), as opposed to a framework that keeps 16-bit weights beside an fp32 master copy
// (DeepSpeed, FSDP's MixedPrecision).
PerParam BytesPerParameter(Precision p, bool training, Optimizer o, bool amp) {
  PerParam b;
  bool mixed = p == Precision::kMixedFp16 || p == Precision::kMixedBf16;
  bool half = p == Precision::kFp16 || p == Precision::kBf16;
  if (!training) {
    b.weights = p == Precision::kInt8 ? 1 : p == Precision::kInt4 ? 0.5 : half ? 2 : 4;
    b.weights_why = fmt::format("{} B ({} weights, inference)", b.weights, NameOf(p));
    if (mixed && amp) {
      // Autocast casts each fp32 weight to 16-bit on first use and caches the copy until the
      // autocast region exits, so a forward pass holds both.
      b.cast_copies = 2;
    }
    return b;
  }
  if (p == Precision::kInt8 || p == Precision::kInt4) {
    // A quantized base model is trained through small adapters (LoRA): their states are tiny.
    b.weights = p == Precision::kInt8 ? 1 : 0.5;
    b.weights_why = fmt::format("{} B (quantized frozen weights; adapters not counted)", b.weights);
    return b;
  }
  double state = half ? 2 : 4;  // one optimizer state, in the dtype of the weights
  double states = 0;
  switch (o) {
    case Optimizer::kAdam:
      states = 2 * state;
      break;
    case Optimizer::kAdam8bit:
      states = 2;
      break;
    case Optimizer::kSgdMomentum:
      states = state;
      break;
    case Optimizer::kSgd:
    case Optimizer::kAdafactor:  // factored second moments: O(rows + columns)
      states = 0;
      break;
  }
  if (mixed && amp) {
    // Autocast keeps the weights, their gradients and the optimizer states in fp32; what is
    // 16-bit is the copy of each weight cast for its matmul, cached for the forward pass and
    // saved by autograd for the backward one (4 + 2 + 4 + states: Adam 18 B).
    b.weights = 4;
    b.cast_copies = 2;
    b.gradients = 4;
    b.optimizer = states;
    b.weights_why = "4 B (fp32 weights under autocast)";
    b.gradients_why = "4 B (fp32, as the weights)";
    b.optimizer_why = fmt::format("{} B {} states", states, NameOf(o));
  } else if (mixed) {
    b.weights = 2;
    b.gradients = 2;
    b.optimizer = 4 + states;  // the fp32 master copy
    b.weights_why = "2 B (16-bit working copy)";
    b.gradients_why = "2 B (16-bit)";
    b.optimizer_why = fmt::format("4 B fp32 master + {} B {} states", states, NameOf(o));
  } else {
    b.weights = half ? 2 : 4;
    b.gradients = half ? 2 : 4;
    b.optimizer = states;
    b.weights_why = fmt::format("{} B ({})", b.weights, NameOf(p));
    b.gradients_why = fmt::format("{} B ({})", b.gradients, NameOf(p));
    b.optimizer_why = fmt::format("{} B {} states", states, NameOf(o));
  }
  return b;
}

std::string Millions(double params) {
  return params >= 1e9 ? fmt::format("{:.2f}B", params / 1e9)
                       : fmt::format("{:.1f}M", params / 1e6);
}

template <typename T>
void AddLine(std::vector<SourceLine>* lines, const Fact<T>& f) {
  if (!f.known() || f.where.empty() || f.where.line == 0) return;
  for (const auto& l : *lines) {
    if (l.file == f.where.file && l.line == f.where.line) return;
  }
  lines->push_back(f.where);
}

}  // namespace

std::string FormatGb(double bytes) {
  double gib = bytes / (1024.0 * 1024.0 * 1024.0);
  return gib >= 100 ? fmt::format("{:.0f} GiB", gib)
         : gib >= 1 ? fmt::format("{:.1f} GiB", gib)
                    : fmt::format("{:.2f} GiB", gib);
}

namespace {

// A detector's step transients per input pixel (see ActivationTerms), fitted on the published
// table's dev split: the median of (measured − estimate) over detectron2's 11 FPN runs.
constexpr double kDetectorTransientBytesPerPixel = 453;

// A paged optimizer's states: not GPU memory the job needs.
constexpr std::string_view kPagedStates =
    "paged (bitsandbytes): in CUDA unified memory, which the driver moves to the host when the GPU "
    "fills; outside torch's allocator";

// NotFound for a fact the estimate needs, with the analysis's reason when it gave one.
Status Missing(const CodeFacts& f, const std::string& what) {
  std::string reason = "not found";
  for (const auto& u : f.undetermined) {
    if (u.what == what || (what == "parameters" && u.what == "model")) {
      reason = u.where.empty() ? u.reason : fmt::format("{} ({})", u.reason, u.where.ToString());
    }
  }
  return Status::NotFound(fmt::format("the {} is undetermined: {}", what, reason));
}

// Mixed precision as torch's autocast over fp32 weights: not DeepSpeed or FSDP (16-bit weights
// beside an fp32 master copy), not weights loaded in 16-bit.
bool AutocastOverFp32(const CodeFacts& f, Precision precision) {
  if (precision != Precision::kMixedBf16 && precision != Precision::kMixedFp16) return false;
  if (f.weight_dtype.value == Precision::kBf16 || f.weight_dtype.value == Precision::kFp16) {
    return false;
  }
  std::string_view par = f.parallelism.value.value_or("none");
  return f.zero_stage.value.value_or(0) == 0 && par != "FSDP" && par != "DeepSpeed";
}

// The largest single tensor, in parameters: the token embedding (vocab × hidden) where the
// model's shape is read, else the widest MLP layer squared, else 0.
double LargestTensor(const CodeFacts& f) {
  if (f.vocab.known() && f.hidden.known()) {
    return static_cast<double>(*f.vocab.value) * static_cast<double>(*f.hidden.value);
  }
  if (f.mlp_widest.known()) return *f.mlp_widest.value * *f.mlp_widest.value;
  return 0;
}

// ZeRO-3 with the parameters offloaded to CPU memory (DeepSpeed offload_param, FSDP
// offload_params): the parameters on the GPU at once, whole (gathered, not sharded). DeepSpeed
// keeps fetched parameters until stage3_max_live_parameters of them are resident (1e9 by default;
// it does not release one it will reuse soon, and the backward pass reuses them in reverse), and
// fetches a parameter whole even when it alone passes that limit: the limit plus the largest
// tensor, the token embedding (vocab × hidden) where the model's shape is read. nullopt when the
// weights are not offloaded.
std::optional<double> ResidentParameters(const CodeFacts& f, double params) {
  if (!f.param_offload.value.value_or(false) || f.zero_stage.value.value_or(0) < 3) {
    return std::nullopt;
  }
  double live = f.max_live_parameters.value.value_or(1e9);
  double largest = f.vocab.known() && f.hidden.known() ? LargestTensor(f) : 0;
  return std::min(params, live + largest);
}

std::string ResidentNote(const CodeFacts& f, double resident) {
  return fmt::format(
      " (parameters offloaded to CPU memory: {} resident at once, stage3_max_live_parameters {} "
      "+ the largest tensor)",
      Millions(resident), Millions(f.max_live_parameters.value.value_or(1e9)));
}

// The terms that do not grow with the batch: weights, gradients (and DDP's bucket copy),
// optimizer states, each sharded by the ZeRO stage. Returns their sum.
double StaticTerms(const CodeFacts& f, bool training, Precision precision, Optimizer optimizer,
                   bool amp, double params, MemoryEstimate* e) {
  const double d = e->data_parallel_gpus;
  int stage = f.zero_stage.value.value_or(0);
  PerParam per = BytesPerParameter(precision, training, optimizer, amp);

  auto shard = [&](double bytes, int from_stage) {
    return stage >= from_stage ? bytes / d : bytes;
  };
  auto split_note = [&](int from_stage) {
    return stage >= from_stage && d > 1 ? fmt::format(" ÷ {} GPUs (ZeRO-{})", d, stage) : "";
  };

  std::optional<double> resident = ResidentParameters(f, params);
  MemoryTerm weights{
      "weights",
      resident ? *resident * per.weights : shard(params * per.weights, 3),
      resident ? fmt::format("{} params × {}{}", Millions(params), per.weights_why,
                             ResidentNote(f, *resident))
               : fmt::format("{} params × {}{}", Millions(params), per.weights_why, split_note(3)),
      {}};
  AddLine(&weights.lines, f.param_offload);
  AddLine(&weights.lines, f.parameters);
  AddLine(&weights.lines, f.model);
  AddLine(&weights.lines, f.precision);
  AddLine(&weights.lines, f.weight_dtype);
  AddLine(&weights.lines, f.zero_stage);
  e->terms.push_back(weights);
  double static_bytes = weights.bytes;
  if (per.cast_copies > 0) {
    MemoryTerm cast{"16-bit weight copies",
                    params * per.cast_copies,
                    fmt::format("{} params × {} B (autocast's {} copy of each fp32 weight, held "
                                "from the forward pass{})",
                                Millions(params), per.cast_copies,
                                precision == Precision::kMixedBf16 ? "bf16" : "fp16",
                                training ? " through the backward one" : ""),
                    {}};
    AddLine(&cast.lines, f.precision);
    e->terms.push_back(cast);
    static_bytes += cast.bytes;
  }
  const bool in_backward = f.optimizer_in_backward.value.value_or(false);
  if (training && per.gradients > 0) {
    MemoryTerm grads{
        "gradients",
        shard(params * per.gradients, 2),
        fmt::format("{} params × {}{}", Millions(params), per.gradients_why, split_note(2)),
        {}};
    if (in_backward) {
      // Each parameter is stepped and its gradient freed as soon as it is whole: the largest
      // parameter's (the embedding or the output layer, V·h) is what is held at once.
      // Without the model's shape, a layer's share of the parameters stands in for it.
      double largest = LargestTensor(f);
      if (largest == 0) {
        largest = params / static_cast<double>(std::max<int64_t>(1, f.layers.value.value_or(1)));
      }
      grads.bytes = shard(largest * per.gradients, 2);
      grads.formula =
          fmt::format("one parameter's at a time (optimizer in backward): the largest, {} × {}{}",
                      Millions(largest), per.gradients_why, split_note(2));
      AddLine(&grads.lines, f.optimizer_in_backward);
    }
    AddLine(&grads.lines, f.precision);
    AddLine(&grads.lines, f.zero_stage);
    e->terms.push_back(grads);
    static_bytes += grads.bytes;
    std::string_view par = f.parallelism.value.value_or("none");
    if (d > 1 && stage == 0 && par != "FSDP" && par != "DeepSpeed" && !in_backward) {
      // DDP's reducer keeps its own bucket copy of every gradient (gradient_as_bucket_view off).
      MemoryTerm buckets{"DDP gradient buckets",
                         params * per.gradients,
                         "one more copy of the gradients for all-reduce",
                         {}};
      AddLine(&buckets.lines, f.parallelism);
      e->terms.push_back(buckets);
      static_bytes += buckets.bytes;
    }
  }
  if (training && per.optimizer > 0) {
    bool offload = f.optimizer_offload.value.value_or(false);
    bool paged = f.paged_optimizer.value.value_or(false);
    MemoryTerm opt{"optimizer states",
                   offload || paged ? 0 : shard(params * per.optimizer, 1),
                   offload ? "offloaded to CPU memory"
                   : paged ? std::string(kPagedStates)
                           : fmt::format("{} params × {}{}", Millions(params), per.optimizer_why,
                                         split_note(1)),
                   {}};
    AddLine(&opt.lines, f.optimizer);
    AddLine(&opt.lines, f.paged_optimizer);
    AddLine(&opt.lines, f.zero_stage);
    AddLine(&opt.lines, f.optimizer_offload);
    e->terms.push_back(opt);
    static_bytes += opt.bytes;
  }

  return static_bytes;
}

// Bytes per 4-bit weight in bitsandbytes: the 4-bit value and an fp32 absmax per 64-weight
// block; with double quantisation the absmax is 8-bit, with an fp32 constant per 256 blocks.
double FourBitBytes(bool double_quant) {
  return double_quant ? 0.5 + 1.0 / 64 + 4.0 / (64 * 256) : 0.5 + 4.0 / 64;
}

// Bytes of one optimizer state per trainable fp32 parameter.
double StatesPerParameter(Optimizer o) {
  switch (o) {
    case Optimizer::kAdam:
      return 8;
    case Optimizer::kAdam8bit:
      return 2;
    case Optimizer::kSgdMomentum:
      return 4;
    case Optimizer::kSgd:
    case Optimizer::kAdafactor:
      return 0;
  }
  return 8;
}

// A frozen base model: quantised weights (bitsandbytes) and/or LoRA adapters, the only
// parameters that train. Adds the weights, adapters, gradients, optimizer states and
// dequantisation terms and returns true; false when neither applies (StaticTerms then counts
// every parameter as trained).
bool FrozenBaseTerms(const CodeFacts& f, bool training, Precision precision, Optimizer optimizer,
                     double params, MemoryEstimate* e, double* static_bytes) {
  const bool quantized = (precision == Precision::kInt4 || precision == Precision::kInt8) &&
                         f.quantized_parameters.known();
  const bool lora = training && f.trainable_parameters.known();
  if (!quantized && !lora) return false;
  const double d = e->data_parallel_gpus;
  const int stage = f.zero_stage.value.value_or(0);
  auto shard = [&](double bytes, int from_stage) {
    return stage >= from_stage ? bytes / d : bytes;
  };
  auto add = [&](MemoryTerm t) {
    *static_bytes += t.bytes;
    e->terms.push_back(std::move(t));
  };
  // What the frozen weights are stored in: the dtype they were loaded in, else the precision's.
  // (Mixed precision alone keeps fp32 weights: autocast casts on the fly.)
  Precision load = f.weight_dtype.value.value_or(precision);
  bool half_load = load == Precision::kBf16 || load == Precision::kFp16;
  if (quantized) {
    double q = std::min(*f.quantized_parameters.value, params);
    bool four = precision == Precision::kInt4;
    bool dq = f.double_quant.value.value_or(false);
    double qbytes = four ? FourBitBytes(dq) : 1;
    MemoryTerm w{"quantized weights",
                 shard(q * qbytes, 3),
                 four ? fmt::format("{} Linear weights × {:.4f} B (4-bit + {} absmax per 64)",
                                    Millions(q), qbytes, dq ? "8-bit double-quantised" : "fp32")
                      : fmt::format("{} Linear weights × 1 B (LLM.int8)", Millions(q)),
                 {}};
    AddLine(&w.lines, f.precision);
    AddLine(&w.lines, f.double_quant);
    add(std::move(w));
    // transformers loads what bitsandbytes leaves alone in float16 unless told otherwise;
    // prepare_model_for_kbit_training casts it to fp32.
    bool fp32 = f.kbit_prepared.value.value_or(false);
    double rest_bytes = fp32 ? 4 : 2;
    MemoryTerm rest{"weights (not quantized)",
                    shard((params - q) * rest_bytes, 3),
                    fmt::format("{} params (embeddings, output layer, norms, biases) × {} B{}",
                                Millions(params - q), rest_bytes,
                                fp32 ? " (fp32: prepare_model_for_kbit_training)" : " (16-bit)"),
                    {}};
    AddLine(&rest.lines, f.kbit_prepared);
    AddLine(&rest.lines, f.model);
    add(std::move(rest));
    if (f.layers.known() && *f.layers.value > 0) {
      // Each quantised layer's weights are dequantised to the compute dtype for its matmuls.
      double layer = q / static_cast<double>(*f.layers.value);
      add({"dequantization buffer",
           layer * 2,
           fmt::format("one layer's {} Linear weights dequantised to 16-bit", Millions(layer)),
           {}});
    }
  } else {
    double bytes = half_load ? 2 : 4;
    std::optional<double> resident = ResidentParameters(f, params);
    MemoryTerm w{
        "weights (frozen)",
        resident ? *resident * bytes : shard(params * bytes, 3),
        fmt::format("{} params × {} B ({}, frozen under LoRA){}", Millions(params), bytes,
                    half_load ? "16-bit" : "fp32", resident ? ResidentNote(f, *resident) : ""),
        {}};
    AddLine(&w.lines, f.param_offload);
    AddLine(&w.lines, f.parameters);
    AddLine(&w.lines, f.weight_dtype);
    add(std::move(w));
  }
  if (!lora) return true;
  // PEFT keeps the adapters in fp32 (autocast_adapter_dtype), so their gradients and optimizer
  // states are fp32 too.
  double t = *f.trainable_parameters.value;
  const Precision adapter = f.adapter_dtype.value.value_or(Precision::kFp32);
  const bool half = adapter == Precision::kBf16 || adapter == Precision::kFp16;
  const double bytes = half ? 2 : 4;
  MemoryTerm adapters{"LoRA adapters",
                      shard(t * bytes, 3),
                      fmt::format("{} trainable params (r={}, {}) × {} B ({})", Millions(t),
                                  f.lora_rank.value.value_or(0), f.lora_targets.value.value_or("?"),
                                  bytes, NameOf(adapter)),
                      {}};
  AddLine(&adapters.lines, f.trainable_parameters);
  AddLine(&adapters.lines, f.adapter_dtype);
  add(std::move(adapters));
  MemoryTerm grads{"gradients",
                   shard(t * bytes, 2),
                   fmt::format("{} trainable params × {} B (adapters only)", Millions(t), bytes),
                   {}};
  AddLine(&grads.lines, f.trainable_parameters);
  add(std::move(grads));
  bool offload = f.optimizer_offload.value.value_or(false);
  bool paged = f.paged_optimizer.value.value_or(false);
  // torch's optimizers keep their states in the parameters' dtype; 8-bit ones in 8 bits.
  double states =
      StatesPerParameter(optimizer) * (half && optimizer != Optimizer::kAdam8bit ? 0.5 : 1);
  MemoryTerm opt{"optimizer states",
                 offload || paged ? 0 : shard(t * states, 1),
                 offload ? "offloaded to CPU memory"
                 : paged ? std::string(kPagedStates)
                         : fmt::format("{} trainable params × {} B {} states", Millions(t), states,
                                       NameOf(optimizer)),
                 {}};
  AddLine(&opt.lines, f.optimizer);
  AddLine(&opt.lines, f.paged_optimizer);
  add(std::move(opt));
  return true;
}

// The terms that grow with the batch: activations (transformer, ViT and CNN formulas) and
// logits; sets *dynamic_bytes to their sum. NotFound when a shape they need is undetermined.
Status ActivationTerms(const CodeFacts& f, bool training, Precision precision, bool amp,
                       MemoryEstimate* e, double* dynamic_bytes) {
  double act = 0;
  MemoryTerm acts{"activations", 0, "", {}};
  MemoryTerm logits{"logits", 0, "", {}};
  MemoryTerm kv_cache{"KV cache", 0, "", {}};
  MemoryTerm adapter_acts{"adapter activations", 0, "", {}};
  MemoryTerm transients{"detector step transients", 0, "", {}};
  bool half_acts = precision != Precision::kFp32;
  Checkpointing ckpt = f.checkpointing.value.value_or(Checkpointing::kNone);
  std::string eager_why;  // set when the job's torch, not the code, leaves attention eager
  bool fused = AttentionFused(f, &eager_why);
  auto need = [&](bool ok, const std::string& what) -> Status {
    if (ok) return Status::Ok();
    return Missing(f, what);
  };
  if (f.architecture == Architecture::kTransformer || f.architecture == Architecture::kVit) {
    RS_RETURN_IF_ERROR(
        need(f.layers.known() && f.hidden.known() && f.heads.known(), "model shape"));
    RS_RETURN_IF_ERROR(need(f.batch_size.known(), "batch_size"));
    double b = static_cast<double>(*f.batch_size.value);
    double s = 0;
    if (f.architecture == Architecture::kVit) {
      auto spec = FindVisionModel(f.model.value.value_or(""));
      double patch = spec ? static_cast<double>(spec->patch) : 16;
      if (auto hf = FindTransformer(f.model.value.value_or("")); !spec && hf && hf->vit) {
        patch = static_cast<double>(hf->patch);  // google/vit-base-patch32-224
      }
      double img = static_cast<double>(f.image_size.value.value_or(224));
      s = std::floor(img / patch) * std::floor(img / patch) + 1;
    } else {
      RS_RETURN_IF_ERROR(need(f.seq_len.known(), "seq_len"));
      s = static_cast<double>(*f.seq_len.value);
    }
    double h = static_cast<double>(*f.hidden.value);
    double a = static_cast<double>(*f.heads.value);
    double layers = static_cast<double>(*f.layers.value);
    double dtype_factor = half_acts ? 1 : 2;  // the formula counts 2-byte activations
    // Under autocast over fp32 weights the residual stream stays fp32 (fp32 embeddings plus
    // 16-bit branch outputs promote to fp32) and layer_norm runs in fp32: each LayerNorm's saved
    // input takes 4 B, not 2, per position and feature (+2·s·b·h per LayerNorm), and a layer's
    // checkpointed input is fp32 too.
    double ln_extra = amp ? 2 : 0;
    double full_layer = s * b * h * (34 + 2 * ln_extra + (fused ? 0 : 5 * a * s / h));
    double ckpt_layer = 2 + ln_extra;
    std::string per_layer;
    if (!training) {
      act = full_layer * dtype_factor;  // one layer's worth is live at a time
      per_layer = "one layer live (inference)";
    } else if (f.activation_offload.value.value_or(false)) {
      // What is saved goes to host memory as it is made and comes back for its layer's
      // backward: a layer's worth (and, checkpointed, one layer's input) is on the GPU.
      act =
          (full_layer + (ckpt == Checkpointing::kFull ? ckpt_layer * s * b * h : 0)) * dtype_factor;
      per_layer = "activations offloaded to host memory: one layer's on the GPU";
      AddLine(&acts.lines, f.activation_offload);
    } else if (ckpt == Checkpointing::kFull) {
      act = (layers * ckpt_layer * s * b * h + full_layer) * dtype_factor;
      per_layer =
          fmt::format("{}·s·b·h per layer (full checkpointing) + one layer recomputed", ckpt_layer);
    } else if (f.decoder_layers.value.value_or(0) > 0 &&
               f.architecture == Architecture::kTransformer) {
      // Encoder-decoder: the encoder's layers at the source length s, the decoder's at the
      // target length t, each decoder layer with a cross-attention block (its query, scores
      // over the s encoder positions, output and norm: 13·t·b·h + 5·a·t·s·b, and the encoder
      // output it reads as keys and values, 4·s·b·h).
      double dec = static_cast<double>(*f.decoder_layers.value);
      double enc = layers - dec;
      double t = static_cast<double>(f.target_len.value.value_or(*f.seq_len.value));
      double dec_layer = t * b * h * (34 + 2 * ln_extra + (fused ? 0 : 5 * a * t / h));
      double cross = b * h * ((13 + ln_extra) * t + 4 * s) + (fused ? 0 : 5 * a * t * s * b);
      act = (enc * full_layer + dec * (dec_layer + cross)) * dtype_factor;
      per_layer = fmt::format(
          "encoder {} layers at s, decoder {} at t={}{} with cross-attention (13·t + 4·s)·b·h{}",
          enc, dec, t, f.target_len.known() ? "" : " (= s: no target length found)",
          fused ? "" : " + 5·a·t·s·b");
      if (!f.target_len.known()) {
        e->assumptions.push_back("the decoder's target length is taken as the source length");
      }
      AddLine(&acts.lines, f.target_len);
    } else {
      act = layers * full_layer * dtype_factor;
      per_layer = fused ? fmt::format("{}·s·b·h per layer (fused attention)", 34 + 2 * ln_extra)
                        : fmt::format("s·b·h·({} + 5·a·s/h) per layer", 34 + 2 * ln_extra);
    }
    acts.formula = fmt::format("{}; L={} s={} b={} h={} a={}{}{}{}", per_layer, layers, s, b, h, a,
                               half_acts ? "" : ", ×2 for fp32",
                               amp ? " (autocast: LayerNorm inputs in fp32)" : "",
                               eager_why.empty() ? "" : "; " + eager_why);
    acts.bytes = act;
    e->bytes_per_sample = act / b;
    if (f.vocab.known() && f.architecture == Architecture::kTransformer) {
      double v = static_cast<double>(*f.vocab.value);
      if (f.decoder_layers.value.value_or(0) > 0 && f.target_len.known()) {
        s = static_cast<double>(*f.target_len.value);  // the decoder's positions give logits
      }
      // Under autocast the head's output is 16-bit and the loss casts it to fp32: both live.
      double copies = 4 * (training ? 2 : 1) + (amp ? 2 : 0);
      logits.bytes = b * s * v * copies;
      logits.formula = fmt::format("b·s·V·{} = {}·{}·{}·{}{}{}", copies, b, s, v, copies,
                                   training ? " (fp32 logits and their gradient" : " (fp32 logits",
                                   amp ? ", and the head's 16-bit output under autocast)" : ")");
      if (training && f.loss_chunks.known() && *f.loss_chunks.value == 0) {
        // A fused linear cross-entropy computes the logits a block of positions at a time and
        // their gradient with them: about a hidden state's worth in fp32, and its gradient.
        logits.bytes = b * s * h * 8;
        logits.formula = fmt::format(
            "fused linear cross-entropy: never whole; b·s·h·8 = {}·{}·{}·8 (a block's fp32 "
            "logits and gradient)",
            b, s, h);
        AddLine(&logits.lines, f.loss_chunks);
      } else if (training && f.loss_chunks.known()) {
        // The head's output and its gradient whole in the head's dtype; the fp32 upcast and its
        // gradient one chunk at a time.
        // (In fp32 the upcast is no copy.)
        double head = half_acts ? 2 : 4;
        double chunks = static_cast<double>(*f.loss_chunks.value);
        copies = 2 * head + (half_acts ? 8 / chunks : 0);
        logits.bytes = b * s * v * copies;
        logits.formula = fmt::format(
            "b·s·V·(2·{} + 8/{}) = {}·{}·{}·{:.2f} (the logits and their gradient in the head's "
            "dtype; the fp32 upcast one of {} chunks at a time)",
            head, chunks, b, s, v, copies, chunks);
        AddLine(&logits.lines, f.loss_chunks);
      }
      e->bytes_per_sample += logits.bytes / b;
      AddLine(&logits.lines, f.vocab);
      AddLine(&logits.lines, f.batch_size);
      AddLine(&logits.lines, f.seq_len);
    }
    if (!training && f.max_new_tokens.known() && f.architecture == Architecture::kTransformer) {
      // Generation keeps every layer's keys and values for the prompt and each new token.
      double kv_heads = static_cast<double>(f.kv_heads.value.value_or(*f.heads.value));
      double head_dim = static_cast<double>(
          f.head_dim.value.value_or(*f.heads.value > 0 ? *f.hidden.value / *f.heads.value : 0));
      double tokens = s + static_cast<double>(*f.max_new_tokens.value);
      double bytes = precision == Precision::kFp32 ? 4 : 2;
      kv_cache.bytes = 2 * layers * kv_heads * head_dim * tokens * b * bytes;
      kv_cache.formula =
          fmt::format("2·L·kv_heads·head_dim·(prompt + new)·b·{} = 2·{}·{}·{}·({} + {})·{}·{}",
                      bytes, layers, kv_heads, head_dim, s, *f.max_new_tokens.value, b, bytes);
      AddLine(&kv_cache.lines, f.max_new_tokens);
      AddLine(&kv_cache.lines, f.seq_len);
      AddLine(&kv_cache.lines, f.batch_size);
      AddLine(&kv_cache.lines, f.model);
      e->bytes_per_sample += kv_cache.bytes / b;
    }
    double dropout = f.lora_dropout.value.value_or(0);
    if (training && dropout > 0 && f.lora_input_features.known()) {
      // Each adapter saves its dropped-out input (and the dropout mask, 1 B) for backward.
      double features = *f.lora_input_features.value;
      if (ckpt == Checkpointing::kFull) features /= layers;  // only the layer recomputed
      double bytes = half_acts ? 2 : 4;
      adapter_acts.bytes = b * s * features * (bytes + 1);
      adapter_acts.formula = fmt::format(
          "b·s·(in-features of the targeted matrices{})·({} + 1 mask) B, lora_dropout={}",
          ckpt == Checkpointing::kFull ? ", one layer" : "", bytes, dropout);
      AddLine(&adapter_acts.lines, f.lora_dropout);
      e->bytes_per_sample += adapter_acts.bytes / b;
    }
  } else if (f.architecture == Architecture::kCnn) {
    RS_RETURN_IF_ERROR(need(f.batch_size.known(), "batch_size"));
    auto spec = FindVisionModel(f.model.value.value_or(""));
    double per_image = spec ? spec->activation_bytes_per_image : 100e6;
    if (f.image_activation_bytes.known()) per_image = *f.image_activation_bytes.value;  // detector
    double b = static_cast<double>(*f.batch_size.value);
    double img = static_cast<double>(f.image_size.value.value_or(224));
    double area = (img / 224) * (img / 224);
    double factor = (half_acts ? 0.5 : 1) * (!training                      ? 0.1
                                             : ckpt == Checkpointing::kFull ? 0.3
                                                                            : 1);
    // A two-stage detector's RoI heads save a fixed amount per image, whatever its size.
    double roi = f.roi_activation_bytes.value.value_or(0);
    act = (per_image * area + roi) * b * factor;
    acts.formula =
        fmt::format("({:.0f} MB/image at 224² (fp32) × ({}/224)²{}) × b={}{}{}", per_image / 1e6,
                    img, roi > 0 ? fmt::format(" + {:.0f} MB of RoI heads", roi / 1e6) : "", b,
                    half_acts ? " × 0.5 (16-bit)" : "",
                    !training                      ? " × 0.1 (inference)"
                    : ckpt == Checkpointing::kFull ? " × 0.3 (checkpointing)"
                                                   : "");
    acts.bytes = act;
    if (f.image_activation_bytes.known() && training) {
      // What a detector's step holds beside what it saves, at its peak: the IoU matrices of
      // every anchor against every box of the image (anchors grow with the pixels), gradients
      // in flight and cuDNN's workspace. One constant per input pixel, fitted on detectron2's
      // model zoo (the published table's dev split; docs/accuracy-code.md).
      transients.bytes = kDetectorTransientBytesPerPixel * img * img * b;
      transients.formula = fmt::format(
          "{:.0f} B per input pixel × {}² × b={}: anchor-box IoU matrices, gradients in flight "
          "and cuDNN workspace (fitted on detectron2's model zoo)",
          kDetectorTransientBytesPerPixel, img, b);
      AddLine(&transients.lines, f.model);
      AddLine(&transients.lines, f.image_size);
      AddLine(&transients.lines, f.batch_size);
    }
    e->bytes_per_sample = (act + transients.bytes) / b;
  } else if (f.architecture == Architecture::kMlp && f.mlp_features.known() &&
             f.batch_size.known()) {
    // A stack of nn.Linear layers: in training each layer's output is saved by the nonlinearity
    // after it (GELU its input, ReLU its output) and the nonlinearity's (or dropout's) output by
    // the next layer, with a 1-byte dropout mask: (2·bytes + 1) per output feature. In inference
    // one layer's input and output are live at a time.
    double b = static_cast<double>(*f.batch_size.value);
    double bytes = half_acts ? 2 : 4;
    if (training) {
      act = b * *f.mlp_features.value * (2 * bytes + 1);
      acts.formula = fmt::format(
          "b·Σout·(2·{} + 1 mask) = {}·{}·{}: each Linear's output and its "
          "nonlinearity's, saved for backward",
          bytes, b, *f.mlp_features.value, 2 * bytes + 1);
    } else {
      double widest = f.mlp_widest.value.value_or(*f.mlp_features.value);
      act = b * 2 * widest * bytes;
      acts.formula = fmt::format(
          "b·2·widest·{} = {}·2·{}·{}: one layer's input and output live "
          "(inference)",
          bytes, b, widest, bytes);
    }
    acts.bytes = act;
    e->bytes_per_sample = act / b;
    AddLine(&acts.lines, f.mlp_features);
  } else {
    acts.formula = "not modelled for this architecture";
    e->assumptions.push_back("activations of a custom model are not modelled: the range is wider");
  }
  AddLine(&acts.lines, f.batch_size);
  AddLine(&acts.lines, f.seq_len);
  AddLine(&acts.lines, f.image_size);
  AddLine(&acts.lines, f.model);
  AddLine(&acts.lines, f.checkpointing);
  AddLine(&acts.lines, f.attention);
  if (!eager_why.empty()) AddLine(&acts.lines, f.torch_version);
  AddLine(&acts.lines, f.precision);
  e->terms.push_back(acts);
  if (logits.bytes > 0) e->terms.push_back(logits);
  if (kv_cache.bytes > 0) e->terms.push_back(kv_cache);
  if (adapter_acts.bytes > 0) e->terms.push_back(adapter_acts);
  if (transients.bytes > 0) e->terms.push_back(transients);
  *dynamic_bytes =
      acts.bytes + logits.bytes + kv_cache.bytes + adapter_acts.bytes + transients.bytes;
  return Status::Ok();
}

}  // namespace

StatusOr<MemoryEstimate> EstimateGpuMemory(const CodeFacts& f) {
  if (!f.parameters.known()) return Missing(f, "parameters");
  bool training = f.training.value.value_or(false);
  Precision precision = f.precision.value.value_or(Precision::kFp32);
  Optimizer optimizer = f.optimizer.value.value_or(Optimizer::kAdam);
  double params = *f.parameters.value;

  MemoryEstimate e;
  e.data_parallel_gpus = f.DataParallelGpus();
  double static_bytes = 0;
  if (!FrozenBaseTerms(f, training, precision, optimizer, params, &e, &static_bytes)) {
    // Autocast over weights loaded in 16-bit (torch_dtype=torch.bfloat16 with the HF Trainer's
    // bf16=True) keeps no fp32 master copy: the weights, gradients and optimizer states are all
    // in the weights' dtype.
    Precision states = precision;
    bool mixed = precision == Precision::kMixedBf16 || precision == Precision::kMixedFp16;
    if (training && mixed &&
        (f.weight_dtype.value == Precision::kBf16 || f.weight_dtype.value == Precision::kFp16)) {
      states = *f.weight_dtype.value;
    }
    static_bytes =
        StaticTerms(f, training, states, optimizer, AutocastOverFp32(f, precision), params, &e);
  }
  double dynamic_bytes = 0;
  RS_RETURN_IF_ERROR(
      ActivationTerms(f, training, precision, AutocastOverFp32(f, precision), &e, &dynamic_bytes));

  if (f.cast_after_move.value.value_or(false) &&
      (precision == Precision::kBf16 || precision == Precision::kFp16)) {
    // The fp32 weights were on the GPU before the cast, which replaces them one tensor at a
    // time (each 16-bit copy made before its fp32 tensor is freed): that peak, when it passes the
    // 16-bit run's, is the job's.
    double before_cast = params * 4 + LargestTensor(f) * 2;
    double excess = before_cast - (static_bytes + dynamic_bytes);
    if (excess > 0) {
      MemoryTerm t{"fp32 weights before the cast",
                   excess,
                   fmt::format("{} params × 4 B on the GPU before the 16-bit cast (+ one 16-bit "
                               "tensor), {} more than the 16-bit run's peak",
                               Millions(params), FormatGb(excess)),
                   {}};
      AddLine(&t.lines, f.cast_after_move);
      e.terms.push_back(t);
      dynamic_bytes += excess;
    }
  }
  e.terms.push_back(
      {"CUDA context", kCudaContextBytes, "CUDA context and cuBLAS/cuDNN workspaces", {}});
  double allocated = static_bytes + dynamic_bytes;
  e.terms.push_back({"allocator overhead",
                     kFragmentationP50 * allocated,
                     fmt::format("caching-allocator fragmentation, {:.0f}% of {}",
                                 100 * kFragmentationP50, FormatGb(allocated)),
                     {}});

  bool assumed = f.seq_len.assumed || f.image_size.assumed || f.optimizer.assumed ||
                 f.precision.assumed || f.checkpointing.assumed || f.batch_size.assumed ||
                 f.max_new_tokens.assumed || !e.assumptions.empty() ||
                 f.architecture == Architecture::kMlp;
  for (const auto* fact : {&f.seq_len.how, &f.image_size.how, &f.optimizer.how, &f.precision.how,
                           &f.checkpointing.how, &f.batch_size.how, &f.max_new_tokens.how}) {
    if (fact->starts_with("assumed")) e.assumptions.push_back(*fact);
  }
  double widen = assumed ? 1.5 : 1.0;
  e.p50_bytes = kCudaContextBytes + (1 + kFragmentationP50) * allocated;
  e.p10_bytes = kCudaContextBytes + static_bytes + 0.8 * dynamic_bytes / widen;
  e.p90_bytes =
      kCudaContextBytes + (1 + kFragmentationP90) * (static_bytes + dynamic_bytes * widen);
  e.bytes_per_sample *= 1 + kFragmentationP50;
  e.allocated_bytes = allocated;
  e.reserved_bytes = (1 + kFragmentationP50) * allocated;
  return e;
}

}  // namespace rightsize::code
