// Dataset: every job of a cluster as the model sees it — features computed at its submit time
// from the jobs that had ended by then, the values it really reached, its requests and the
// baselines' predictions. Built in one chronological pass (BuildDataset), so training and
// replay never see the future.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/job.h"
#include "core/status.h"
#include "model/history.h"
#include "model/target.h"

namespace rightsize {

// What a request of `t` is multiplied by to make resource-time, as known when the job is
// submitted: its cores for run time; for the others its time limit (1 when it has none).
inline double SubmitWeight(Target t, double cores, double time_limit) {
  if (t == Target::kRuntime) return cores;
  return std::isfinite(time_limit) && time_limit > 0 ? time_limit : 1.0;
}
// The same for a job about to be submitted, from its request (as BuildDataset reads it).
inline double SubmitWeight(Target t, const JobRecord& job) {
  auto limit = TargetRequest(job, Target::kRuntime);
  return SubmitWeight(t, job.AllocatedCpus().value_or(1.0),
                      limit ? *limit : std::numeric_limits<double>::quiet_NaN());
}

struct Dataset {
  size_t cols = 0;       // Layout().cols()
  std::vector<float> x;  // rows × cols, row-major
  std::vector<int64_t> submit;
  std::vector<int64_t> end;    // INT64_MAX when the job has no end time (never feeds history)
  std::vector<float> cores;    // allocated cores (1 when unknown): weight of resource-time
  std::vector<float> elapsed;  // seconds, NaN when unknown
  std::vector<uint32_t> user;  // the job's user, as an index (same user, same index)
  std::array<std::vector<float>, kNumTargets> y;    // NaN = not measured
  std::array<std::vector<float>, kNumTargets> req;  // NaN = no request known
  std::array<std::vector<std::array<float, kNumBaselines>>, kNumTargets> baseline;
  std::array<std::vector<float>, kNumTargets> anchor;  // History::Anchor
  size_t rows() const { return submit.size(); }
  const float* row(size_t i) const { return x.data() + i * cols; }
  // What a request of `t` is multiplied by to make resource-time: the job's cores for run
  // time (core-seconds), its run time for the others (byte-seconds, core-seconds).
  double Weight(size_t r, Target t) const {
    if (t == Target::kRuntime) return cores[r];
    return std::isfinite(elapsed[r]) ? elapsed[r] : 0.0;
  }
  // The same weight as known at submit (SubmitWeight).
  double SubmitWeight(size_t r, Target t) const {
    return rightsize::SubmitWeight(t, cores[r], req[static_cast<int>(Target::kRuntime)][r]);
  }
  // How many rows have a value for `t`.
  size_t CountWithValue(Target t) const;
};

// Sorts `jobs` by submit time (jobs without one are dropped) and builds the dataset. When
// `history` is given it receives the history as of after the last job ended (what `train`
// stores beside the model for the fallbacks).
Dataset BuildDataset(std::vector<JobRecord>& jobs, const ClusterContext& cluster,
                     History* history = nullptr);

}  // namespace rightsize
