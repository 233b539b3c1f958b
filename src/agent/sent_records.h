// SentRecords: which job entries of a batch the server still needs when the samples go to a TSDB
// by remote write (`agent --tsdb-write-url`, docs/scale-tsdb.md).
//
// Without samples, the entry of a running job whose record is the one the server already got
// carries nothing new: the server would decode it and find its stored record equal. Such an
// entry is left out of the server's batch, and a batch left with no entry is not posted at all
// (its samples still go to the TSDB). An entry is kept when the job is new to this agent, its
// record changed (it ended: end time, outcome, usage), or it has stacks or a diagnosis. Once
// every kRefreshMs a batch keeps all its entries (so a server that lost a record, e.g. a batch
// dropped for good or a fresh store, has it again within that time): one post a minute for all
// the node's jobs, not one per job whatever their start times. What the server shows does not
// change: a job's liveness, live efficiency and charts come from its samples in the TSDB.
//
// Plain value type; not thread-safe (the shipper holds it under its lock).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/telemetry.h"

namespace rightsize {

class SentRecords {
 public:
  static constexpr int64_t kRefreshMs = 60'000;
  // Jobs remembered at most (jobs never seen to end, e.g. an agent's view lost): beyond it the
  // memory is emptied and every job's record goes once more.
  static constexpr size_t kMaxJobs = 100'000;

  // Keeps the entries of a batch made at `now_ms` (their samples already taken out) that go to
  // the server, with the same entries of `parallel` (when it is as long as `jobs`; e.g.
  // energy_before_j), and remembers them as sent. A job that ended is forgotten once sent.
  template <typename T>
  void Filter(std::vector<JobTelemetry>* jobs, std::vector<T>* parallel, int64_t now_ms) {
    const bool both = parallel != nullptr && parallel->size() == jobs->size();
    // A clock set back refreshes too: better a record twice than one missing.
    const bool refresh = now_ms - refreshed_ms_ >= kRefreshMs || now_ms < refreshed_ms_;
    if (refresh) refreshed_ms_ = now_ms;
    size_t kept = 0;
    for (size_t i = 0; i < jobs->size(); ++i) {
      if (!Keep((*jobs)[i], refresh)) continue;
      if (kept != i) {
        (*jobs)[kept] = std::move((*jobs)[i]);
        if (both) (*parallel)[kept] = std::move((*parallel)[i]);
      }
      ++kept;
    }
    jobs->resize(kept);
    if (both) parallel->resize(kept);
  }

  size_t size() const { return sent_.size(); }

 private:
  // Whether the entry `t` goes (`refresh`: every entry goes); remembers it when it does.
  bool Keep(const JobTelemetry& t, bool refresh);

  std::map<std::pair<std::string, std::string>, JobRecord> sent_;
  int64_t refreshed_ms_ = 0;
};

}  // namespace rightsize
