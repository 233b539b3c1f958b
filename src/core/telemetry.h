// What an agent sends about a job between two batches: its record so far, new samples of each
// metric and new stack samples. The agent builds it, the server decodes and stores it; it lives
// in core so neither depends on the other nor on the store.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/job.h"

namespace rightsize {

// One sample of a job's metric, time in milliseconds since the epoch.
struct Sample {
  int64_t t_ms = 0;
  double value = 0;
};

// What the agent concluded about a job that failed on its node, where its logs are (a
// Kubernetes container's under /var/log/pods): stored with the job as `diagnose` would.
struct ShippedDiagnosis {
  std::string cls;  // "host_oom", …
  double confidence = 0;
  std::string document;  // the rightsize.diagnosis/v1 JSON
  bool operator==(const ShippedDiagnosis&) const = default;
};

// One job's share of an agent's telemetry batch.
struct JobTelemetry {
  JobRecord job;  // stored as the job's record unless an accounting source already has it
  std::map<std::string, std::vector<Sample>> samples;  // metric -> samples, oldest first
  std::map<std::string, int64_t> stacks;               // folded stack -> samples to add
  std::optional<ShippedDiagnosis> diagnosis;           // a failed job, diagnosed on its node
};

}  // namespace rightsize
