// Decoding the agents' telemetry batches (rightsize.telemetry/v1, docs/api.md).
//
// DecodeTelemetry checks a batch entry by entry: a job entry with any invalid part (a sample
// that is not [time, number], a stack count that is not a positive integer, a job record with
// a wrong type) is rejected whole and listed with the JSON path of the first problem, so a job
// never gets half a batch; the other entries are kept. Every number must be plausible, not only
// well-formed: a CPU time of 1e300 s, memory of 9e18 bytes, a negative or NaN sample, a time
// before 1970 or (with the server's clock in the limits) far from now rejects its entry with the
// field and the range, so one bad value can neither be stored nor poison a report. A body that
// is not JSON, not an object, of another schema, or without agent and seq is BadInput and
// nothing is kept. Limits bound what one batch may hold (a buggy or hostile agent cannot make
// the server allocate without bound). Pure (the clock is a parameter); thread-safe; never
// throws.
#pragma once

#include <cstdint>
#include <map>
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
  // The server's clock (Unix seconds; 0: not checked). With it, a sample is at most
  // max_sample_age_s old and a job's times at most max_record_age_s old (an agent's spool holds
  // batches through an outage; a pod can live for years), and neither lies more than
  // max_future_s ahead (clock skew).
  int64_t now_s = 0;
  int64_t max_future_s = 86'400;
  int64_t max_sample_age_s = int64_t{366} * 86'400;
  int64_t max_record_age_s = int64_t{3653} * 86'400;
  // A batch's seq is Unix milliseconds at the agent (agent/shipper.h): one further than this
  // ahead of the server's clock is refused (ApiServer), so a forged seq of 2^63 - 1 cannot
  // lift an agent's last seq out of its reach.
  int64_t max_seq_ahead_ms = int64_t{3'600} * 1'000;
};

struct RejectedEntry {
  std::string path;   // "jobs[1].samples.cpu_cores[3]"
  std::string error;  // "expected [time, value] with numbers, got [\"x\",1]"
};

struct TelemetryBatch {
  std::string agent;
  int64_t seq = 0;
  std::vector<JobTelemetry> jobs;  // the valid entries, samples sorted by time
  // Parallel to `jobs`: the entry's "energy_before_j", the job's cumulative *_energy_j series
  // at the end of the agent's previous batch of it, by metric (empty when the agent did not
  // say). What a batch adds to the energy counter is then its own, whichever replica stored
  // the batch before.
  std::vector<std::map<std::string, double>> energy_before_j;
  std::vector<RejectedEntry> rejected;
  int64_t samples = 0;  // in the valid entries
  int64_t stacks = 0;
};

StatusOr<TelemetryBatch> DecodeTelemetry(std::string_view body, const TelemetryLimits& limits = {});

// Telemetry identity. An agent token is bound to the agent names it may use, and an agent's
// batch numbers are kept per name AND token, so a batch sent with one token can never move the
// numbers of an agent that uses another.
//
// A short stable name of a token (16 hex digits of a 64-bit FNV-1a hash): it keys the token's
// batch numbers in the store without storing the token itself.
std::string AgentTokenId(std::string_view token);
// Whether `agent` matches one of `patterns` (shell patterns, fnmatch: "gpu1/*", "gpu1/node0?").
bool AgentNameAllowed(const std::string& agent, const std::vector<std::string>& patterns);
// The store's key of an agent's batch numbers: the name alone on an open server (no token),
// else "<name>#<token id>".
std::string AgentSeqKey(std::string_view agent, std::string_view token_id);

}  // namespace rightsize
