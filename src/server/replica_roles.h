// Replica roles: the work that ONE of several `rightsize serve` replicas sharing a store does for
// all of them (docs/scale-replicas.md): training the models every period ("train") and the SLURM
// follower ("follow"). Everything else a replica does reads or writes the store, so any replica
// answers any request.
//
// A role is held through Store::TryLead on a store connection of its own, kept open while the
// role's work runs (PostgreSQL: a session advisory lock; SQLite: a flock beside the database).
// A replica that does not hold it tries again every retry period, so when the leader dies (its
// lock goes with its process or connection) another one takes the role at its next try.
//
// Models are read by version from the store (Store::LatestModelVersion on every prediction), so
// a model the leader trains is what every replica predicts with from its next request on.
//
// RunElected runs on the calling thread until `stop`; the work and the lines it says run there
// too. TrainDueClusters is thread-compatible (one per store connection). Failures (the store
// cannot be opened, a cluster cannot be trained) are said and retried at the next period;
// nothing here ends the server.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "store/store.h"

namespace rightsize {

struct ElectedOptions {
  std::string db;  // the store's location (OpenStore)
  std::string role;
  double every_s = 3600;  // while leading: the work runs at once, then this often
  double retry_s = 30;    // while another replica leads: how often to try again
};

// Holds `options.role` when it can and, while holding it, calls `work` with the store
// connection that holds it (each period; a `work` that blocks until `stop`, as the follower
// does, is called once and again if it returns early). `say` gets one line whenever this replica
// takes the role, finds another holding it (once per change) or cannot try.
void RunElected(const ElectedOptions& options, const std::atomic<bool>& stop,
                const std::function<void(Store& store)>& work,
                const std::function<void(const std::string& line)>& say);

// One training pass over the store's clusters: each cluster with at least `min_new_jobs`
// finished jobs more than when the last pass looked at it, or without a model that no pass has
// looked at, is trained (predict/train.h) and gets a new model version; a cluster trained before
// any pass looked (`rightsize train`) starts from that model. What a pass saw is kept in the
// cluster's metadata (kTrainedOnFinishedJobsMeta), so the replica that takes the role over goes
// on from there. A cluster without enough measured jobs to train is remembered the same way:
// it is tried again once `min_new_jobs` more have ended.
struct TrainOutcome {
  std::string cluster;
  int64_t version = 0;  // the new model's; 0 when not trained
  std::string line;     // what happened, one line
};
inline constexpr const char* kTrainedOnFinishedJobsMeta = "rightsize.train.finished_jobs";
StatusOr<std::vector<TrainOutcome>> TrainDueClusters(Store& store, int64_t min_new_jobs);

}  // namespace rightsize
