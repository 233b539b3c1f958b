// Workload: job records (SWF, sacct, the store) turned into the simulator's jobs, and the
// what-if limits read from `rightsize eval --jobs` lines.
//
// A record becomes a job when its submit time, run time (> 0), time limit (> 0) and size are
// known and the size fits the machine; the rest are counted in notes, never silently dropped.
// A run longer than its limit is cut to the limit (the real scheduler ended it there). Jobs are
// ordered by submit time, then by numeric job id (the order of a trace's lines), as the
// derived traces' simulator saw them. Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/status.h"
#include "sim/simulator.h"

namespace rightsize::sim {

enum class SizeUnit { kProcessors, kNodes };

struct Workload {
  std::vector<SimJob> jobs;
  std::vector<int64_t> trace_start_s;  // the record's own start (-1 unknown), same order
  std::vector<std::string> notes;      // "12 jobs without a time limit left out"
  int64_t records = 0;
};

// `machine` > 0 leaves out jobs larger than it (counted in notes).
Workload WorkloadFromRecords(const std::vector<JobRecord>& records, SizeUnit unit, int64_t machine);

// One scored runtime job of an `eval --jobs` file: the suggested requests by risk and the
// baselines' predictions (seconds).
struct PredictedJob {
  std::map<double, double> suggested;  // risk -> request
  std::map<std::string, double> baselines;
  // The model's run-time distribution: "point" (its median), "p2_5", "p10", "p90", "p97_5";
  // bounded ends only. A job eval answered by a fallback baseline has none of them.
  std::map<std::string, double> quantiles;
};

// Reads the runtime lines of an `eval --jobs` file, keyed by job id. BadInput naming the line
// for a line that is not a JSON object of that form; IoError for a file that cannot be read.
StatusOr<std::map<std::string, PredictedJob>> ReadPredictions(const std::string& path);

// The what-if: each job predicted in `predictions` runs under the limit `source` gives it
// ("rightsize" at `risk`, or a baseline name such as "last2" or "user_mean"), rounded up to a
// whole second, and is resubmitted with its own request when killed. Jobs with no prediction
// keep their request. Returns how many jobs got a new limit; InvalidArgument when `risk` is not
// one the file holds.
StatusOr<int64_t> ApplyLimits(const std::map<std::string, PredictedJob>& predictions,
                              const std::string& source, double risk, std::vector<SimJob>& jobs);

// The names ApplyEstimates takes, in ascending order of the distribution.
inline constexpr const char* kQuantileNames[] = {"p2_5", "p10", "point", "p90", "p97_5"};

// EASY++ on rightsize's own predictions: each job of `predictions` with the model's quantile
// `estimate` ("point", "p10", ...) is planned with it (rounded up to a second, capped by its
// limit) and, when it outlives it, with each of `corrections` in turn (quantile names; the
// steps not above the previous one are skipped), then its limit. Jobs without
// that quantile keep the policy's own predictor (last2 in the simulation). Returns how many
// jobs got an estimate; InvalidArgument for a name not in kQuantileNames.
StatusOr<int64_t> ApplyEstimates(const std::map<std::string, PredictedJob>& predictions,
                                 const std::string& estimate,
                                 const std::vector<std::string>& corrections,
                                 std::vector<SimJob>& jobs);

}  // namespace rightsize::sim
