// The model a job builds: Hugging Face configs and from_pretrained names, torchvision/timm
// constructors (also chosen by getattr), and hand-built nn.Transformer, nn.Linear and
// nn.Embedding layers summed into a parameter count. See analyzer.h.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "code/analyzer.h"

namespace rightsize::code::internal {

void Analyzer::SetTransformer(const TransformerSpec& spec, SourceLine where, const std::string& how,
                              int rank) {
  std::string label = spec.key;
  if (label.empty()) {
    label = fmt::format("{} config ({} layers, hidden {})", spec.family, spec.layers, spec.hidden);
  }
  if (!Set(facts_.model, label, where, how, rank)) return;
  spec_ = spec;
  facts_.architecture = spec.vit ? Architecture::kVit : Architecture::kTransformer;
  Set(facts_.layers, spec.layers + spec.decoder_layers, where, how, rank);
  Set(facts_.hidden, spec.hidden, where, how, rank);
  Set(facts_.heads, spec.heads, where, how, rank);
  Set(facts_.kv_heads, spec.kv_heads, where, how, rank);
  Set(facts_.head_dim, spec.head_dim, where, how, rank);
  if (!spec.vit) {
    Set(facts_.vocab, spec.vocab, where, how, rank);
    Set(facts_.max_positions, spec.max_positions, where, how, rank);
  }
  Set(facts_.ffn, spec.ffn, where, how, rank);
  if (spec.encoder_decoder) Set(facts_.decoder_layers, spec.decoder_layers, where, how, rank);
  Set(facts_.parameters, spec.parameters, where,
      fmt::format("{}; counted from the {} architecture", how, spec.family), rank);
  pending_.erase("model");
  if (spec.vit) {
    Set(facts_.image_size, spec.image_size, where, fmt::format("{}: image_size", how),
        kRankDefault);
    Set(facts_.attention, Attention::kEager, where, "transformers' ViT: eager attention",
        kRankDefault);
  }
  // Hugging Face picks SDPA for these families since transformers 4.36.
  static const std::set<std::string, std::less<>> kSdpa = {"llama",  "mistral", "qwen2", "gemma",
                                                           "gemma2", "phi3",    "phi"};
  if (kSdpa.count(spec.family) != 0) {
    Set(facts_.attention, Attention::kSdpaDefault, where,
        fmt::format("transformers uses SDPA attention for {} by default", spec.family),
        kRankDefault);
  }
}

bool Analyzer::ExtractHfConfig(const CallSite& c) {
  std::string_view name = c.name;
  SourceLine where = Where(c);
  // Hugging Face configs: GPT2Config(n_layer=…), LlamaConfig(…), AutoConfig.from_pretrained.
  bool config_ctor = name.ends_with("Config") && name != "BitsAndBytesConfig" &&
                     name != "LoraConfig" && name != "GenerationConfig" && name != "AutoConfig" &&
                     name != "PretrainedConfig" && name != "SFTConfig" &&
                     name.find("Quant") == std::string_view::npos &&
                     name.find("Peft") == std::string_view::npos;
  if (!config_ctor) return false;
  std::string family = Lower(name.substr(0, name.size() - 6));
  // The keys a config class reads; one written but not evaluable leaves the model undecided.
  static constexpr std::string_view kKeys[] = {"n_layer",
                                               "num_hidden_layers",
                                               "num_layers",
                                               "n_embd",
                                               "hidden_size",
                                               "d_model",
                                               "n_head",
                                               "num_attention_heads",
                                               "vocab_size",
                                               "n_inner",
                                               "d_ff",
                                               "intermediate_size",
                                               "n_positions",
                                               "block_size",
                                               "head_dim",
                                               "num_heads",
                                               "num_key_value_heads",
                                               "tie_word_embeddings",
                                               "ffn_dim",
                                               "d_kv",
                                               "max_position_embeddings"};
  for (auto k : kKeys) {
    if (ts_node_is_null(Kw(c.file, c.node, k))) continue;
    Value v = KwValue(c, k);
    if (!v.known()) Undecided("model", fmt::format("{}= of {}: {}", k, name, v.reason), where);
  }
  ConfigLookup get = [&](std::string_view k) -> std::optional<std::string> {
    Value v = KwValue(c, k);
    // A dataclass defined here (nanoGPT's GPTConfig): the value passed, else its default.
    if (ts_node_is_null(Kw(c.file, c.node, k))) v = FieldValue(name, k);
    switch (v.kind) {
      case Value::Kind::kNumber:
        return fmt::format("{}", v.number);
      case Value::Kind::kBool:
        return v.Truthy() ? "true" : "false";
      case Value::Kind::kString:
        return v.text;
      case Value::Kind::kNone:
        return "null";
      default:
        return std::nullopt;
    }
  };
  auto spec = TransformerFromConfig(get, family);
  if (!spec.ok()) {
    Undecided("model", fmt::format("{}: {}", name, spec.status().message()), where);
    return true;
  }
  std::string how = fmt::format("{} constructor", name);
  spec->key = fmt::format("{}({} layers, hidden {})", name, spec->layers, spec->hidden);
  SetTransformer(*spec, where, how, kRankConfig);
  return true;
}

void Analyzer::ExtractModelConfigFiles() {
  // A Hugging Face config.json among the files read (a local checkpoint's, or one named on the
  // command line): it is what from_pretrained on that folder builds.
  for (const auto& cfg : configs_) {
    auto type = cfg.Find("model_type");
    if (!type || cfg.values.count("model_type") == 0) continue;
    auto spec = TransformerFromConfig(
        [&](std::string_view k) -> std::optional<std::string> {
          auto it = cfg.values.find(std::string(k));
          if (it == cfg.values.end()) return std::nullopt;
          return it->second.text;
        },
        "");
    SourceLine where{cfg.name, type->line};
    if (!spec.ok()) {
      Undecided("model", fmt::format("{}: {}", cfg.name, spec.status().message()), where);
      continue;
    }
    spec->key = fmt::format("{} ({})", cfg.name, spec->family);
    SetTransformer(*spec, where, fmt::format("{}: model_type {}", cfg.name, type->text),
                   kRankConfig);
  }
}

bool Analyzer::ExtractPretrained(const CallSite& c) {
  std::string_view name = c.name;
  SourceLine where = Where(c);
  bool pipeline = name == "pipeline" && c.callee.find('.') == std::string::npos;
  if (!(name == "from_pretrained" || name == "create_model" || name == "get_model" || pipeline)) {
    return false;
  }
  std::string_view owner = c.callee;
  if (owner.find("Tokenizer") != std::string_view::npos ||
      owner.find("Processor") != std::string_view::npos ||
      owner.find("FeatureExtractor") != std::string_view::npos ||
      owner.find("ImageProcessor") != std::string_view::npos ||
      owner.find("Peft") != std::string_view::npos) {
    return true;  // PeftModel.from_pretrained(model, adapters): the model was read before
  }
  Value id = Eval(c.file, Pos(c.node, 0), 0);
  if (ts_node_is_null(Pos(c.node, 0))) id = KwValue(c, "pretrained_model_name_or_path");
  if (pipeline) {
    Value task = ts_node_is_null(Kw(c.file, c.node, "task")) ? id : KwValue(c, "task");
    if (task.kind == Value::Kind::kString && task.text.find("generation") != std::string::npos) {
      generates_ = true;
    }
    id = KwValue(c, "model");
    if (ts_node_is_null(Kw(c.file, c.node, "model"))) id = Eval(c.file, Pos(c.node, 1), 0);
    SetNumber(facts_.batch_size, KwValue(c, "batch_size"), where, "batch_size", kRankCall);
    // pipeline(model=model): a model object loaded before (its from_pretrained decides the
    // model and says why when it cannot), not a name to look up.
    if (id.kind != Value::Kind::kString) return true;
  }
  if (id.kind != Value::Kind::kString) {
    if (!facts_.model.known()) {
      Undecided("model", fmt::format("the model name is not a constant ({})", id.reason), where);
    }
    return true;
  }
  SourceLine origin = id.origin.empty() ? where : id.origin;
  std::string how = fmt::format("{}(\"{}\")", c.callee, id.text);
  // A local checkpoint: its config.json, read as transformers reads it.
  std::string local_config = (std::filesystem::path(id.text) / "config.json").string();
  std::error_code ec;
  if (std::filesystem::is_regular_file(std::filesystem::path(code_dir_) / local_config, ec)) {
    config_refs_.push_back(local_config);
  }
  if (auto v = FindVisionModel(id.text)) {
    if (Set(facts_.model, id.text, origin, how, kRankCall)) {
      facts_.architecture = v->layers > 0 ? Architecture::kVit : Architecture::kCnn;
      Set(facts_.parameters, v->parameters, origin, how, kRankCall);
      pending_.erase("model");
    }
  } else if (auto spec = FindTransformer(id.text)) {
    // An explicit config (GPT2Config(…)) describes the model better than its name.
    if (!facts_.model.known() || facts_.model.rank < kRankConfig) {
      SetTransformer(*spec, origin, how, kRankCall);
    }
    if (c.callee.find("Config") == std::string::npos) {
      // Config overrides passed to from_pretrained.
      Value layers = KwValue(c, "n_layer");
      if (layers.IsNumber()) {
        Set(facts_.layers, static_cast<int64_t>(layers.number), where, how, kRankCall);
      }
    }
  } else if (!facts_.model.known() && !std::filesystem::is_regular_file(
                                          std::filesystem::path(code_dir_) / local_config, ec)) {
    Undecided("model", fmt::format("{} is not in the table of known model sizes", id.text), origin);
  }
  if (pipeline) {
    // pipeline(..., model_kwargs={"torch_dtype": …}) is not read; torch_dtype= is.
    Value dtype = KwValue(c, "torch_dtype");
    if (dtype.kind == Value::Kind::kName && dtype.text.ends_with("16")) {
      Precision p = dtype.text.ends_with("bfloat16") ? Precision::kBf16 : Precision::kFp16;
      Set(facts_.precision, p, where, fmt::format("pipeline(torch_dtype={})", dtype.text),
          kRankDefault);
      Set(facts_.weight_dtype, p, where, fmt::format("pipeline(torch_dtype={})", dtype.text),
          kRankCall);
    }
    return true;
  }
  Value dtype = KwValue(c, "torch_dtype");
  if (dtype.kind != Value::Kind::kName) dtype = KwValue(c, "dtype");
  if (dtype.kind == Value::Kind::kName) {
    if (dtype.text.ends_with("bfloat16")) {
      Set(facts_.precision, Precision::kBf16, where, "torch_dtype=torch.bfloat16", kRankDefault);
      Set(facts_.weight_dtype, Precision::kBf16, where, "torch_dtype=torch.bfloat16", kRankCall);
    }
    if (dtype.text.ends_with("float16") && !dtype.text.ends_with("bfloat16")) {
      Set(facts_.precision, Precision::kFp16, where, "torch_dtype=torch.float16", kRankDefault);
      Set(facts_.weight_dtype, Precision::kFp16, where, "torch_dtype=torch.float16", kRankCall);
    }
    if (dtype.text.ends_with("float32")) {
      Set(facts_.weight_dtype, Precision::kFp32, where, "torch_dtype=torch.float32", kRankCall);
    }
  }
  if (KwValue(c, "load_in_8bit").Truthy()) {
    Set(facts_.precision, Precision::kInt8, where, "load_in_8bit=True", kRankConfig);
  }
  if (KwValue(c, "load_in_4bit").Truthy()) {
    Set(facts_.precision, Precision::kInt4, where, "load_in_4bit=True", kRankConfig);
  }
  Value attn = KwValue(c, "attn_implementation");
  if (attn.kind == Value::Kind::kString) {
    Attention a = attn.text == "eager"               ? Attention::kEager
                  : attn.text == "flash_attention_2" ? Attention::kFlashAttention
                                                     : Attention::kSdpa;
    Set(facts_.attention, a, where, fmt::format("attn_implementation=\"{}\"", attn.text),
        kRankCall);
  }
  return true;
}

void Analyzer::SetDetector(const DetectorSpec& d, SourceLine where, const std::string& how) {
  if (!Set(facts_.model, d.name, where, how, kRankCall)) return;
  facts_.architecture = Architecture::kCnn;
  Set(facts_.parameters, d.parameters, where,
      fmt::format("{}; counted from the backbone, FPN and heads", how), kRankCall);
  Set(facts_.image_activation_bytes, d.activation_bytes_per_image, where, how, kRankCall);
  Set(facts_.roi_activation_bytes, d.roi_bytes_per_image, where, how, kRankCall);
  pending_.erase("model");
}

// An MMDetection config (a Python file of dict(...) calls, named on tools/train.py's command
// line): the detector and its backbone, the training resize, samples_per_gpu / batch_size, SGD
// and fp16 (fp16 = dict(loss_scale=…) or optim_wrapper=dict(type='AmpOptimWrapper')).
bool Analyzer::ExtractMmdetConfig(const CallSite& c) {
  if (c.callee != "dict") return false;
  SourceLine where = Where(c);
  Value type = KwValue(c, "type");
  const std::string& t = type.text;
  if (type.kind != Value::Kind::kString) {
    SetNumber(facts_.batch_size, KwValue(c, "samples_per_gpu"), where, "samples_per_gpu",
              kRankCall);
    // MMEngine: train_dataloader = dict(batch_size=2, dataset=dict(…)).
    if (!ts_node_is_null(Kw(c.file, c.node, "dataset"))) {
      SetNumber(facts_.batch_size, KwValue(c, "batch_size"), where, "batch_size", kRankCall);
    }
    // fp16 = dict(loss_scale=512.): MMCV's Fp16OptimizerHook, mixed precision.
    TSNode parent = ts_node_parent(c.node);
    if (!ts_node_is_null(Kw(c.file, c.node, "loss_scale")) && TypeOf(parent) == "assignment" &&
        Text(c.file, Field(parent, "left")) == "fp16") {
      Set(facts_.precision, Precision::kMixedFp16, where, "fp16 = dict(loss_scale=…)", kRankCall);
    }
    return true;
  }
  if (t == "FasterRCNN" || t == "RetinaNet" || t == "MaskRCNN") {
    TSNode bb = Kw(c.file, c.node, "backbone");
    int64_t depth = 0, groups = 1, width = 64;
    // MMDetection's ResNet: frozen_stages=1 and BN in eval mode with trainable weights (which
    // saves its input); on a GPU the focal loss is mmcv's CUDA kernel.
    DetectorTraining how{.frozen_bn = false, .frozen_stages = 1, .fused_focal_loss = true};
    if (!ts_node_is_null(bb) && TypeOf(bb) == "call") {
      Value d = Eval(c.file, Kw(c.file, bb, "depth"), 0);
      Value g = Eval(c.file, Kw(c.file, bb, "groups"), 0);
      Value w = Eval(c.file, Kw(c.file, bb, "base_width"), 0);
      Value fs = Eval(c.file, Kw(c.file, bb, "frozen_stages"), 0);
      if (d.IsNumber()) depth = static_cast<int64_t>(d.number);
      if (g.IsNumber()) groups = static_cast<int64_t>(g.number);
      if (w.IsNumber()) width = static_cast<int64_t>(w.number);
      if (fs.IsNumber() && fs.number >= -1 && fs.number <= 4) {
        how.frozen_stages = static_cast<int>(fs.number);
      }
    }
    auto spec = DetectorOf(t, depth, groups, width, 80, how);
    if (!spec.ok()) {
      Undecided("model", fmt::format("dict(type='{}'): {}", t, spec.status().message()), where);
      return true;
    }
    SetDetector(*spec, where,
                fmt::format("MMDetection dict(type='{}', backbone depth={}{})", t, depth,
                            groups > 1 ? fmt::format(", groups={}x{}d", groups, width) : ""));
    Set(facts_.training, true, where, "an MMDetection training config", kRankDefault);
    Set(facts_.framework, std::string("MMDetection"), where, "an MMDetection config", kRankDefault);
    pending_.erase("framework");
    // tools/train.py wraps the detector in MMDistributedDataParallel, one process per GPU.
    Set(facts_.parallelism, std::string("MMDetection (DDP)"), where,
        "MMDetection's distributed training: DDP, one process per GPU", kRankDefault);
    return true;
  }
  if (t == "Resize" || t == "RandomResize") {
    TSNode scale = Kw(c.file, c.node, "img_scale");
    if (ts_node_is_null(scale)) scale = Kw(c.file, c.node, "scale");
    if (!ts_node_is_null(scale) && TypeOf(scale) == "tuple" && NamedCount(scale) == 2) {
      Value w = Eval(c.file, Named(scale, 0), 0), h = Eval(c.file, Named(scale, 1), 0);
      if (w.IsNumber() && h.IsNumber() && w.number > 0 && h.number > 0) {
        auto side = static_cast<int64_t>(std::lround(std::sqrt(w.number * h.number)));
        Set(facts_.image_size, side, where,
            fmt::format("Resize to {}×{} (the area of a {}² image)", w.number, h.number, side),
            kRankCall);
      }
    }
    return true;
  }
  if (t == "SGD" && facts_.framework.value == "MMDetection") {
    bool momentum = KwValue(c, "momentum").IsNumber() && KwValue(c, "momentum").number > 0;
    Set(facts_.optimizer, momentum ? Optimizer::kSgdMomentum : Optimizer::kSgd, where,
        "dict(type='SGD')", kRankCall);
  }
  if (t == "AmpOptimWrapper") {
    Set(facts_.precision, Precision::kMixedFp16, where, "AmpOptimWrapper", kRankCall);
  }
  return true;
}

// detectron2: a model-zoo config named by its path (model_zoo.get_config_file /
// get_config("COCO-Detection/faster_rcnn_R_50_FPN_3x.yaml"), cfg.merge_from_file(…)) and
// cfg.SOLVER.IMS_PER_BATCH, the batch over every GPU (the zoo's configs: 16).
bool Analyzer::ExtractDetectron2Config(const CallSite& c) {
  if (c.name != "get_config_file" && c.name != "get_config" && c.name != "merge_from_file") {
    return false;
  }
  TSNode args = Field(c.node, "arguments");
  if (ts_node_is_null(args) || NamedCount(args) == 0) return false;
  Value path = Eval(c.file, Named(args, 0), 0);
  if (path.kind != Value::Kind::kString || !path.text.ends_with(".yaml")) return false;
  std::string_view file = path.text;
  if (auto slash = file.rfind('/'); slash != std::string_view::npos) file.remove_prefix(slash + 1);
  std::string_view type = file.starts_with("faster_rcnn_") ? "FasterRCNN"
                          : file.starts_with("retinanet_") ? "RetinaNet"
                          : file.starts_with("mask_rcnn_") ? "MaskRCNN"
                                                           : "";
  if (type.empty()) return false;
  SourceLine where = Where(c);
  Set(facts_.framework, std::string("detectron2"), where, "a detectron2 model-zoo config",
      kRankCall);
  pending_.erase("framework");
  if (file.find("_FPN") == std::string_view::npos) {
    Undecided("model", fmt::format("{}: only FPN backbones are modelled, not C4 or DC5", file),
              where);
    return true;
  }
  int64_t depth = 0, groups = 1, width = 64;
  if (file.find("_R_50_") != std::string_view::npos) depth = 50;
  if (file.find("_R_101_") != std::string_view::npos) depth = 101;
  if (file.find("_X_101_32x8d_") != std::string_view::npos) depth = 101, groups = 32, width = 8;
  // detectron2's ResNets: FrozenBN, stem and res2 frozen (FREEZE_AT=2); RetinaNet's focal loss
  // is fvcore's, written in Python.
  auto spec = DetectorOf(type, depth, groups, width, 80,
                         {.frozen_bn = true, .frozen_stages = 1, .fused_focal_loss = false});
  if (!spec.ok()) {
    Undecided("model", fmt::format("{}: {}", file, spec.status().message()), where);
    return true;
  }
  SetDetector(*spec, where, fmt::format("detectron2 {} (FrozenBN, FREEZE_AT=2)", file));
  Set(facts_.image_size, int64_t{1033}, where,
      "detectron2 resize: short side up to 800, long side up to 1333 (the area of a 1033² image)",
      kRankDefault);
  Set(facts_.training, true, where, "a detectron2 model-zoo config", kRankDefault);
  Set(facts_.optimizer, Optimizer::kSgdMomentum, where,
      "detectron2's solver: SGD with momentum 0.9", kRankDefault);
  Set(facts_.parallelism, std::string("detectron2 (DDP)"), where,
      "detectron2 wraps the model in DDP, one process per GPU", kRankDefault);
  // The batch is over every GPU: each process takes its share.
  const int processes = std::max(1, facts_.processes.value.value_or(1));
  std::string key;  // of the names that set the batch, the first in order
  for (const auto& [name, list] : bindings_) {
    if (name.ends_with("SOLVER.IMS_PER_BATCH") && !list.empty() && (key.empty() || name < key)) {
      key = name;
    }
  }
  if (!key.empty()) {
    const Binding& b = bindings_.at(key).back();
    Value total = Eval(b.file, b.value, 0);
    if (total.IsNumber() && total.number >= 1 && total.number < 1e9) {
      Set(facts_.batch_size, std::max<int64_t>(1, std::llround(total.number) / processes),
          Where(b.file, b.value),
          fmt::format("{}={} over {} process{}", key, total.number, processes,
                      processes == 1 ? "" : "es"),
          kRankCall);
    } else {
      Undecided("batch_size",
                fmt::format("{}: {}", key, total.known() ? "not a batch size" : total.reason),
                Where(b.file, b.value));
    }
  } else {
    Set(facts_.batch_size, std::max<int64_t>(1, 16 / processes), where,
        fmt::format("SOLVER.IMS_PER_BATCH=16 (the model zoo's) over {} process{}", processes,
                    processes == 1 ? "" : "es"),
        kRankDefault);
  }
  return true;
}

bool Analyzer::ExtractVisionModel(const CallSite& c) {
  std::string_view name = c.name;
  SourceLine where = Where(c);
  // Pretrained unless both the weights and the backbone's are None (or pretrained_backbone=
  // False): then the BNs train and so does every stage.
  auto is = [&](std::string_view k, Value::Kind kind, double number = 0) {
    Value v = KwValue(c, k);
    return v.kind == kind && (kind != Value::Kind::kBool || v.number == number);
  };
  bool has_weights =
      !ts_node_is_null(Kw(c.file, c.node, "weights")) && !is("weights", Value::Kind::kNone);
  bool scratch = !has_weights && !is("pretrained", Value::Kind::kBool, 1) &&
                 (is("weights_backbone", Value::Kind::kNone) ||
                  is("pretrained_backbone", Value::Kind::kBool, 0));
  DetectorTraining how{
      .frozen_bn = !scratch, .frozen_stages = scratch ? -1 : 1, .torchvision_heads = true};
  Value layers = KwValue(c, "trainable_backbone_layers");
  if (!scratch && layers.IsNumber() && layers.number >= 0 && layers.number <= 5) {
    how.frozen_stages = 4 - static_cast<int>(layers.number);
  }
  if (auto d = FindTorchvisionDetector(name, how)) {
    SetDetector(*d, where,
                fmt::format("{}(){}", c.callee,
                            scratch ? ", from scratch: every BN and stage trains"
                                    : fmt::format(", pretrained: frozen BN, {} stages train",
                                                  4 - how.frozen_stages)));
    // GeneralizedRCNNTransform resizes to min_size 800, max_size 1333.
    Set(facts_.image_size, int64_t{1033}, where,
        "torchvision detection resize 1333×800 (the area of a 1033² image)", kRankDefault);
    return true;
  }
  // torchvision / timm constructors by name.
  auto v = FindVisionModel(name);
  if (!v) return false;
  if (Set(facts_.model, std::string(name), where, fmt::format("{}()", c.callee), kRankCall)) {
    facts_.architecture = v->layers > 0 ? Architecture::kVit : Architecture::kCnn;
    Set(facts_.parameters, v->parameters, where, fmt::format("{}() size table", name), kRankCall);
    if (v->layers > 0) {
      Set(facts_.layers, v->layers, where, "ViT table", kRankCall);
      Set(facts_.hidden, v->hidden, where, "ViT table", kRankCall);
      Set(facts_.heads, v->heads, where, "ViT table", kRankCall);
      Set(facts_.attention, Attention::kSdpa, where, "torchvision ViT attention uses SDPA",
          kRankDefault);
    }
    pending_.erase("model");
  }
  return true;
}

bool Analyzer::ExtractDynamicModel(const CallSite& c) {
  SourceLine where = Where(c);
  // A model built by name at run time: getattr(models, name)(), models.__dict__[name]().
  TSNode fn = Field(c.node, "function");
  if (!(TypeOf(fn) == "call" || TypeOf(fn) == "subscript")) return false;
  std::string inner = Collapse(files_[c.file].tree.Text(fn));
  if (inner.starts_with("getattr(") || inner.find("__dict__[") != std::string::npos) {
    TSNode arg = TypeOf(fn) == "call" ? Pos(fn, 1) : Field(fn, "subscript");
    Value chosen = Eval(c.file, arg, 0);
    if (chosen.kind == Value::Kind::kString) {
      if (auto v = FindVisionModel(chosen.text)) {
        std::string how = fmt::format("{} with {} = \"{}\" ({})", inner, Text(c.file, arg),
                                      chosen.text, chosen.how);
        if (Set(facts_.model, chosen.text, chosen.origin, how, kRankCall)) {
          facts_.architecture = v->layers > 0 ? Architecture::kVit : Architecture::kCnn;
          Set(facts_.parameters, v->parameters, chosen.origin, how, kRankCall);
          pending_.erase("model");
        }
        return true;
      }
    }
    if (!facts_.model.known()) {
      Undecided("model",
                fmt::format("built dynamically by {}: {}", inner,
                            chosen.known() ? "a name not in the size tables" : chosen.reason),
                where);
    }
  }
  return true;
}

bool Analyzer::ExtractTorchTransformer(const CallSite& c) {
  std::string_view name = c.name;
  SourceLine where = Where(c);
  // Hand-built PyTorch models.
  // nn.Transformer*Layer(d_model, nhead, dim_feedforward, …) and nn.Transformer(d_model, nhead,
  // num_encoder_layers, num_decoder_layers, dim_feedforward, …): PyTorch's positions.
  auto arg = [&](std::string_view key, uint32_t position) {
    TSNode kw = Kw(c.file, c.node, key);
    return Eval(c.file, ts_node_is_null(kw) ? Pos(c.node, position) : kw, 0);
  };
  auto given = [&](std::string_view key, uint32_t position) {
    return !ts_node_is_null(Kw(c.file, c.node, key)) || !ts_node_is_null(Pos(c.node, position));
  };
  bool nn_transformer = name == "Transformer" && c.callee.find("nn.") != std::string::npos;
  if (name == "TransformerEncoderLayer" || name == "TransformerDecoderLayer" || nn_transformer) {
    const uint32_t ffn_position = nn_transformer ? 4 : 2;
    Value d_model = arg("d_model", 0);
    Value nhead = arg("nhead", 1);
    Value ffn = arg("dim_feedforward", ffn_position);
    if (nn_transformer && !given("d_model", 0)) {
      d_model = FromText("512", where, "nn.Transformer default d_model=512");
    }
    if (nn_transformer && !given("nhead", 1)) {
      nhead = FromText("8", where, "nn.Transformer default nhead=8");
    }
    SetNumber(facts_.hidden, d_model, where, "model", kRankCall);
    SetNumber(facts_.heads, nhead, where, "model", kRankCall);
    if (ffn.IsNumber()) {
      SetNumber(facts_.ffn, ffn, where, "model", kRankCall);
    } else if (!ffn.known() && !given("dim_feedforward", ffn_position)) {
      Set(facts_.ffn, int64_t{2048}, where, "PyTorch default dim_feedforward=2048", kRankCall);
    }
    if (facts_.hidden.known() && facts_.ffn.known()) {
      auto h = static_cast<double>(*facts_.hidden.value);
      auto f = static_cast<double>(*facts_.ffn.value);
      // Self-attention (4h² + 4h), the two feed-forward layers, two LayerNorms; a decoder layer
      // adds cross-attention and a third LayerNorm.
      double encoder_layer = 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h;
      double decoder_layer = encoder_layer + 4 * h * h + 4 * h + 2 * h;
      double times = Multiplicity(c);
      if (nn_transformer) {
        Value enc = arg("num_encoder_layers", 2);
        Value dec = arg("num_decoder_layers", 3);
        double n_enc = enc.IsNumber() ? enc.number : 6;  // PyTorch's defaults
        double n_dec = dec.IsNumber() ? dec.number : 6;
        if ((!enc.IsNumber() && given("num_encoder_layers", 2)) ||
            (!dec.IsNumber() && given("num_decoder_layers", 3))) {
          Undecided(
              "model",
              fmt::format("nn.Transformer layers: {}", !enc.IsNumber() ? enc.reason : dec.reason),
              where);
        }
        // Both stacks and their final LayerNorms.
        nn_transformer_params_ += times * (n_enc * encoder_layer + n_dec * decoder_layer + 4 * h);
        stacked_layers_ += times * (n_enc + n_dec);
        Set(facts_.layers, static_cast<int64_t>(stacked_layers_), where,
            fmt::format("nn.Transformer: {} encoder + {} decoder layers", n_enc, n_dec), kRankCall);
        Set(facts_.model, std::string("nn.Transformer"), where, fmt::format("{}()", c.callee),
            kRankName);
      } else if (name == "TransformerEncoderLayer") {
        encoder_layer_params_ += times * encoder_layer;
      } else {
        decoder_layer_params_ += times * decoder_layer;
      }
      layer_where_ = where;
    }
    facts_.architecture = Architecture::kTransformer;
    Set(facts_.attention, Attention::kSdpa, where,
        "nn.MultiheadAttention inside nn.Transformer*Layer calls SDPA", kRankDefault);
    return true;
  }
  if (name == "TransformerEncoder" || name == "TransformerDecoder") {
    Value n = arg("num_layers", 1);
    if (!n.IsNumber()) {
      SetNumber(facts_.layers, n, where, "model", kRankCall);
      return true;
    }
    // The layer passed is cloned num_layers times; an encoder and a decoder stack add up.
    double layers = n.number * Multiplicity(c);
    (name == "TransformerEncoder" ? encoder_layers_ : decoder_layers_) += layers;
    stacked_layers_ += layers;
    Value total = n;
    total.number = stacked_layers_;
    SetNumber(facts_.layers, total, where, "model", kRankCall);
    Set(facts_.model, std::string("nn.") + std::string(name), where, fmt::format("{}()", c.callee),
        kRankName);
    return true;
  }
  return false;
}

void Analyzer::ExtractTorchLayer(const CallSite& c) {
  std::string_view name = c.name;
  SourceLine where = Where(c);
  if (name == "Embedding" && c.callee.find("nn.") != std::string::npos) {
    Value n = Eval(c.file, Pos(c.node, 0), 0);
    Value d = Eval(c.file, Pos(c.node, 1), 0);
    if (n.IsNumber() && d.IsNumber()) {
      embedding_params_ += Multiplicity(c) * n.number * d.number;
      // A vocabulary only if an output layer computes logits over it (ResolveVocabulary).
      if (n.number > 1000) embedding_rows_.emplace_back(n, where);
    }
    return;
  }
  if (name == "linear" && !ts_node_is_null(Pos(c.node, 1)) &&
      Text(c.file, Pos(c.node, 1)).ends_with(".weight")) {
    tied_head_ = true;  // F.linear(x, self.wte.weight): a head tied to the embedding
    return;
  }
  if (name == "Linear" && c.callee.find("nn.") != std::string::npos) {
    Value a = Eval(c.file, Pos(c.node, 0), 0);
    Value b = Eval(c.file, Pos(c.node, 1), 0);
    if (a.IsNumber() && b.IsNumber()) {
      bool bias = !(KwValue(c, "bias").kind == Value::Kind::kBool && !KwValue(c, "bias").Truthy());
      linear_params_ += Multiplicity(c) * (a.number * b.number + (bias ? b.number : 0));
      linear_outputs_.push_back(b.number);
      linear_output_sum_ += Multiplicity(c) * b.number;
      linear_widest_ = std::max({linear_widest_, a.number, b.number});
      if (linear_where_.empty()) linear_where_ = where;
    } else {
      Undecided("parameters", fmt::format("nn.Linear size {}", !a.known() ? a.reason : b.reason),
                where);
    }
  }
}

void Analyzer::ExtractModelCall(const CallSite& c) {
  if (ExtractMmdetConfig(c) || ExtractDetectron2Config(c) || ExtractHfConfig(c) ||
      ExtractPretrained(c) || ExtractVisionModel(c) || ExtractDynamicModel(c) ||
      ExtractTorchTransformer(c)) {
    return;
  }
  ExtractTorchLayer(c);
}

void Analyzer::ResolveVocabulary() {
  // A text classifier embeds a large vocabulary but never computes b·s·V logits: only an
  // embedding whose rows an nn.Linear (or a tied F.linear) produces is a vocabulary.
  for (const auto& [rows, where] : embedding_rows_) {
    bool head = tied_head_ || std::find(linear_outputs_.begin(), linear_outputs_.end(),
                                        rows.number) != linear_outputs_.end();
    if (!head) continue;
    SetNumber(facts_.vocab, rows, where, "vocab", kRankCall);
    return;
  }
}

}  // namespace rightsize::code::internal
