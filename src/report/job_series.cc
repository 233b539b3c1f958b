#include "report/job_series.h"

#include <algorithm>
#include <cmath>

namespace rightsize {

std::optional<double> SeriesLimit(const JobRecord& job, const std::string& metric,
                                  const PriceTable& prices) {
  if (metric == "cpu_cores") return job.AllocatedCpus();
  if (metric == "memory_bytes" || metric == "cgroup_memory_bytes") {
    auto m = job.AllocatedMemoryBytes();
    return m ? std::optional<double>(static_cast<double>(*m)) : std::nullopt;
  }
  if (metric == "gpu_util_pct") return 100.0;
  if (metric == "gpu_memory_bytes") {
    double bytes = prices.GpuMemoryBytes(job.GpuType(), job.AllocatedGpus().value_or(0));
    if (bytes > 0) return bytes;
  }
  return std::nullopt;
}

StatusOr<nlohmann::json> JobSeriesJson(Store& store, const JobRecord& job,
                                       const SeriesWindow& window, const PriceTable& prices,
                                       int64_t now_s) {
  std::vector<std::string> metrics = window.metrics;
  if (metrics.empty()) {
    RS_ASSIGN_OR_RETURN(metrics, store.SampleMetrics(job.cluster, job.job_id));
  }
  double t0 = window.from_s.value_or(static_cast<double>(job.start_time.value_or(0)));
  double t1 = window.to_s.value_or(static_cast<double>(job.end_time.value_or(now_s) + 60));
  if (t1 < t0) return Status::InvalidArgument("to: must not be before from");
  double st = window.step_s.value_or(0);
  if (st <= 0) st = std::max(1.0, std::ceil((t1 - t0) / 1000.0));
  if ((t1 - t0) / st > kMaxSeriesPoints) {
    return Status::InvalidArgument("step: too small for the range (at most 100,000 points)");
  }
  BucketGrid grid{t0, st, static_cast<int64_t>(t0 * 1000), static_cast<int64_t>(t1 * 1000)};
  std::vector<std::vector<SampleBucket>> buckets;
  RS_RETURN_IF_ERROR(store.ReadBuckets(job.cluster, job.job_id, metrics, grid, &buckets));
  nlohmann::json series = nlohmann::json::object(), limits = nlohmann::json::object();
  for (size_t i = 0; i < metrics.size(); ++i) {
    const std::string& m = metrics[i];
    nlohmann::json points = nlohmann::json::array();
    for (const SampleBucket& b : buckets[i]) {
      points.push_back({t0 + static_cast<double>(b.index) * st, b.mean, b.max});
    }
    series[m] = std::move(points);
    if (auto l = SeriesLimit(job, m, prices)) limits[m] = *l;
  }
  return nlohmann::json{
      {"from", t0}, {"to", t1}, {"step", st}, {"series", series}, {"limits", limits}};
}

}  // namespace rightsize
