#include "agent/sent_records.h"

namespace rightsize {

bool SentRecords::Keep(const JobTelemetry& t, int64_t now_ms) {
  std::pair<std::string, std::string> key{t.job.cluster, t.job.job_id};
  if (t.job.end_time) {
    sent_.erase(key);
    return true;
  }
  auto it = sent_.find(key);
  if (it != sent_.end() && t.stacks.empty() && !t.diagnosis && t.samples.empty() &&
      it->second.record == t.job && now_ms - it->second.at_ms < kRefreshMs &&
      now_ms >= it->second.at_ms) {
    return false;
  }
  if (it == sent_.end()) {
    if (sent_.size() >= kMaxJobs) sent_.clear();
    it = sent_.emplace(std::move(key), Sent{}).first;
  }
  it->second.record = t.job;
  it->second.at_ms = now_ms;
  return true;
}

}  // namespace rightsize
