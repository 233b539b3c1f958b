// Prices: what a core-hour, a GB-hour of memory and a GPU-hour cost, and where each figure
// comes from.
//
// The report turns resource-hours into dollars with a PriceTable. The default table is
// share/prices.json (on-demand cloud list prices as of a stated date); a site passes its own
// with `--prices FILE`. Each price carries a source string (provider, instance type, region,
// date, derivation) so a reader of the report can check it.
//
// The table also holds the memory capacity of each GPU type, which the report needs for GPU
// memory efficiency (used GPU memory / memory of the GPUs allocated).
//
// File format (JSON, see docs/report-schema.md, "Price file"):
//   { "schema": "rightsize.prices/v1", "currency": "USD", "note": "...",
//     "cpu_core_hour":    {"price": 0.033,   "source": "..."},
//     "memory_gb_hour":   {"price": 0.00375, "source": "..."},
//     "default_gpu_hour": {"price": 3.16,    "source": "..."},
//     "gpus": { "a100": {"price": 3.16, "memory_gb": 40, "source": "..."}, ... } }
// Energy (optional): "grid_gco2e_per_kwh": {"value": 350, "source": "..."} (or a plain number),
// the site's grid carbon intensity, grams CO2-equivalent per kWh; absent (the built-in table),
// CO2 is not shown. A GPU entry may give "idle_w": the type's idle power in watts, the site's
// own NVML reading of an idle GPU (`nvidia-smi --query-gpu=power.draw`), for what an unused
// reservation cost in energy; absent, that energy is unknown.
// A price may also be given as a plain number ("cpu_core_hour": 0.04). GPU type keys are
// matched case-insensitively; "memory_gb" is optional. Unknown keys are ignored.
//
// Loading never throws: a malformed file gives BadInput naming the file and the field.
// PriceTable is a plain value; the functions are thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace rightsize {

struct PriceTable {
  std::string currency = "USD";
  double cpu_core_hour = 0;     // per allocated CPU (SLURM CPU = one hardware thread or core)
  double memory_gb_hour = 0;    // per GiB of host memory held for one hour
  double default_gpu_hour = 0;  // for GPUs of unknown or unlisted type
  std::map<std::string, double> gpu_hour_by_type;  // lower-case keys: "a100", "h100", …
  // GiB of memory per GPU, by type: each model's sizes, ascending. SLURM's GRES type often
  // names the model only ("v100" is sold with 16 and 32 GiB), so a type may have several.
  std::map<std::string, std::vector<double>> gpu_memory_gb_by_type;
  std::optional<double> grid_gco2e_per_kwh;          // none: CO2 not shown
  std::map<std::string, double> gpu_idle_w_by_type;  // lower-case keys, like the prices
  std::string source_note;  // the table's overall note: what the prices are and as of when
  // Where each price comes from: "cpu_core_hour", "memory_gb_hour", "default_gpu_hour",
  // "gpu:<type>" → a sentence naming provider, instance, region, date and derivation.
  std::map<std::string, std::string> sources;

  // The GPU-hour price for a GPU type ("A100" and "a100" match); the default price when the
  // type is empty, "mixed" or not listed.
  double GpuHourPrice(std::string_view gpu_type) const;
  // Whether `gpu_type` has its own price (not the default).
  bool HasGpuPrice(std::string_view gpu_type) const;
  // GiB of memory per GPU of this type: the smallest size that holds `at_least_gb` (a job's
  // observed peak per GPU), or 0 when the type is unknown or no size of it is that large.
  double GpuMemoryGb(std::string_view gpu_type, double at_least_gb = 0) const;
  // The type's idle power in watts (idle_w), or nullopt when the file gives none.
  std::optional<double> GpuIdleW(std::string_view gpu_type) const;
  // Bytes of memory of `gpus` GPUs of this type ("80 GB" cards hold 80 GiB); 0 when unknown.
  double GpuMemoryBytes(std::string_view gpu_type, int gpus) const {
    return gpus > 0 ? gpus * GpuMemoryGb(gpu_type) * 1073741824.0 : 0;
  }
};

// Parses a price table from JSON text; `name` (a file path or "<builtin>") prefixes errors:
// "prices.json: field cpu_core_hour.price: expected a non-negative number".
StatusOr<PriceTable> ParsePriceTable(std::string_view json_text, const std::string& name);

// Reads and parses a price file. NotFound / IoError when it cannot be read.
StatusOr<PriceTable> LoadPriceTable(const std::string& path);

// share/prices.json, embedded at build time (default_prices.cc.in).
extern const char* const kDefaultPricesJson;
// The price table of `path`, or the built-in one when `path` is empty.
StatusOr<PriceTable> PricesFor(const std::string& path);

// Lower-cases ASCII letters; GPU type keys are compared this way.
std::string LowerAscii(std::string_view text);

}  // namespace rightsize
