// A stored job's phases: where inside the job its reservation sat idle, from the samples the
// agent or `rightsize run` stored (src/phases cuts the series; docs/phases.md), against what the
// job was allocated. The one home of what `rightsize job` prints under "phases", what
// GET /api/v1/jobs/{cluster}/{id}/phases answers and what the dashboard's job page draws.
//
// Reads the store only; thread-safe as far as the Store is. Failures: the store's errors.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/job.h"
#include "core/status.h"
#include "store/store.h"

namespace rightsize {

// phases/phases.h's PhasesJson document with times in seconds from the job's start (its first
// sample when the record has no start), plus "from" (the Unix second that 0 stands for) and
// "samples" (points read). Null when the job has no samples of a metric phases read.
StatusOr<nlohmann::json> JobPhasesJson(Store& store, const JobRecord& job);

// The text `rightsize job` prints: one line per phase and the split's freed capacity; empty
// when the document is null or holds a single phase (nothing to split).
std::string JobPhasesText(const nlohmann::json& doc);

}  // namespace rightsize
