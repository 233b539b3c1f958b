#include "report/prices.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace rightsize {

namespace {

using nlohmann::json;

Status FieldError(const std::string& name, const std::string& field, std::string_view what) {
  return Status::BadInput(fmt::format("{}: field {}: {}", name, field, what));
}

// Reads a price given either as a number or as {"price": number, "source": "..."}; records the
// source under `source_key`.
Status ReadPrice(const json& parent, const std::string& key, const std::string& field_path,
                 const std::string& source_key, const std::string& name, PriceTable& table,
                 double& out) {
  auto it = parent.find(key);
  if (it == parent.end()) return FieldError(name, field_path, "missing");
  const json* price = &*it;
  std::string price_path = field_path;
  if (it->is_object()) {
    auto p = it->find("price");
    if (p == it->end()) return FieldError(name, field_path + ".price", "missing");
    price = &*p;
    price_path += ".price";
    if (auto s = it->find("source"); s != it->end()) {
      if (!s->is_string()) return FieldError(name, field_path + ".source", "expected a string");
      table.sources[source_key] = s->get<std::string>();
    }
  }
  if (!price->is_number() || !std::isfinite(price->get<double>()) || price->get<double>() < 0) {
    return FieldError(name, price_path,
                      fmt::format("expected a non-negative number, got {}", price->dump()));
  }
  out = price->get<double>();
  return Status::Ok();
}

}  // namespace

std::string LowerAscii(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

double PriceTable::GpuHourPrice(std::string_view gpu_type) const {
  auto it = gpu_hour_by_type.find(LowerAscii(gpu_type));
  return it == gpu_hour_by_type.end() ? default_gpu_hour : it->second;
}

std::optional<double> PriceTable::GpuIdleW(std::string_view gpu_type) const {
  auto it = gpu_idle_w_by_type.find(LowerAscii(gpu_type));
  if (it == gpu_idle_w_by_type.end()) return std::nullopt;
  return it->second;
}

bool PriceTable::HasGpuPrice(std::string_view gpu_type) const {
  return gpu_hour_by_type.count(LowerAscii(gpu_type)) > 0;
}

double PriceTable::GpuMemoryGb(std::string_view gpu_type, double at_least_gb) const {
  auto it = gpu_memory_gb_by_type.find(LowerAscii(gpu_type));
  if (it == gpu_memory_gb_by_type.end()) return 0;
  for (double size : it->second) {
    if (size >= at_least_gb) return size;
  }
  return 0;
}

StatusOr<PriceTable> ParsePriceTable(std::string_view json_text, const std::string& name) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& e) {
    return Status::BadInput(fmt::format("{}: not valid JSON: {}", name, e.what()));
  }
  if (!doc.is_object()) return Status::BadInput(fmt::format("{}: expected a JSON object", name));

  PriceTable table;
  if (auto it = doc.find("currency"); it != doc.end()) {
    if (!it->is_string()) return FieldError(name, "currency", "expected a string");
    table.currency = it->get<std::string>();
  }
  if (auto it = doc.find("note"); it != doc.end()) {
    if (!it->is_string()) return FieldError(name, "note", "expected a string");
    table.source_note = it->get<std::string>();
  }
  RS_RETURN_IF_ERROR(ReadPrice(doc, "cpu_core_hour", "cpu_core_hour", "cpu_core_hour", name, table,
                               table.cpu_core_hour));
  RS_RETURN_IF_ERROR(ReadPrice(doc, "memory_gb_hour", "memory_gb_hour", "memory_gb_hour", name,
                               table, table.memory_gb_hour));
  RS_RETURN_IF_ERROR(ReadPrice(doc, "default_gpu_hour", "default_gpu_hour", "default_gpu_hour",
                               name, table, table.default_gpu_hour));
  if (auto grid = doc.find("grid_gco2e_per_kwh"); grid != doc.end()) {
    // {"value": N, "source": "..."} or a plain number.
    const json* value = &*grid;
    std::string path = "grid_gco2e_per_kwh";
    if (grid->is_object()) {
      auto v = grid->find("value");
      if (v == grid->end()) return FieldError(name, path + ".value", "missing");
      value = &*v;
      path += ".value";
      if (auto src = grid->find("source"); src != grid->end()) {
        if (!src->is_string()) {
          return FieldError(name, "grid_gco2e_per_kwh.source", "expected a string");
        }
        table.sources["grid_gco2e_per_kwh"] = src->get<std::string>();
      }
    }
    // The dirtiest grids are near 1,000 g/kWh (coal); 5,000 is no grid.
    if (!value->is_number() || !std::isfinite(value->get<double>()) || value->get<double>() < 0 ||
        value->get<double>() > 5000) {
      return FieldError(
          name, path,
          fmt::format("expected grams CO2e per kWh from 0 to 5000, got {}", value->dump()));
    }
    table.grid_gco2e_per_kwh = value->get<double>();
  }
  if (auto gpus = doc.find("gpus"); gpus != doc.end()) {
    if (!gpus->is_object()) return FieldError(name, "gpus", "expected an object");
    for (const auto& [type, entry] : gpus->items()) {
      std::string key = LowerAscii(type);
      std::string path = "gpus." + type;
      double price = 0;
      RS_RETURN_IF_ERROR(ReadPrice(*gpus, type, path, "gpu:" + key, name, table, price));
      table.gpu_hour_by_type[key] = price;
      if (entry.is_object()) {
        if (auto mem = entry.find("memory_gb"); mem != entry.end()) {
          // One size (40) or the model's sizes ([16, 32]).
          std::vector<double> sizes;
          for (const auto& v : mem->is_array() ? *mem : nlohmann::json::array({*mem})) {
            if (!v.is_number() || v.get<double>() <= 0) {
              return FieldError(
                  name, path + ".memory_gb",
                  fmt::format("expected a positive number or a list of them, got {}", mem->dump()));
            }
            sizes.push_back(v.get<double>());
          }
          if (sizes.empty()) {
            return FieldError(name, path + ".memory_gb", "expected at least one size");
          }
          std::sort(sizes.begin(), sizes.end());
          table.gpu_memory_gb_by_type[key] = sizes;
        }
        if (auto idle = entry.find("idle_w"); idle != entry.end()) {
          if (!idle->is_number() || !std::isfinite(idle->get<double>()) ||
              idle->get<double>() < 0 || idle->get<double>() > 10000) {
            return FieldError(name, path + ".idle_w",
                              fmt::format("expected watts from 0 to 10000, got {}", idle->dump()));
          }
          table.gpu_idle_w_by_type[key] = idle->get<double>();
        }
      }
    }
  }
  return table;
}

StatusOr<PriceTable> LoadPriceTable(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    if (err == ENOENT) return Status::NotFound(fmt::format("price file {}: not found", path));
    return Status::IoError(fmt::format("price file {}: {}", path, std::strerror(err)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::IoError(fmt::format("price file {}: read failed", path));
  return ParsePriceTable(text.str(), path);
}

StatusOr<PriceTable> PricesFor(const std::string& path) {
  if (path.empty()) return ParsePriceTable(kDefaultPricesJson, "<built-in share/prices.json>");
  return LoadPriceTable(path);
}

}  // namespace rightsize
