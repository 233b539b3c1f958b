// Config files a training job reads (YAML through yaml-cpp, JSON through nlohmann-json),
// flattened to dotted keys so the analysis can look up `cfg["train"]["batch_size"]` as
// "train.batch_size" or a DeepSpeed config's "zero_optimization.stage".
//
// Only scalars are kept (lists are indexed: "layers.0"); each with the 1-based line it was
// written on (for JSON, the first line that names the key, as nlohmann-json keeps no lines).
// Failure: an unreadable file is NotFound/IoError, one that does not parse is BadInput with the
// parser's line. Pure functions; thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace rightsize::code {

struct ConfigValue {
  std::string text;  // the scalar as written: "16", "bf16", "true", "null"
  int line = 0;
};

struct ConfigFile {
  std::string name;                           // as shown to the user: "configs/gpt2.yaml"
  std::map<std::string, ConfigValue> values;  // "train.batch_size" -> {"16", 4}

  // The value at `dotted_key` exactly, else the only key ending in ".<dotted_key>" (the
  // shallowest one when several do); nullopt when absent.
  std::optional<ConfigValue> Find(std::string_view dotted_key) const;
};

inline constexpr size_t kMaxConfigBytes = 4 << 20;

// Parses `text` as JSON when `name` ends in .json, else as YAML.
StatusOr<ConfigFile> ParseConfig(std::string_view text, const std::string& name);
StatusOr<ConfigFile> LoadConfigFile(const std::string& path, const std::string& shown_name);

}  // namespace rightsize::code
