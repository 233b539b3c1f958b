#include "model/dataset.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <string>
#include <unordered_map>

namespace rightsize {

size_t Dataset::CountWithValue(Target t) const {
  const auto& v = y[static_cast<int>(t)];
  return static_cast<size_t>(
      std::count_if(v.begin(), v.end(), [](float f) { return !std::isnan(f); }));
}

Dataset BuildDataset(std::vector<JobRecord>& jobs, const ClusterContext& cluster,
                     History* history_out) {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  std::erase_if(jobs, [](const JobRecord& j) { return !j.submit_time.has_value(); });
  std::stable_sort(jobs.begin(), jobs.end(), [](const JobRecord& a, const JobRecord& b) {
    return *a.submit_time < *b.submit_time;
  });
  Dataset d;
  const FeatureLayout& layout = Layout();
  d.cols = layout.cols();
  size_t n = jobs.size();
  d.x.resize(n * d.cols);
  d.submit.resize(n);
  d.end.resize(n);
  d.cores.resize(n);
  d.elapsed.resize(n);
  d.user.resize(n);
  std::unordered_map<std::string, uint32_t> users;
  for (int t = 0; t < kNumTargets; ++t) {
    d.y[t].resize(n);
    d.req[t].resize(n);
    d.baseline[t].resize(n);
    d.anchor[t].resize(n);
  }
  History history;
  // Jobs submitted but not yet ended, soonest end first.
  using Pending = std::pair<int64_t, size_t>;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> pending;
  for (size_t i = 0; i < n; ++i) {
    const JobRecord& job = jobs[i];
    int64_t now = *job.submit_time;
    while (!pending.empty() && pending.top().first <= now) {
      history.AddFinished(jobs[pending.top().second]);
      pending.pop();
    }
    d.submit[i] = now;
    d.end[i] = job.end_time.value_or(std::numeric_limits<int64_t>::max());
    d.cores[i] = static_cast<float>(job.AllocatedCpus().value_or(1.0));
    d.user[i] = users.emplace(job.request.user, static_cast<uint32_t>(users.size())).first->second;
    d.elapsed[i] = job.usage.elapsed_s ? static_cast<float>(*job.usage.elapsed_s) : kNaN;
    history.Features(job, now, cluster, d.x.data() + i * d.cols);
    for (Target t : kAllTargets) {
      int ti = static_cast<int>(t);
      auto y = TargetValue(job, t);
      auto r = TargetRequest(job, t);
      d.y[ti][i] = y ? static_cast<float>(*y) : kNaN;
      d.req[ti][i] = r ? static_cast<float>(*r) : kNaN;
      d.baseline[ti][i] = history.Baselines(job, now, t);
      d.anchor[ti][i] = history.Anchor(job, t, d.baseline[ti][i]);
    }
    if (job.end_time) pending.emplace(*job.end_time, i);
  }
  if (history_out != nullptr) {
    while (!pending.empty()) {
      history.AddFinished(jobs[pending.top().second]);
      pending.pop();
    }
    *history_out = std::move(history);
  }
  return d;
}

}  // namespace rightsize
