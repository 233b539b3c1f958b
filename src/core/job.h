// The job record: what a job asked for, what it was given, what it used, and how it ended.
//
// Every source (sacct, SWF traces, the agent, Kubernetes) produces JobRecords; the store keeps
// them, the model learns from them and the report sums them. A field is std::nullopt when the
// source does not know it — never 0 or -1 — so sums can tell "unused" from "unknown".
// Plain value types; thread-compatible.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "core/status.h"
#include "core/units.h"

namespace rightsize {

// What the user asked for at submission.
struct ResourceRequest {
  std::optional<double> cpus;           // cores for the whole job
  std::optional<int64_t> memory_bytes;  // for the whole job (all nodes)
  // The amount as written and what it applies to (--mem-per-cpu, --mem per node, …).
  std::optional<int64_t> memory_per_unit_bytes;
  MemoryScope memory_scope = MemoryScope::kUnknown;
  std::optional<int> gpus;              // for the whole job
  std::string gpu_type;                 // "a100", "mixed", or "" when untyped
  std::optional<int64_t> time_limit_s;  // nullopt when unknown or unlimited
  bool time_unlimited = false;
  std::optional<int> nodes;
  std::string partition;
  std::string account;
  std::string user;
  std::string group;
  std::string job_name;
  std::string qos;

  bool operator==(const ResourceRequest&) const = default;
};

// What the scheduler reserved for the job (what others could not use).
struct Allocation {
  std::optional<double> cpus;
  std::optional<int64_t> memory_bytes;
  std::optional<int> gpus;
  std::string gpu_type;
  std::optional<int> nodes;
  std::string node_list;

  bool operator==(const Allocation&) const = default;
};

// What the job really used.
struct ResourceUsage {
  std::optional<double> elapsed_s;
  std::optional<double> cpu_time_s;       // user + system, all processes, all nodes
  std::optional<int64_t> peak_rss_bytes;  // whole job: largest step's peak (see ingest)
  std::optional<int64_t> avg_rss_bytes;
  std::optional<double> gpu_util_pct;            // mean over the job's GPUs, 0..100
  std::optional<int64_t> peak_gpu_memory_bytes;  // per job, all its GPUs together
  std::optional<int64_t> io_read_bytes;
  std::optional<int64_t> io_write_bytes;
  // Energy in joules, all nodes: the job's GPUs (NVML's energy counter, else power x time),
  // its share of the CPU packages (RAPL, by its share of the node's CPU time), and what SLURM's
  // accounting says the job's nodes consumed (ConsumedEnergyRaw; whole nodes, so not a sum of
  // the other two). nullopt when not measured: RAPL absent, no NVML, no acct_gather_energy.
  std::optional<double> gpu_energy_j, cpu_energy_j, node_energy_j;

  bool operator==(const ResourceUsage&) const = default;
};

// How the job ended.
struct JobOutcome {
  std::string state;  // COMPLETED, FAILED, TIMEOUT, OUT_OF_MEMORY, CANCELLED, …
  std::optional<int> exit_code;
  std::optional<int> signal;

  bool operator==(const JobOutcome&) const = default;
};

struct JobRecord {
  std::string cluster;
  std::string job_id;                  // "123", "123_4" (array task), "123+1" (het component)
  std::optional<int64_t> submit_time;  // Unix seconds
  std::optional<int64_t> start_time;
  std::optional<int64_t> end_time;
  ResourceRequest request;
  Allocation alloc;
  ResourceUsage usage;
  JobOutcome outcome;
  std::string source;  // "sacct", "swf", "agent", …

  // Field by field; the store skips rewriting a record that has not changed.
  bool operator==(const JobRecord&) const = default;

  // The allocation when the scheduler reported one, else the request.
  std::optional<double> AllocatedCpus() const { return alloc.cpus ? alloc.cpus : request.cpus; }
  std::optional<int64_t> AllocatedMemoryBytes() const {
    return alloc.memory_bytes ? alloc.memory_bytes : request.memory_bytes;
  }
  std::optional<int> AllocatedGpus() const { return alloc.gpus ? alloc.gpus : request.gpus; }
  const std::string& GpuType() const {
    return alloc.gpu_type.empty() ? request.gpu_type : alloc.gpu_type;
  }
};

// The job record as JSON (the stable schema documented in README.md, "Job record").
void to_json(nlohmann::json& j, const JobRecord& job);

// The reverse, for records that arrive over the wire (agents): the same schema, times as
// Unix seconds or as to_json writes them; missing or null fields stay unknown. BadInput naming
// the field ("request.cpus: expected a number, got \"four\"") for a wrong type or an unknown
// memory scope; cluster and job_id are required.
StatusOr<JobRecord> JobRecordFromJson(const nlohmann::json& j);

}  // namespace rightsize
