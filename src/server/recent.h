// What "now" means on a store that may hold old data: which RUNNING rows are running now, and
// which window the dashboard and the report show when nothing ended recently.
//
// Running now (docs/api.md, "Running now"): a job whose state is RUNNING and that has no end
// time counts as running now when it was seen alive recently, that is
//   - an agent sent a sample for it in the last kAgentSeenS seconds, or
//   - it comes from accounting (not from an agent) and the cluster's accounting is fresh: its
//     newest record (the latest end time, or start or submit time of a job still open) is less
//     than kAccountingFreshS old.
// Anything else without an end time (an UNKNOWN job of an old trace, RUNNING rows of a sacct
// export made long ago, a job whose agent went away) is not running now: the overview does not
// count it, the job list does not give it an elapsed time that grows with the clock.
//
// Not thread-safe: one RunningNow per request (it caches each cluster's accounting time).
// Store errors come back as the store's Status.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/job.h"
#include "core/status.h"
#include "store/store.h"

namespace rightsize {

inline constexpr int64_t kAgentSeenS = 600;
inline constexpr int64_t kAccountingFreshS = 86400;

class RunningNow {
 public:
  RunningNow(Store& store, int64_t now_s) : store_(store), now_s_(now_s) {}

  // Whether `job` is running now; false at once for a job with an end time or another state.
  StatusOr<bool> Is(const JobRecord& job);

 private:
  // The newest time the cluster's accounting records (0 when it has no accounting record).
  StatusOr<int64_t> AccountingAsOf(const std::string& cluster);

  Store& store_;
  int64_t now_s_;
  std::map<std::string, int64_t> as_of_;
};

// A window of whole days for a view that has no dates given.
struct DataWindow {
  int64_t since = 0;     // Unix seconds, included
  int64_t until = 0;     // excluded
  bool shifted = false;  // no job ended in the last `days`: the window ends at the last end
  std::string note;      // when shifted: "no jobs ended in the last 14 days; showing ..."
};

// The last `days` days up to `now_s`, or, when no job matching `filter` (its cluster and user;
// its time bounds are ignored) ended in them but some ended before, the `days` days up to the
// last job that ended, with a note that says so.
StatusOr<DataWindow> DefaultWindow(Store& store, JobFilter filter, int64_t now_s, int days);

}  // namespace rightsize
