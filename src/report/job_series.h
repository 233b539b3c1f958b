// A job's sampled series as charts read them: each metric's samples in steps of `step` seconds,
// each point [time, mean, max], with what the job holds of each resource beside them ("used vs
// allocated"). The one home of the document that GET /api/v1/jobs/{cluster}/{id}/series and
// the MCP server's rightsize://job/{id}/series resource answer with (docs/api.md).
//
// Reads the store only; thread-safe as far as the Store is. Failures: InvalidArgument for a
// window that cannot be answered (`to` before `from`, more than kMaxSeriesPoints points per
// metric), the store's errors as they are.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/status.h"
#include "report/prices.h"
#include "store/store.h"

namespace rightsize {

inline constexpr double kMaxSeriesPoints = 100000;  // per metric

struct SeriesWindow {
  std::vector<std::string> metrics;  // empty = every metric the job has samples of
  std::optional<double> from_s;      // default: the job's start
  std::optional<double> to_s;        // default: the job's end (now while it runs) + 60 s
  std::optional<double> step_s;      // default (or <= 0): at most 1,000 points
};

// {"from", "to", "step", "series": {metric: [[t, mean, max], …]}, "limits": {metric: value}}.
StatusOr<nlohmann::json> JobSeriesJson(Store& store, const JobRecord& job,
                                       const SeriesWindow& window, const PriceTable& prices,
                                       int64_t now_s);

// What `job` holds of the resource `metric` measures (cores, bytes, 100 for a utilisation in
// percent); nullopt when unknown or not a held resource.
std::optional<double> SeriesLimit(const JobRecord& job, const std::string& metric,
                                  const PriceTable& prices);

}  // namespace rightsize
