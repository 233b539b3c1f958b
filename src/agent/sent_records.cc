#include "agent/sent_records.h"

namespace rightsize {

bool SentRecords::Keep(const JobTelemetry& t, bool refresh) {
  std::pair<std::string, std::string> key{t.job.cluster, t.job.job_id};
  if (t.job.end_time) {
    sent_.erase(key);
    return true;
  }
  auto it = sent_.find(key);
  if (it != sent_.end() && !refresh && t.stacks.empty() && !t.diagnosis && t.samples.empty() &&
      it->second == t.job) {
    return false;
  }
  if (it == sent_.end()) {
    if (sent_.size() >= kMaxJobs) sent_.clear();
    sent_.emplace(std::move(key), t.job);
  } else {
    it->second = t.job;
  }
  return true;
}

}  // namespace rightsize
