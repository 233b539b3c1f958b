// The model a job builds: Hugging Face configs and from_pretrained names, torchvision/timm
// constructors (also chosen by getattr), and hand-built nn.Transformer, nn.Linear and
// nn.Embedding layers summed into a parameter count. See analyzer.h.
#include <algorithm>
#include <map>

#include "code/analyzer.h"

namespace rightsize::code::internal {

void Analyzer::SetTransformer(const TransformerSpec& spec, SourceLine where, const std::string& how,
                              int rank) {
  if (!Set(facts_.model, std::string(spec.key), where, how, rank)) return;
  facts_.architecture = Architecture::kTransformer;
  Set(facts_.layers, spec.layers, where, how, rank);
  Set(facts_.hidden, spec.hidden, where, how, rank);
  Set(facts_.heads, spec.heads, where, how, rank);
  Set(facts_.vocab, spec.vocab, where, how, rank);
  Set(facts_.ffn, spec.ffn, where, how, rank);
  Set(facts_.max_positions, spec.max_positions, where, how, rank);
  Set(facts_.parameters, spec.parameters, where, how, rank);
  pending_.erase("model");
  // Hugging Face picks SDPA for these families since transformers 4.36.
  if (spec.family == "llama" || spec.family == "mistral" || spec.family == "qwen2") {
    Set(facts_.fused_attention, true, where,
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
                     name != "PretrainedConfig" && name.find("Quant") == std::string_view::npos;
  if (!config_ctor) return false;
  std::string family = Lower(name.substr(0, name.size() - 6));
  static const std::map<std::string, std::string, std::less<>> kDefaults = {
      {"gpt2", "gpt2"},          {"llama", "llama-2-7b"},     {"bert", "bert-base"},
      {"mistral", "mistral-7b"}, {"roberta", "roberta-base"}, {"opt", "opt-125m"}};
  TransformerSpec spec{};
  auto d = kDefaults.find(family);
  if (d != kDefaults.end()) spec = *FindTransformer(d->second);
  auto pick = [&](std::initializer_list<std::string_view> keys, int64_t* out) {
    for (auto k : keys) {
      Value v = KwValue(c, k);
      // A dataclass defined here (nanoGPT's GPTConfig): the value passed, else its default.
      if (ts_node_is_null(Kw(c.file, c.node, k))) v = FieldValue(name, k);
      if (v.IsNumber()) {
        *out = static_cast<int64_t>(v.number);
        return;
      }
      if (!ts_node_is_null(Kw(c.file, c.node, k))) {
        Undecided("model", fmt::format("{}= of {}: {}", k, name, v.reason), where);
      }
    }
  };
  pick({"n_layer", "num_hidden_layers", "num_layers"}, &spec.layers);
  pick({"n_embd", "hidden_size", "d_model"}, &spec.hidden);
  pick({"n_head", "num_attention_heads"}, &spec.heads);
  pick({"vocab_size"}, &spec.vocab);
  pick({"n_inner", "intermediate_size", "d_ff"}, &spec.ffn);
  pick({"n_positions", "max_position_embeddings", "block_size"}, &spec.max_positions);
  if (d == kDefaults.end() && (spec.layers == 0 || spec.hidden == 0)) {
    Undecided("model", fmt::format("{}: an unknown config class without n_layer/hidden_size", name),
              where);
    return true;
  }
  if (spec.ffn == 0) spec.ffn = 4 * spec.hidden;
  bool gated = family == "llama" || family == "mistral";
  spec.parameters = TransformerParameters(spec.layers, spec.hidden, spec.ffn, spec.vocab,
                                          gated ? 0 : spec.max_positions, gated, !gated);
  spec.family = d != kDefaults.end() ? spec.family : "transformer";
  std::string label = fmt::format("{}({} layers, hidden {})", name, spec.layers, spec.hidden);
  std::string how = fmt::format("{} constructor", name);
  if (Set(facts_.model, label, where, how, kRankConfig)) {
    spec.key = "";
    SetTransformer(spec, where, how, kRankConfig);
    facts_.model.value = label;
  }
  return true;
}

bool Analyzer::ExtractPretrained(const CallSite& c) {
  std::string_view name = c.name;
  SourceLine where = Where(c);
  if (!(name == "from_pretrained" || name == "create_model" || name == "get_model")) {
    return false;
  }
  std::string_view owner = c.callee;
  if (owner.find("Tokenizer") != std::string_view::npos ||
      owner.find("Processor") != std::string_view::npos ||
      owner.find("FeatureExtractor") != std::string_view::npos ||
      owner.find("ImageProcessor") != std::string_view::npos) {
    return true;
  }
  Value id = Eval(c.file, Pos(c.node, 0), 0);
  if (ts_node_is_null(Pos(c.node, 0))) id = KwValue(c, "pretrained_model_name_or_path");
  if (id.kind != Value::Kind::kString) {
    if (!facts_.model.known()) {
      Undecided("model", fmt::format("the model name is not a constant ({})", id.reason), where);
    }
    return true;
  }
  SourceLine origin = id.origin.empty() ? where : id.origin;
  std::string how = fmt::format("{}(\"{}\")", c.callee, id.text);
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
  } else if (!facts_.model.known()) {
    Undecided("model", fmt::format("{} is not in the table of known model sizes", id.text), origin);
  }
  Value dtype = KwValue(c, "torch_dtype");
  if (dtype.kind != Value::Kind::kName) dtype = KwValue(c, "dtype");
  if (dtype.kind == Value::Kind::kName) {
    if (dtype.text.ends_with("bfloat16")) {
      Set(facts_.precision, Precision::kBf16, where, "torch_dtype=torch.bfloat16", kRankDefault);
    }
    if (dtype.text.ends_with("float16") && !dtype.text.ends_with("bfloat16")) {
      Set(facts_.precision, Precision::kFp16, where, "torch_dtype=torch.float16", kRankDefault);
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
    bool fused = attn.text != "eager";
    Set(facts_.fused_attention, fused, where, fmt::format("attn_implementation=\"{}\"", attn.text),
        kRankCall);
  }
  return true;
}

bool Analyzer::ExtractVisionModel(const CallSite& c) {
  std::string_view name = c.name;
  SourceLine where = Where(c);
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
      Set(facts_.fused_attention, true, where, "torchvision ViT attention uses SDPA", kRankDefault);
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
    Set(facts_.fused_attention, true, where,
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
      if (linear_where_.empty()) linear_where_ = where;
    } else {
      Undecided("parameters", fmt::format("nn.Linear size {}", !a.known() ? a.reason : b.reason),
                where);
    }
  }
}

void Analyzer::ExtractModelCall(const CallSite& c) {
  if (ExtractHfConfig(c) || ExtractPretrained(c) || ExtractVisionModel(c) ||
      ExtractDynamicModel(c) || ExtractTorchTransformer(c)) {
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
