// ModelCache: a long-running process (the server) reads a cluster's model once per version,
// not once per prediction: deserialising the boosters costs milliseconds, predicting with them
// microseconds. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>

#include "core/mutex.h"
#include "core/status.h"
#include "model/predictor.h"

namespace rightsize {

class ModelCache {
 public:
  // A model set and the lock its users hold while they predict with it: shared for
  // Booster::PredictOne (XGBoost's in-place prediction, thread-safe on one booster since
  // XGBoost 1.1: its scratch space is per thread), exclusive for the predictions through a
  // DMatrix (Predict, Contributions), which XGBoost does not promise to run beside others.
  struct Entry {
    std::shared_ptr<const ModelSet> set;
    std::shared_ptr<std::shared_mutex> mu;
  };

  // The cluster's model of `version`: the cached one when it is that version, else what
  // `load` returns (then cached, replacing the older one). A failed load is not cached.
  StatusOr<Entry> Get(const std::string& cluster, int64_t version,
                      const std::function<StatusOr<ModelSet>()>& load);

  // How many times `load` ran (the tests check that a second prediction does not load).
  int64_t loads() const;

 private:
  mutable Mutex mu_;
  std::map<std::string, Entry> by_cluster_ GUARDED_BY(mu_);
  int64_t loads_ GUARDED_BY(mu_) = 0;
};

}  // namespace rightsize
