// StoredTelemetry: what the agents stored about a job, read back for its diagnosis.
//
// The memory series of its last ten minutes (enough for the trend before an OOM kill), its GPU
// memory peak and, from the price table's GPU models, its GPUs' capacity, how long before its
// end the node went silent, and its five hottest stacks. Reads only; thread-safe as far as the
// Store is. Failure: the store's errors, as they are.
#pragma once

#include <optional>

#include "core/job.h"
#include "core/status.h"
#include "diagnose/diagnosis.h"
#include "report/prices.h"
#include "store/store.h"

namespace rightsize {

// nullopt when the agents stored nothing about the job. `prices` gives the GPU memory of the
// job's GPU model (nullptr: the capacity stays unknown).
StatusOr<std::optional<Telemetry>> StoredTelemetry(Store& store, const JobRecord& job,
                                                   const PriceTable* prices);

}  // namespace rightsize
