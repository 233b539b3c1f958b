// A running job's use so far, from the samples its node's agent has shipped: the job card and
// the dashboard show live efficiency before any accounting record exists.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/job.h"
#include "core/status.h"
#include "report/prices.h"
#include "store/store.h"

namespace rightsize {

struct LiveUsage {
  ResourceUsage so_far;                     // since the job started, up to the newest sample
  int64_t as_of_s = 0;                      // the newest sample's time (0: none yet)
  std::optional<double> cores_now;          // mean of the last minute's samples
  std::optional<int64_t> memory_bytes_now;  // the newest sample
};

// Elapsed is now - start (unknown when the job has no sample at all: no agent watches it); CPU
// seconds are the cores series integrated over its sampling intervals (a gap longer than
// kMaxGapS, an agent that was down, counts no CPU rather than a guess); memory is the largest
// and mean sampled RSS; GPU the mean utilisation and largest memory. Figures with no samples
// stay unknown.
StatusOr<LiveUsage> UsageSoFar(Store& store, const JobRecord& job, int64_t now_s);
inline constexpr int64_t kMaxGapS = 60;

// For a job still running (no end time): `job` with its usage filled from the samples where
// the record has none. An ended job comes back unchanged.
StatusOr<JobRecord> WithUsageSoFar(Store& store, JobRecord job, int64_t now_s,
                                   LiveUsage* live = nullptr);

// What `rightsize job` shows of one job: its record (with its use so far while it runs), the
// live figures, the diagnosis kept with it (null when none) and its phases (report/job_phases.h:
// null when it has no samples). NotFound when the store has no such job; the store's errors.
struct JobView {  // NOLINT(bugprone-exception-escape): json's move may throw
  JobRecord job;
  LiveUsage live;
  nlohmann::json diagnosis;
  nlohmann::json phases;
};
StatusOr<JobView> ViewJob(Store& store, const std::string& cluster, const std::string& job_id,
                          int64_t now_s);
// The job card's document with "diagnosis", "live" (null once the job ended) and "phases", and
// its text with the live line, the phases (when more than one) and the diagnosis's summary.
nlohmann::json JobViewJson(const JobView& view, const PriceTable& prices);
std::string JobViewText(const JobView& view, const PriceTable& prices);

}  // namespace rightsize
