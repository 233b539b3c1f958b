// The shape of a SLURM cluster's partitions, from `sinfo`: how many nodes, and each node's
// cores, memory and GPUs. The predictor reads a job's request against the nodes it will run on
// (a job that asks for 4 of a node's 128 cores is not one that asks for 4 of 4), and a script
// without -p runs in the default partition.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "store/store.h"

namespace rightsize {

// The sinfo output format ParseSinfo reads: partition (with '*' on the default), node count,
// CPUs per node, memory per node in MiB, generic resources.
inline constexpr const char* kSinfoFormat = "%P|%D|%c|%m|%G";

struct PartitionShape {
  std::string name;
  bool is_default = false;
  int64_t nodes = 0;
  double cpus_per_node = 0;     // the largest node's, when the partition mixes node types
  int64_t memory_per_node = 0;  // bytes
  int64_t gpus_per_node = 0;
  std::string gpu_type;  // "a100", "" when the GRES names none
  bool operator==(const PartitionShape&) const = default;
};

// Parses `sinfo --noheader --format=kSinfoFormat` (a header line, as `sinfo` prints without
// --noheader, is skipped). Lines of one partition (one per node configuration) are merged.
// A malformed line is an error naming `source`, its line and field.
StatusOr<std::vector<PartitionShape>> ParseSinfo(std::string_view text, std::string_view source);

// As cluster metadata: "partition.NAME.nodes", ".cpus_per_node", ".memory_per_node",
// ".gpus_per_node", ".gpu_type", and "default_partition".
std::map<std::string, std::string> PartitionMeta(const std::vector<PartitionShape>& parts);
// And back (keys it does not know are ignored).
std::vector<PartitionShape> PartitionsFromMeta(const std::map<std::string, std::string>& meta);

// Parses sinfo output and keeps the partitions as `cluster`'s metadata; a partition no longer
// listed keeps its old keys (a drained partition still ran jobs). Returns the partitions read.
StatusOr<std::vector<PartitionShape>> StorePartitions(Store& store, const std::string& text,
                                                      const std::string& source,
                                                      const std::string& cluster);

// The partitions as `ingest sinfo` prints them, a line each: "hpc2n: partition batch (default):
// 120 nodes of 28 cores, 122G" (and the GPUs).
std::string PartitionsText(const std::string& cluster, const std::vector<PartitionShape>& parts);

}  // namespace rightsize
