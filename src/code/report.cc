#include "code/report.h"

#include <fmt/format.h>

namespace rightsize::code {
namespace {

template <typename T>
std::string Show(const T& v) {
  if constexpr (std::is_same_v<T, std::string>) {
    return v;
  } else if constexpr (std::is_same_v<T, bool>) {
    return v ? "yes" : "no";
  } else if constexpr (std::is_same_v<T, double>) {
    return v >= 1e9   ? fmt::format("{:.2f}B", v / 1e9)
           : v >= 1e5 ? fmt::format("{:.1f}M", v / 1e6)
                      : fmt::format("{}", v);
  } else if constexpr (std::is_enum_v<T>) {
    return std::string(NameOf(v));
  } else {
    return fmt::format("{}", v);
  }
}

template <typename T>
nlohmann::json JsonValue(const T& v) {
  if constexpr (std::is_same_v<T, Attention>) {
    return v != Attention::kEager;  // fused_attention: its kernel is beside it
  } else if constexpr (std::is_enum_v<T>) {
    return std::string(NameOf(v));
  } else {
    return v;
  }
}

template <typename F>
void ForEachFact(const CodeFacts& f, F fn) {
  fn("framework", f.framework);
  fn("model", f.model);
  fn("parameters", f.parameters);
  fn("trainable_parameters", f.trainable_parameters);
  fn("layers", f.layers);
  fn("hidden", f.hidden);
  fn("heads", f.heads);
  fn("kv_heads", f.kv_heads);
  fn("head_dim", f.head_dim);
  fn("vocab", f.vocab);
  fn("batch_size", f.batch_size);
  fn("seq_len", f.seq_len);
  fn("image_size", f.image_size);
  fn("precision", f.precision);
  fn("weight_dtype", f.weight_dtype);
  fn("cast_after_move", f.cast_after_move);
  fn("quantized_parameters", f.quantized_parameters);
  fn("double_quant", f.double_quant);
  fn("kbit_prepared", f.kbit_prepared);
  fn("lora_rank", f.lora_rank);
  fn("lora_targets", f.lora_targets);
  fn("lora_dropout", f.lora_dropout);
  fn("adapter_dtype", f.adapter_dtype);
  fn("max_new_tokens", f.max_new_tokens);
  fn("training", f.training);
  fn("optimizer", f.optimizer);
  fn("grad_accum", f.grad_accum);
  fn("checkpointing", f.checkpointing);
  fn("fused_attention", f.attention);
  fn("torch_version", f.torch_version);
  fn("mlp_features", f.mlp_features);
  fn("mlp_widest", f.mlp_widest);
  fn("zero_stage", f.zero_stage);
  fn("optimizer_offload", f.optimizer_offload);
  fn("optimizer_in_backward", f.optimizer_in_backward);
  fn("paged_optimizer", f.paged_optimizer);
  fn("loss_chunks", f.loss_chunks);
  fn("activation_offload", f.activation_offload);
  fn("param_offload", f.param_offload);
  fn("max_live_parameters", f.max_live_parameters);
  fn("parallelism", f.parallelism);
  fn("processes", f.processes);
  fn("num_workers", f.num_workers);
  fn("compiled", f.compiled);
}

}  // namespace

nlohmann::json FactsJson(const CodeFacts& f) {
  nlohmann::json j;
  j["launcher"] = f.launcher;
  j["command"] = f.command.ToString();
  j["entry"] = f.entry;
  j["args"] = f.args;
  j["files"] = f.files;
  j["parse_errors"] = f.parse_errors;
  j["frameworks"] = f.frameworks;
  j["architecture"] = std::string(NameOf(f.architecture));
  nlohmann::json facts = nlohmann::json::object();
  ForEachFact(f, [&](const char* name, const auto& fact) {
    if (!fact.known()) return;
    nlohmann::json fj;
    fj["value"] = JsonValue(*fact.value);
    if constexpr (std::is_same_v<std::decay_t<decltype(*fact.value)>, Attention>) {
      fj["kernel"] = std::string(NameOf(*fact.value));
    }
    fj["where"] =
        fact.where.empty() ? nlohmann::json(nullptr) : nlohmann::json(fact.where.ToString());
    fj["how"] = fact.how;
    fj["assumed"] = fact.assumed;
    facts[name] = std::move(fj);
  });
  j["facts"] = std::move(facts);
  nlohmann::json und = nlohmann::json::array();
  for (const auto& u : f.undetermined) {
    und.push_back({{"what", u.what}, {"reason", u.reason}, {"where", u.where.ToString()}});
  }
  j["undetermined"] = std::move(und);
  return j;
}

nlohmann::json EstimateJson(const MemoryEstimate& e) {
  nlohmann::json terms = nlohmann::json::array();
  for (const auto& t : e.terms) {
    std::vector<std::string> lines;
    for (const auto& l : t.lines) lines.push_back(l.ToString());
    terms.push_back(
        {{"name", t.name}, {"bytes", t.bytes}, {"formula", t.formula}, {"lines", lines}});
  }
  return {{"p10", e.p10_bytes},
          {"p50", e.p50_bytes},
          {"p90", e.p90_bytes},
          {"unit", "bytes"},
          {"per", "gpu"},
          {"quantity", std::string(kEstimateQuantity)},
          {"allocated_p50", e.allocated_bytes},
          {"reserved_p50", e.reserved_bytes},
          {"data_parallel_gpus", e.data_parallel_gpus},
          {"terms", terms},
          {"assumptions", e.assumptions}};
}

nlohmann::json AdviceJson(const std::vector<Advice>& advice) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& a : advice) {
    out.push_back({{"kind", a.kind},
                   {"where", a.where.ToString()},
                   {"message", a.message},
                   {"effect_bytes", a.effect_bytes},
                   {"effect_gpus", a.effect_gpus},
                   {"effect_cores", a.effect_cores}});
  }
  return out;
}

std::string FactsText(const CodeFacts& f) {
  std::string out;
  ForEachFact(f, [&](const char* name, const auto& fact) {
    if (!fact.known()) return;
    out += fmt::format("  {:<20} {:<24} {:<22} {}\n", name, Show(*fact.value),
                       fact.where.line > 0 ? fact.where.ToString() : "", fact.how);
  });
  for (const auto& e : f.parse_errors) out += fmt::format("  parse error: {}\n", e);
  for (const auto& u : f.undetermined) {
    out += fmt::format("  {:<20} {:<24} {:<22} {}\n", u.what, "undetermined", u.where.ToString(),
                       u.reason);
  }
  return out;
}

std::string EstimateText(const MemoryEstimate& e) {
  std::string out;
  for (const auto& t : e.terms) {
    std::vector<std::string> lines;
    for (const auto& l : t.lines) lines.push_back(l.ToString());
    out += fmt::format("  {:<22} {:>9}  {}{}\n", t.name, FormatGb(t.bytes), t.formula,
                       lines.empty() ? "" : fmt::format("  [{}]", fmt::join(lines, ", ")));
  }
  out += fmt::format("  per GPU: p10 {}, p50 {}, p90 {}\n", FormatGb(e.p10_bytes),
                     FormatGb(e.p50_bytes), FormatGb(e.p90_bytes));
  for (const auto& a : e.assumptions) out += fmt::format("  note: {}\n", a);
  return out;
}

}  // namespace rightsize::code
