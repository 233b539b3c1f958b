#include "server/replica_roles.h"

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <thread>

#include "core/units.h"
#include "predict/train.h"

namespace rightsize {

namespace {

// Sleeps until `seconds` passed or `stop` is set; false when stopped.
bool WaitFor(double seconds, const std::atomic<bool>& stop) {
  auto until = std::chrono::steady_clock::now() +
               std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                   std::chrono::duration<double>(seconds));
  while (!stop) {
    auto now = std::chrono::steady_clock::now();
    if (now >= until) return true;
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(until - now, std::chrono::milliseconds(100)));
  }
  return false;
}

}  // namespace

void RunElected(const ElectedOptions& options, const std::atomic<bool>& stop,
                const std::function<void(Store& store)>& work,
                const std::function<void(const std::string& line)>& say) {
  std::unique_ptr<Store> store;  // holds the role while this replica leads
  enum class State { kUnknown, kLeading, kFollowing, kFailing } state = State::kUnknown;
  while (!stop) {
    StatusOr<bool> leads = Status::Internal("no store");
    if (!store) {
      auto opened = OpenStore(options.db);
      if (opened.ok()) {
        store = std::move(*opened);
      } else {
        leads = opened.status();
      }
    }
    if (store) leads = store->TryLead(options.role);
    if (!leads.ok()) {
      if (state != State::kFailing) {
        say(fmt::format("cannot try to lead the '{}' role (trying again every {:g} s): {}",
                        options.role, options.retry_s, leads.status().ToString()));
      }
      state = State::kFailing;
      store.reset();  // a broken connection is opened afresh
      if (!WaitFor(options.retry_s, stop)) break;
      continue;
    }
    if (!*leads) {
      if (state != State::kFollowing) {
        say(
            fmt::format("another replica holds the '{}' role; this one takes it over if that one "
                        "stops (trying every {:g} s)",
                        options.role, options.retry_s));
      }
      state = State::kFollowing;
      if (!WaitFor(options.retry_s, stop)) break;
      continue;
    }
    if (state != State::kLeading) {
      say(fmt::format("this replica holds the '{}' role", options.role));
    }
    state = State::kLeading;
    work(*store);
    if (!WaitFor(options.every_s, stop)) break;
  }
}

StatusOr<std::vector<TrainOutcome>> TrainDueClusters(Store& store, int64_t min_new_jobs) {
  std::vector<TrainOutcome> out;
  auto clusters = ClustersToTrain(store, "");
  if (!clusters.ok()) {
    if (clusters.status().code() == Status::Code::kNotFound) return out;  // no jobs yet
    return clusters.status();
  }
  for (const std::string& cluster : *clusters) {
    JobFilter finished;
    finished.cluster = cluster;
    finished.ended_since = 0;
    RS_ASSIGN_OR_RETURN(int64_t ended, store.CountJobs(finished));
    RS_ASSIGN_OR_RETURN(auto meta, store.GetClusterMeta(cluster));
    auto seen = meta.find(kTrainedOnFinishedJobsMeta);
    std::optional<int64_t> before;
    if (seen != meta.end()) before = ParseInt(seen->second);
    if (!before && store.LatestModelVersion(cluster).ok()) {
      // Trained before any pass looked (`rightsize train`): that model is where passes start,
      // so a server started on a trained store does not train it all again at once.
      RS_RETURN_IF_ERROR(
          store.PutClusterMeta(cluster, {{kTrainedOnFinishedJobsMeta, std::to_string(ended)}}));
      continue;
    }
    if (before && ended - *before < min_new_jobs) continue;
    TrainOutcome o;
    o.cluster = cluster;
    auto trained = TrainCluster(store, cluster);
    if (trained.ok()) {
      o.version = trained->doc.value("version", int64_t{0});
      o.line = fmt::format("trained cluster {}: model version {} ({} finished jobs, {} new)",
                           cluster, o.version, ended, before ? ended - *before : ended);
    } else if (trained.status().code() == Status::Code::kBadInput) {
      // Not enough measured jobs yet: tried again once more have ended.
      o.line = fmt::format("cluster {} not trained: {}", cluster, trained.status().message());
    } else {
      return trained.status().WithContext("training cluster " + cluster);
    }
    RS_RETURN_IF_ERROR(
        store.PutClusterMeta(cluster, {{kTrainedOnFinishedJobsMeta, std::to_string(ended)}}));
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace rightsize
