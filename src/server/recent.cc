#include "server/recent.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <ctime>

namespace rightsize {

namespace {

// Agents ship every few seconds; the accounting's newest end among this many recent jobs is
// found without reading the whole cluster even when agents' jobs are interleaved.
constexpr int64_t kNewestScanned = 100;

std::string UtcDay(int64_t t) {
  std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  return fmt::format("{:%Y-%m-%d}", tm);
}

}  // namespace

StatusOr<bool> RunningNow::Is(const JobRecord& job) {
  if (job.end_time || job.outcome.state != "RUNNING") return false;
  bool seen = false;
  for (const char* metric : {"cpu_cores", "memory_bytes"}) {
    RS_RETURN_IF_ERROR(store_.ReadSamples(job.cluster, job.job_id, metric,
                                          (now_s_ - kAgentSeenS) * 1000, (now_s_ + 60) * 1000,
                                          [&](const Sample&) { seen = true; }));
    if (seen) return true;
  }
  if (job.source == "agent") return false;
  RS_ASSIGN_OR_RETURN(int64_t as_of, AccountingAsOf(job.cluster));
  return as_of > 0 && now_s_ - as_of < kAccountingFreshS;
}

StatusOr<int64_t> RunningNow::AccountingAsOf(const std::string& cluster) {
  if (auto it = as_of_.find(cluster); it != as_of_.end()) return it->second;
  int64_t as_of = 0;
  JobFilter ended;
  ended.cluster = cluster;
  ended.newest = kNewestScanned;
  RS_RETURN_IF_ERROR(store_.ScanJobs(ended, [&](const JobRecord& j) {
    if (j.source == "agent" || !j.end_time) return true;
    as_of = std::max(as_of, *j.end_time);
    return false;
  }));
  JobFilter open;
  open.cluster = cluster;
  open.state = "RUNNING";
  RS_ASSIGN_OR_RETURN(JobList running, store_.ListJobs(open, JobPage{1000, std::nullopt}));
  for (const auto& j : running.jobs) {
    if (j.source == "agent" || j.end_time) continue;
    as_of = std::max({as_of, j.start_time.value_or(0), j.submit_time.value_or(0)});
  }
  as_of_[cluster] = as_of;
  return as_of;
}

StatusOr<DataWindow> DefaultWindow(Store& store, JobFilter filter, int64_t now_s, int days) {
  const int64_t span_s = int64_t{days} * 86400;
  DataWindow w;
  w.until = now_s + 1;
  w.since = now_s - span_s;
  filter.ended_since.reset();
  filter.ended_until.reset();
  filter.newest = 1;
  filter.lean = true;
  std::optional<int64_t> last_end;
  RS_RETURN_IF_ERROR(store.ScanJobs(filter, [&](const JobRecord& j) {
    last_end = j.end_time;
    return false;
  }));
  if (!last_end || *last_end >= w.since) return w;
  w.shifted = true;
  w.until = *last_end + 1;
  w.since = w.until - span_s;
  w.note = fmt::format("no jobs ended in the last {} days; showing the {} days up to {}", days,
                       days, UtcDay(*last_end));
  return w;
}

}  // namespace rightsize
