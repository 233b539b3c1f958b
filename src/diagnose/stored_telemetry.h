// The store's side of diagnosis: StoredTelemetry, what the agents stored about a job, read back
// for its diagnosis; SaveDiagnosis, a diagnosis kept with its job.
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

// Adds what the store knows of job `job_id` (of `cluster`, "" = any) to `input`: its record
// and StoredTelemetry. NotFound when the store has no such job.
Status AddStoredJob(Store& store, const std::string& cluster, const std::string& job_id,
                    const PriceTable* prices, DiagnoseInput* input);

// Keeps `d` with `job` in the store (class, confidence and the rightsize.diagnosis/v1 document),
// replacing an earlier one, as `diagnose JOBID` and the follower do.
Status SaveDiagnosis(Store& store, const JobRecord& job, const Diagnosis& d, int64_t now_s);

}  // namespace rightsize
