// Decoding the agents' telemetry batches (rightsize.telemetry/v1, docs/api.md).
//
// DecodeTelemetry checks a batch entry by entry: a job entry with any invalid part (a sample
// that is not [time, number], a stack count that is not a positive integer, a job record with
// a wrong type) is rejected whole and listed with the JSON path of the first problem, so a job
// never gets half a batch; the other entries are kept. A body that is not JSON, not an object,
// of another schema, or without agent and seq is BadInput and nothing is kept. Limits bound
// what one batch may hold (a buggy or hostile agent cannot make the server allocate without
// bound). Pure; thread-safe; never throws.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/telemetry.h"

namespace rightsize {

struct TelemetryLimits {
  size_t max_jobs = 10'000;                // job entries per batch
  size_t max_samples_per_metric = 86'400;  // a day at 1 Hz
  size_t max_metrics = 64;
  size_t max_stacks = 20'000;
  size_t max_stack_bytes = 8'192;  // one folded stack
  size_t max_name_bytes = 128;     // metric names
  int max_depth = 32;              // nesting of arrays and objects (checked before parsing)
  size_t max_diagnosis_bytes = size_t{256} * 1024;  // one job's diagnosis document
};

struct RejectedEntry {
  std::string path;   // "jobs[1].samples.cpu_cores[3]"
  std::string error;  // "expected [time, value] with numbers, got [\"x\",1]"
};

struct TelemetryBatch {
  std::string agent;
  int64_t seq = 0;
  std::vector<JobTelemetry> jobs;  // the valid entries, samples sorted by time
  std::vector<RejectedEntry> rejected;
  int64_t samples = 0;  // in the valid entries
  int64_t stacks = 0;
};

StatusOr<TelemetryBatch> DecodeTelemetry(std::string_view body, const TelemetryLimits& limits = {});

}  // namespace rightsize
