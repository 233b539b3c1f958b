#include "code/memory_model.h"

#include <fmt/format.h>

#include <cmath>

#include "code/model_zoo.h"

namespace rightsize::code {
namespace {

struct PerParam {
  double weights = 0, gradients = 0, optimizer = 0;
  std::string weights_why, gradients_why, optimizer_why;
};

// Bytes per parameter of each model state.
PerParam BytesPerParameter(Precision p, bool training, Optimizer o) {
  PerParam b;
  bool mixed = p == Precision::kMixedFp16 || p == Precision::kMixedBf16;
  bool half = p == Precision::kFp16 || p == Precision::kBf16;
  if (!training) {
    b.weights = p == Precision::kInt8 ? 1 : p == Precision::kInt4 ? 0.5 : half ? 2 : 4;
    b.weights_why = fmt::format("{} B ({} weights, inference)", b.weights, NameOf(p));
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
  if (mixed) {
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

// The terms that do not grow with the batch: weights, gradients (and DDP's bucket copy),
// optimizer states, each sharded by the ZeRO stage. Returns their sum.
double StaticTerms(const CodeFacts& f, bool training, Precision precision, Optimizer optimizer,
                   double params, MemoryEstimate* e) {
  const double d = e->data_parallel_gpus;
  int stage = f.zero_stage.value.value_or(0);
  PerParam per = BytesPerParameter(precision, training, optimizer);

  auto shard = [&](double bytes, int from_stage) {
    return stage >= from_stage ? bytes / d : bytes;
  };
  auto split_note = [&](int from_stage) {
    return stage >= from_stage && d > 1 ? fmt::format(" ÷ {} GPUs (ZeRO-{})", d, stage) : "";
  };

  MemoryTerm weights{
      "weights",
      shard(params * per.weights, 3),
      fmt::format("{} params × {}{}", Millions(params), per.weights_why, split_note(3)),
      {}};
  AddLine(&weights.lines, f.parameters);
  AddLine(&weights.lines, f.model);
  AddLine(&weights.lines, f.precision);
  AddLine(&weights.lines, f.zero_stage);
  e->terms.push_back(weights);
  double static_bytes = weights.bytes;
  if (training && per.gradients > 0) {
    MemoryTerm grads{
        "gradients",
        shard(params * per.gradients, 2),
        fmt::format("{} params × {}{}", Millions(params), per.gradients_why, split_note(2)),
        {}};
    AddLine(&grads.lines, f.precision);
    AddLine(&grads.lines, f.zero_stage);
    e->terms.push_back(grads);
    static_bytes += grads.bytes;
    std::string_view par = f.parallelism.value.value_or("none");
    if (d > 1 && stage == 0 && par != "FSDP" && par != "DeepSpeed") {
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
    MemoryTerm opt{"optimizer states",
                   offload ? 0 : shard(params * per.optimizer, 1),
                   offload ? "offloaded to CPU memory"
                           : fmt::format("{} params × {}{}", Millions(params), per.optimizer_why,
                                         split_note(1)),
                   {}};
    AddLine(&opt.lines, f.optimizer);
    AddLine(&opt.lines, f.zero_stage);
    AddLine(&opt.lines, f.optimizer_offload);
    e->terms.push_back(opt);
    static_bytes += opt.bytes;
  }

  return static_bytes;
}

// The terms that grow with the batch: activations (transformer, ViT and CNN formulas) and
// logits; sets *dynamic_bytes to their sum. NotFound when a shape they need is undetermined.
Status ActivationTerms(const CodeFacts& f, bool training, Precision precision, MemoryEstimate* e,
                       double* dynamic_bytes) {
  double act = 0;
  MemoryTerm acts{"activations", 0, "", {}};
  MemoryTerm logits{"logits", 0, "", {}};
  bool half_acts = precision != Precision::kFp32;
  Checkpointing ckpt = f.checkpointing.value.value_or(Checkpointing::kNone);
  bool fused = f.fused_attention.value.value_or(false);
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
    double full_layer = s * b * h * (34 + (fused ? 0 : 5 * a * s / h));
    std::string per_layer;
    if (!training) {
      act = full_layer * dtype_factor;  // one layer's worth is live at a time
      per_layer = "one layer live (inference)";
    } else if (ckpt == Checkpointing::kFull) {
      act = (layers * 2 * s * b * h + full_layer) * dtype_factor;
      per_layer = "2·s·b·h per layer (full checkpointing) + one layer recomputed";
    } else {
      act = layers * full_layer * dtype_factor;
      per_layer = fused ? "34·s·b·h per layer (fused attention)" : "s·b·h·(34 + 5·a·s/h) per layer";
    }
    acts.formula = fmt::format("{}; L={} s={} b={} h={} a={}{}", per_layer, layers, s, b, h, a,
                               half_acts ? "" : ", ×2 for fp32");
    acts.bytes = act;
    e->bytes_per_sample = act / b;
    if (f.vocab.known() && f.architecture == Architecture::kTransformer) {
      double v = static_cast<double>(*f.vocab.value);
      logits.bytes = b * s * v * 4 * (training ? 2 : 1);
      logits.formula = fmt::format("b·s·V·4{} = {}·{}·{}·4{}", training ? "·2" : "", b, s, v,
                                   training ? "·2 (fp32 logits and their gradient)" : "");
      e->bytes_per_sample += logits.bytes / b;
      AddLine(&logits.lines, f.vocab);
      AddLine(&logits.lines, f.batch_size);
      AddLine(&logits.lines, f.seq_len);
    }
  } else if (f.architecture == Architecture::kCnn) {
    RS_RETURN_IF_ERROR(need(f.batch_size.known(), "batch_size"));
    auto spec = FindVisionModel(f.model.value.value_or(""));
    double per_image = spec ? spec->activation_bytes_per_image : 100e6;
    double b = static_cast<double>(*f.batch_size.value);
    double img = static_cast<double>(f.image_size.value.value_or(224));
    double area = (img / 224) * (img / 224);
    double factor = (half_acts ? 0.5 : 1) * (!training                      ? 0.1
                                             : ckpt == Checkpointing::kFull ? 0.3
                                                                            : 1);
    act = per_image * area * b * factor;
    acts.formula = fmt::format("{:.0f} MB/image at 224² (fp32) × ({}/224)² × b={}{}{}",
                               per_image / 1e6, img, b, half_acts ? " × 0.5 (16-bit)" : "",
                               !training                      ? " × 0.1 (inference)"
                               : ckpt == Checkpointing::kFull ? " × 0.3 (checkpointing)"
                                                              : "");
    acts.bytes = act;
    e->bytes_per_sample = act / b;
  } else {
    acts.formula = "not modelled for this architecture";
    e->assumptions.push_back("activations of a custom model are not modelled: the range is wider");
  }
  AddLine(&acts.lines, f.batch_size);
  AddLine(&acts.lines, f.seq_len);
  AddLine(&acts.lines, f.image_size);
  AddLine(&acts.lines, f.model);
  AddLine(&acts.lines, f.checkpointing);
  AddLine(&acts.lines, f.fused_attention);
  AddLine(&acts.lines, f.precision);
  e->terms.push_back(acts);
  if (logits.bytes > 0) e->terms.push_back(logits);
  *dynamic_bytes = acts.bytes + logits.bytes;
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
  double static_bytes = StaticTerms(f, training, precision, optimizer, params, &e);
  double dynamic_bytes = 0;
  RS_RETURN_IF_ERROR(ActivationTerms(f, training, precision, &e, &dynamic_bytes));

  e.terms.push_back(
      {"CUDA context", kCudaContextBytes, "CUDA context and cuBLAS/cuDNN workspaces", {}});
  double allocated = static_bytes + dynamic_bytes;
  e.terms.push_back({"allocator overhead",
                     kFragmentationP50 * allocated,
                     fmt::format("caching-allocator fragmentation, {:.0f}% of {}",
                                 100 * kFragmentationP50, FormatGb(allocated)),
                     {}});

  bool assumed = f.seq_len.assumed || f.image_size.assumed || f.optimizer.assumed ||
                 f.precision.assumed || f.checkpointing.assumed || !e.assumptions.empty() ||
                 f.architecture == Architecture::kMlp;
  for (const auto* fact : {&f.seq_len.how, &f.image_size.how, &f.optimizer.how, &f.precision.how,
                           &f.checkpointing.how}) {
    if (fact->starts_with("assumed")) e.assumptions.push_back(*fact);
  }
  double widen = assumed ? 1.5 : 1.0;
  e.p50_bytes = kCudaContextBytes + (1 + kFragmentationP50) * allocated;
  e.p10_bytes = kCudaContextBytes + static_bytes + 0.8 * dynamic_bytes / widen;
  e.p90_bytes =
      kCudaContextBytes + (1 + kFragmentationP90) * (static_bytes + dynamic_bytes * widen);
  e.bytes_per_sample *= 1 + kFragmentationP50;
  return e;
}

}  // namespace rightsize::code
