// torchtune jobs: `tune run [--nproc_per_node N] RECIPE --config FILE [key=value …]`. The
// recipe is torchtune's; what it trains and how is in the YAML config (and the overrides after
// it), so the facts come from there, not from Python code.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "code/analyzer.h"
#include "code/config_file.h"
#include "code/model_zoo.h"
#include "code/python_value.h"

namespace rightsize::code::internal {
namespace fs = std::filesystem;

namespace {

// torchtune's model builder ("torchtune.models.llama3_1.lora_llama3_1_8b") as the Hub names
// the model ("llama-3.1-8b"): the family's letters, its version (digits joined by dots), the
// size. Variants are tried in turn against the table of known models.
std::vector<std::string> HubNamesOf(std::string builder) {
  if (auto dot = builder.rfind('.'); dot != std::string::npos) builder = builder.substr(dot + 1);
  for (std::string_view prefix : {"qlora_", "lora_"}) {
    if (builder.starts_with(prefix)) builder = builder.substr(prefix.size());
  }
  for (std::string_view suffix : {"_base", "_instruct"}) {
    if (builder.ends_with(suffix)) builder.resize(builder.size() - suffix.size());
  }
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= builder.size()) {
    size_t end = builder.find('_', start);
    if (end == std::string::npos) end = builder.size();
    parts.push_back(builder.substr(start, end - start));
    start = end + 1;
  }
  if (parts.empty() || parts[0].empty()) return {};
  // "llama3" → family "llama", version "3"; following all-digit parts extend the version.
  std::string family = parts[0], version;
  size_t digit = family.find_first_of("0123456789");
  if (digit != std::string::npos) {
    version = family.substr(digit);
    family.resize(digit);
  }
  size_t i = 1;
  for (; i < parts.size() && !parts[i].empty() &&
         std::all_of(parts[i].begin(), parts[i].end(),
                     [](unsigned char c) { return std::isdigit(c); });
       ++i) {
    version += (version.empty() ? "" : ".") + parts[i];
  }
  std::string rest;
  for (; i < parts.size(); ++i) rest += "-" + parts[i];
  std::vector<std::string> names;
  if (version.empty()) {
    names.push_back(family + rest);
  } else {
    names.push_back(family + "-" + version + rest);  // llama-3.1-8b, gemma-2-9b, phi-3-mini
    names.push_back(family + version + rest);        // qwen2.5-7b
  }
  return names;
}

}  // namespace

const JobScript::Command* Analyzer::TorchtuneCommand(const JobScript& script) {
  for (const auto& c : script.commands) {
    if (std::find(c.wrappers.begin(), c.wrappers.end(), "tune") != c.wrappers.end()) return &c;
  }
  return nullptr;
}

