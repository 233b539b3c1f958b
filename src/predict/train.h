// Training a cluster: the prediction models of every target built from the cluster's finished
// jobs in the store, with the risk correction carried forward from the previous version, and
// stored as a new model version. Cheap enough to run every hour (`rightsize train`, the
// server's schedule).
//
// Thread-compatible: one training per cluster at a time (the store's versions are the only
// shared state). Failures: the store's, and BadInput when no target has enough measured jobs.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "store/store.h"

namespace rightsize {

// What one training did: the summary document (cluster, version, jobs, bytes, seconds, and
// per target how it was trained or why not) and the same as the lines `train` prints.
struct TrainSummary {  // NOLINT(bugprone-exception-escape): json's move may throw
  nlohmann::json doc;
  std::string text;
};

// Trains `cluster` from the jobs in `store` and stores the model as a new version.
StatusOr<TrainSummary> TrainCluster(Store& store, const std::string& cluster);

// The clusters `train` trains: the one given, else every cluster with jobs in the store;
// NotFound when there are none.
StatusOr<std::vector<std::string>> ClustersToTrain(Store& store, const std::string& cluster);

}  // namespace rightsize
