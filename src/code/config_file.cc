#include "code/config_file.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace rightsize::code {
namespace {

std::string Join(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

void FlattenYaml(const YAML::Node& node, const std::string& prefix, ConfigFile* out) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) continue;
        FlattenYaml(kv.second, Join(prefix, kv.first.Scalar()), out);
      }
      break;
    case YAML::NodeType::Sequence:
      for (size_t i = 0; i < node.size(); ++i) {
        FlattenYaml(node[i], Join(prefix, std::to_string(i)), out);
      }
      break;
    case YAML::NodeType::Scalar:
      out->values[prefix] = {node.Scalar(), node.Mark().line + 1};
      break;
    case YAML::NodeType::Null:
      out->values[prefix] = {"null", node.Mark().line + 1};
      break;
    case YAML::NodeType::Undefined:
      break;
  }
}

// nlohmann-json keeps no positions: a key's line is that of the first `"key"` at or after the
// line of its parent, which is right for the configs people write by hand.
int LineOfKey(std::string_view text, const std::string& key, size_t* from) {
  std::string quoted = "\"" + key + "\"";
  size_t at = text.find(quoted, *from);
  if (at == std::string_view::npos) return 0;
  *from = at + quoted.size();
  return static_cast<int>(
             std::count(text.begin(), text.begin() + static_cast<ptrdiff_t>(at), '\n')) +
         1;
}

void FlattenJson(const nlohmann::json& j, const std::string& prefix, std::string_view text,
                 size_t from, int line, ConfigFile* out) {
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      size_t key_from = from;
      int key_line = LineOfKey(text, key, &key_from);
      FlattenJson(value, Join(prefix, key), text, key_from, key_line != 0 ? key_line : line, out);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      FlattenJson(j[i], Join(prefix, std::to_string(i)), text, from, line, out);
    }
  } else {
    out->values[prefix] = {j.is_string() ? j.get<std::string>() : j.dump(), line};
  }
}

}  // namespace

std::optional<ConfigValue> ConfigFile::Find(std::string_view dotted_key) const {
  auto it = values.find(std::string(dotted_key));
  if (it != values.end()) return it->second;
  std::string suffix = "." + std::string(dotted_key);
  const ConfigValue* best = nullptr;
  size_t best_depth = 0;
  for (const auto& [key, value] : values) {
    if (!key.ends_with(suffix)) continue;
    size_t depth = std::count(key.begin(), key.end(), '.');
    if (best == nullptr || depth < best_depth) {
      best = &value;
      best_depth = depth;
    }
  }
  if (best == nullptr) return std::nullopt;
  return *best;
}

StatusOr<ConfigFile> ParseConfig(std::string_view text, const std::string& name) {
  ConfigFile out;
  out.name = name;
  if (name.ends_with(".json")) {
    try {
      FlattenJson(nlohmann::json::parse(text), "", text, 0, 1, &out);
    } catch (const nlohmann::json::exception& e) {
      return Status::BadInput(fmt::format("{}: not valid JSON: {}", name, e.what()));
    }
    return out;
  }
  try {
    FlattenYaml(YAML::Load(std::string(text)), "", &out);
  } catch (const YAML::Exception& e) {
    return Status::BadInput(fmt::format("{}:{}: not valid YAML: {}", name, e.mark.line + 1, e.msg));
  }
  return out;
}

StatusOr<ConfigFile> LoadConfigFile(const std::string& path, const std::string& shown_name) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(fmt::format("{}: cannot open", shown_name));
  std::string text;
  char buf[1 << 16];
  while (text.size() <= kMaxConfigBytes && in.read(buf, sizeof buf).gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
  }
  if (text.size() > kMaxConfigBytes) {
    return Status::BadInput(fmt::format("{}: larger than {} bytes", shown_name, kMaxConfigBytes));
  }
  return ParseConfig(text, shown_name);
}

}  // namespace rightsize::code