Status Analyzer::ReadTorchtune(const JobScript& script, const JobScript::Command& cmd) {
  gpus_requested_ = script.request.gpus.value_or(0);
  facts_.launcher = cmd.launcher;
  facts_.command = {script_name_, cmd.line};
  facts_.command_index = static_cast<int>(&cmd - script.commands.data());
  facts_.args = cmd.args;
  const SourceLine at_command{script_name_, cmd.line};
  // The job-script parser took torchrun's options off; the program is the recipe, and after it
  // --config FILE and key=value overrides.
  const std::string& recipe = cmd.program;
  std::string config;
  std::map<std::string, std::string> overrides;
  std::set<std::string> listed;  // lists the command line gives whole
  for (size_t i = 0; i < cmd.args.size(); ++i) {
    const std::string& a = cmd.args[i];
    if ((a == "--config" || a == "-c") && i + 1 < cmd.args.size()) {
      config = cmd.args[++i];
    } else if (a.starts_with("--config=")) {
      config = a.substr(9);
    } else if (auto eq = a.find('='); eq != std::string::npos && !a.starts_with("-")) {
      std::string key = a.substr(0, eq), text = a.substr(eq + 1);
      if (!(text.starts_with('[') && text.ends_with(']'))) {
        overrides[key] = text;
        continue;
      }
      // A list: its items kept as the file's are, key.0, key.1, …
      std::string items = text.substr(1, text.size() - 2);
      int n = 0;
      for (size_t start = 0; !items.empty() && start <= items.size();) {
        size_t comma = std::min(items.find(',', start), items.size());
        std::string item = items.substr(start, comma - start);
        item.erase(0, item.find_first_not_of(" '\""));
        item.erase(item.find_last_not_of(" '\"") + 1);
        overrides[fmt::format("{}.{}", key, n++)] = item;
        start = comma + 1;
      }
      listed.insert(key);
    }
  }
  if (recipe.empty() || config.empty()) {
    return Status::NotFound(
        fmt::format("{}:{}: tune run without a recipe and --config", script_name_, cmd.line));
  }
  if (recipe.find("finetune") == std::string::npos) {
    return Status::NotFound(fmt::format(
        "{}:{}: torchtune recipe {} is not modelled (full_finetune_*, lora_finetune_* are)",
        script_name_, cmd.line, recipe));
  }
  std::error_code ec;
  if (!fs::is_regular_file(fs::path(code_dir_) / config, ec)) {
    return Status::NotFound(fmt::format(
        "{}:{}: the torchtune config {} is not a file in {}{}", script_name_, cmd.line, config,
        code_dir_,
        config.ends_with(".yaml") ? ""
                                  : " (a config shipped with torchtune: copy it into the project "
                                    "with `tune cp` to have it read)"));
  }
  auto file = LoadConfigFile((fs::path(code_dir_) / config).string(), config);
  if (!file.ok()) return file.status();
  facts_.entry = config;
  facts_.files.push_back(config);
  Set(facts_.framework, std::string("torchtune"), at_command, "tune run", kRankLauncher);
  facts_.frameworks.push_back("torchtune");
  pending_.erase("framework");
  ReadLauncherOptions(script, cmd);  // the processes, from torchrun's options

  // A key's value, as a scalar of the command line or the file is read: an override on the
  // command line wins, and a list it gives whole replaces the file's, items and all.
  auto get = [&](const std::string& key) -> std::optional<Value> {
    if (auto it = overrides.find(key); it != overrides.end()) {
      return FromText(it->second, at_command,
                      fmt::format("{}={} on the command line", key, it->second));
    }
    for (const auto& l : listed) {
      if (key.starts_with(l + ".")) return std::nullopt;
    }
    if (auto v = file->values.find(key); v != file->values.end()) {
      return FromText(v->second.text, {config, v->second.line},
                      fmt::format("{}: {}", key, v->second.text));
    }
    return std::nullopt;
  };
  auto truthy = [&](const std::string& key) {
    auto v = get(key);
    return v && v->Truthy();
  };

  Set(facts_.training, true, at_command, fmt::format("torchtune's {} recipe", recipe),
      kRankLauncher);
  const int processes = facts_.processes.value.value_or(1);
  if (recipe.find("distributed") != std::string::npos && processes > 1) {
    // torchtune's distributed recipes shard parameters, gradients and states with FSDP.
    Set(facts_.parallelism, std::string("FSDP"), at_command,
        fmt::format("{}: FSDP over {} processes", recipe, processes), kRankLauncher);
    Set(facts_.zero_stage, 3, at_command, "torchtune's FSDP: full sharding", kRankLauncher);
  }

  // The model: its builder names it; lora_ and qlora_ builders add adapters (and NF4 weights).
  auto model = get("model._component_");
  if (!model || model->kind != Value::Kind::kString) {
    Undecided("model", fmt::format("{} has no model._component_", config), {config, 0});
  } else {
    const std::string& component = model->text;
    std::string builder = component.substr(component.rfind('.') + 1);
    std::optional<TransformerSpec> spec;
    for (const auto& name : HubNamesOf(component)) {
      if ((spec = FindTransformer(name))) break;
    }
    if (!spec) {
      Undecided(
          "model",
          fmt::format("torchtune model {} is not in the table of known model sizes", component),
          model->origin);
    } else {
      SetTransformer(*spec, model->origin, fmt::format("torchtune {}", component), kRankConfig);
      Set(facts_.attention, Attention::kSdpa, model->origin,
          "torchtune's attention: scaled_dot_product_attention", kRankConfig);
    }
    const bool qlora = builder.starts_with("qlora_");
    if (qlora) {
      Set(facts_.precision, Precision::kInt4, model->origin,
          fmt::format("{}: NF4 weights (torchao)", builder), kRankConfig);
      Set(facts_.weight_dtype, Precision::kBf16, model->origin,
          fmt::format("{}: the rest in bf16", builder), kRankConfig);
    }
    if (qlora || builder.starts_with("lora_")) {
      LoraCall l;
      l.where = model->origin;
      if (auto r = get("model.lora_rank"); r && r->IsNumber() && r->number >= 1) {
        l.rank = static_cast<int64_t>(r->number);
      }
      if (auto d = get("model.lora_dropout"); d && d->IsNumber()) l.dropout = d->number;
      // torchtune's module names as the Hub's: output_proj is o_proj; the MLP's three.
      for (int i = 0;; ++i) {
        auto m = get(fmt::format("model.lora_attn_modules.{}", i));
        if (!m || m->kind != Value::Kind::kString) break;
        l.targets.push_back(m->text == "output_proj" ? "o_proj" : m->text);
      }
      if (truthy("model.apply_lora_to_mlp")) {
        for (std::string_view m : {"gate_proj", "up_proj", "down_proj"}) l.targets.emplace_back(m);
      }
      if (truthy("model.apply_lora_to_output")) l.targets.emplace_back("lm_head");
      for (const auto& t : l.targets) l.target_text += (l.target_text.empty() ? "" : ",") + t;
      if (l.targets.empty()) {
        Undecided("lora_targets", fmt::format("{} names no lora_attn_modules", config), l.where);
      } else {
        lora_ = l;
      }
    }
  }

  // How it trains.
  if (auto dtype = get("dtype")) {
    if (dtype->text == "bf16" || dtype->text == "fp16") {
      Precision p = dtype->text == "bf16" ? Precision::kBf16 : Precision::kFp16;
      Set(facts_.precision, p, dtype->origin, dtype->how, kRankCall);
      Set(facts_.weight_dtype, p, dtype->origin, dtype->how, kRankCall);
      // torchtune builds the adapters in the model's dtype too.
      Set(facts_.adapter_dtype, p, dtype->origin, dtype->how, kRankCall);
    } else if (dtype->text == "fp32") {
      Set(facts_.precision, Precision::kFp32, dtype->origin, dtype->how, kRankCall);
    }
  }
  for (auto [key, fact] : {std::pair{"batch_size", &facts_.batch_size},
                           std::pair{"tokenizer.max_seq_len", &facts_.seq_len},
                           std::pair{"gradient_accumulation_steps", &facts_.grad_accum}}) {
    if (auto v = get(key)) SetNumber(*fact, *v, v->origin, key, kRankConfig);
  }
  if (auto ckpt = get("enable_activation_checkpointing")) {
    Set(facts_.checkpointing, ckpt->Truthy() ? Checkpointing::kFull : Checkpointing::kNone,
        ckpt->origin, ckpt->how, kRankConfig);
  }
  if (auto off = get("enable_activation_offloading"); off && off->Truthy()) {
    Set(facts_.activation_offload, true, off->origin, off->how, kRankConfig);
  }
  if (auto compile = get("compile")) {
    Set(facts_.compiled, compile->Truthy(), compile->origin, compile->how, kRankConfig);
  }
  if (auto opt = get("optimizer._component_"); opt && opt->kind == Value::Kind::kString) {
    const std::string& o = opt->text;
    Optimizer kind = o.find("8bit") != std::string::npos ? Optimizer::kAdam8bit
                     : o.ends_with("SGD") ? (truthy("optimizer.momentum") ? Optimizer::kSgdMomentum
                                                                          : Optimizer::kSgd)
                                          : Optimizer::kAdam;
    Set(facts_.optimizer, kind, opt->origin, opt->how, kRankConfig);
    if (o.find("Paged") != std::string::npos) {
      Set(facts_.paged_optimizer, true, opt->origin, opt->how, kRankConfig);
    }
  }
  if (auto in_bwd = get("optimizer_in_bwd"); in_bwd && in_bwd->Truthy()) {
    Set(facts_.optimizer_in_backward, true, in_bwd->origin, in_bwd->how, kRankConfig);
  }
  if (auto loss = get("loss._component_");
      loss && loss->text.find("Chunked") != std::string::npos) {
    int64_t chunks = 8;  // CEWithChunkedOutputLoss's num_output_chunks
    if (auto n = get("loss.num_output_chunks"); n && n->IsNumber() && n->number >= 1) {
      chunks = static_cast<int64_t>(std::min(n->number, 1e6));
    }
    Set(facts_.loss_chunks, chunks, loss->origin, loss->how, kRankConfig);
  }
  ResolveAdapters();
  if (!facts_.batch_size.known()) {
    Undecided("batch_size", "no batch_size in the config", {config, 0});
  }
  if (!facts_.seq_len.known()) {
    Undecided("seq_len", "no tokenizer.max_seq_len in the config", {config, 0});
  }
  if (!facts_.precision.known()) {
    Assume(facts_.precision, Precision::kBf16, "bf16: torchtune's default dtype");
    Assume(facts_.weight_dtype, Precision::kBf16, "bf16: torchtune's default dtype");
    Assume(facts_.adapter_dtype, Precision::kBf16, "bf16: torchtune's default dtype");
  }
  if (!facts_.optimizer.known()) Assume(facts_.optimizer, Optimizer::kAdam, "AdamW assumed");
  if (!facts_.grad_accum.known()) Assume(facts_.grad_accum, int64_t{1}, "no accumulation");
  if (!facts_.checkpointing.known()) {
    Assume(facts_.checkpointing, Checkpointing::kNone, "enable_activation_checkpointing not set");
  }
  if (!facts_.zero_stage.known()) Assume(facts_.zero_stage, 0, "one device: nothing sharded");
  if (!facts_.parallelism.known()) {
    Set(facts_.parallelism, std::string("none"), at_command, "a single-device recipe",
        kRankDefault);
  }
  for (auto& [what, u] : pending_) facts_.undetermined.push_back(std::move(u));
  pending_.clear();
  return Status::Ok();
}

}  // namespace rightsize::code::internal
