// A cluster as the prediction service reads it from the store: its shape (partitions, nodes,
// total CPUs), its finished jobs, and which cluster a command means when none is named.
//
// Pure functions over a Store; thread-safe as the Store is. Failures of the store are returned.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/job.h"
#include "core/status.h"
#include "model/history.h"
#include "store/store.h"

namespace rightsize {

// The cluster's shape as the store keeps it (SWF headers, `ingest sinfo`/`ingest slurm`):
// total CPUs, each partition's nodes and the default partition. Empty when nothing is known.
ClusterContext ContextFor(Store& store, const std::string& cluster);

// Every job of `cluster` in the store, in the store's order.
StatusOr<std::vector<JobRecord>> LoadJobs(Store& store, const std::string& cluster);

// The cluster to work on: the one given (which must have jobs), else the store's only one.
// NotFound when the store has no jobs (or none of `given`), InvalidArgument when several
// clusters make the choice ambiguous.
StatusOr<std::string> PickCluster(Store& store, const std::string& given);

// An accounting file (SWF, sacct -P or ClusterCockpit CSV; `format` "" or "auto" guesses from
// the name) read into a private in-memory store, for replays that must not touch the user's
// store: the jobs of the picked cluster and its shape. Malformed lines are skipped; how many,
// and the first, is returned in `skipped_note` ("" when none).
struct LoadedTrace {
  std::vector<JobRecord> jobs;
  ClusterContext context;
  std::string skipped_note;
};
StatusOr<LoadedTrace> LoadTrace(const std::string& path, std::string format,
                                const std::string& cluster);

}  // namespace rightsize
