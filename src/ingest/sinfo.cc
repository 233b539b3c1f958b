#include "ingest/sinfo.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <tuple>

#include "core/plausible.h"
#include "core/units.h"
#include "jobscript/job_script.h"

namespace rightsize {
namespace {

// "64" or "64+" (sinfo's "at least", when it summarises unlike nodes).
// A whole number in [0, max] (sinfo's "+" suffix dropped); the bounds keep the sums and the
// bytes computed from them far from overflowing.
std::optional<int64_t> Count(std::string_view s, int64_t max) {
  if (!s.empty() && s.back() == '+') s.remove_suffix(1);
  auto v = ParseInt(s);
  if (!v || *v < 0 || *v > max) return std::nullopt;
  return v;
}
constexpr int64_t kMaxNodes = int64_t{1} << 24;
constexpr int64_t kMaxCpus = int64_t{1} << 20;
constexpr int64_t kMaxMemoryMiB = int64_t{1} << 30;  // 1 PiB per node

}  // namespace

StatusOr<std::vector<PartitionShape>> ParseSinfo(std::string_view text, std::string_view source) {
  std::vector<PartitionShape> parts;
  int line_no = 0;
  for (std::string_view line : Split(text, "\n")) {
    ++line_no;
    line = Trim(line);
    if (line.empty()) continue;
    std::vector<std::string_view> f = Split(line, "|");
    auto bad = [&](const char* field, std::string_view value, const char* expected) {
      return Status::BadInput(
          fmt::format("{}:{}: {} is \"{}\", expected {}", source, line_no, field, value, expected));
    };
    if (f.size() != 5) {
      return Status::BadInput(
          fmt::format("{}:{}: {} fields, expected 5 (sinfo --noheader --format='{}')", source,
                      line_no, f.size(), kSinfoFormat));
    }
    if (line_no == 1 && Trim(f[0]) == "PARTITION") continue;  // sinfo's header
    PartitionShape p;
    std::string_view name = Trim(f[0]);
    if (!name.empty() && name.back() == '*') {
      p.is_default = true;
      name.remove_suffix(1);
    }
    if (name.empty()) return bad("the partition", f[0], "a name");
    p.name = std::string(name);
    auto nodes = Count(Trim(f[1]), kMaxNodes);
    if (!nodes) return bad("the node count (%D)", f[1], "a whole number up to 2^24");
    auto cpus = Count(Trim(f[2]), kMaxCpus);
    if (!cpus) return bad("CPUs per node (%c)", f[2], "a whole number up to 2^20");
    auto mem = Count(Trim(f[3]), kMaxMemoryMiB);
    if (!mem) return bad("memory per node (%m)", f[3], "MiB as a whole number up to 2^30");
    auto gpus = ParseGresGpus(f[4]);
    if (!gpus) return bad("the generic resources (%G)", f[4], "gpu[:TYPE]:N entries or (null)");
    // Nodes, CPUs and memory are bounded as they are read (Count), so their products cannot
    // overflow; the GPUs per node against core/plausible.h.
    if (Status st = CheckPlausible("%G (GPUs per node)", Plausible::kGpus,
                                   static_cast<double>(gpus->count), Trim(f[4]));
        !st.ok()) {
      return Status::BadInput(fmt::format("{}:{}: {}", source, line_no, st.message()));
    }
    p.nodes = *nodes;
    p.cpus_per_node = static_cast<double>(*cpus);
    p.memory_per_node = *mem * kMiB;
    p.gpus_per_node = gpus->count;
    p.gpu_type = gpus->type;
    auto same = std::find_if(parts.begin(), parts.end(),
                             [&](const PartitionShape& q) { return q.name == p.name; });
    if (same == parts.end()) {
      parts.push_back(std::move(p));
      continue;
    }
    // Another node configuration of the same partition: count its nodes, keep the largest.
    same->nodes += p.nodes;
    same->is_default = same->is_default || p.is_default;
    same->cpus_per_node = std::max(same->cpus_per_node, p.cpus_per_node);
    same->memory_per_node = std::max(same->memory_per_node, p.memory_per_node);
    if (p.gpus_per_node > same->gpus_per_node) {
      same->gpus_per_node = p.gpus_per_node;
      same->gpu_type = p.gpu_type;
    }
  }
  if (parts.empty()) {
    return Status::BadInput(fmt::format("{}: no partitions (is it `sinfo` output?)", source));
  }
  return parts;
}

std::map<std::string, std::string> PartitionMeta(const std::vector<PartitionShape>& parts) {
  std::map<std::string, std::string> meta;
  for (const auto& p : parts) {
    std::string k = "partition." + p.name + ".";
    meta[k + "nodes"] = std::to_string(p.nodes);
    meta[k + "cpus_per_node"] = fmt::format("{}", p.cpus_per_node);
    meta[k + "memory_per_node"] = std::to_string(p.memory_per_node);
    meta[k + "gpus_per_node"] = std::to_string(p.gpus_per_node);
    meta[k + "gpu_type"] = p.gpu_type;
    if (p.is_default) meta["default_partition"] = p.name;
  }
  return meta;
}

std::vector<PartitionShape> PartitionsFromMeta(const std::map<std::string, std::string>& meta) {
  std::map<std::string, PartitionShape> by_name;
  std::string def;
  for (const auto& [key, value] : meta) {
    if (key == "default_partition") def = value;
    if (key.rfind("partition.", 0) != 0) continue;
    size_t dot = key.rfind('.');
    if (dot <= 10) continue;
    std::string name = key.substr(10, dot - 10);
    std::string_view field = std::string_view(key).substr(dot + 1);
    PartitionShape& p = by_name[name];
    p.name = name;
    if (field == "nodes") p.nodes = ParseInt(value).value_or(0);
    if (field == "cpus_per_node") p.cpus_per_node = ParseDouble(value).value_or(0);
    if (field == "memory_per_node") p.memory_per_node = ParseInt(value).value_or(0);
    if (field == "gpus_per_node") p.gpus_per_node = ParseInt(value).value_or(0);
    if (field == "gpu_type") p.gpu_type = value;
  }
  std::vector<PartitionShape> out;
  for (auto& [name, p] : by_name) {
    p.is_default = name == def;
    out.push_back(std::move(p));
  }
  return out;
}

std::string PartitionsText(const std::string& cluster, const std::vector<PartitionShape>& parts) {
  std::string out;
  for (const PartitionShape& p : parts) {
    out += fmt::format("{}: partition {}{}: {} nodes of {} cores, {}{}\n", cluster, p.name,
                       p.is_default ? " (default)" : "", p.nodes, p.cpus_per_node,
                       FormatMemory(p.memory_per_node),
                       p.gpus_per_node > 0 ? fmt::format(", {} GPUs{}", p.gpus_per_node,
                                                         p.gpu_type.empty() ? "" : " " + p.gpu_type)
                                           : std::string());
  }
  return out;
}

StatusOr<std::vector<PartitionShape>> StorePartitions(Store& store, const std::string& text,
                                                      const std::string& source,
                                                      const std::string& cluster) {
  RS_ASSIGN_OR_RETURN(auto parts, ParseSinfo(text, source));
  RS_RETURN_IF_ERROR(store.PutClusterMeta(cluster, PartitionMeta(parts)));
  return parts;
}

}  // namespace rightsize
