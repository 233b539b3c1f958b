#include "diagnose/stored_telemetry.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "core/json_text.h"

namespace rightsize {

StatusOr<std::optional<Telemetry>> StoredTelemetry(Store& store, const JobRecord& job,
                                                   const PriceTable* prices) {
  Telemetry t;
  bool any = false;
  int64_t start_ms = job.start_time.value_or(0) * 1000;
  int64_t newest_ms = -1;
  // The memory series of the last ten minutes: enough for the trend before an OOM kill.
  int64_t end_ms = job.end_time ? *job.end_time * 1000 : std::numeric_limits<int64_t>::max();
  int64_t from_ms = job.end_time ? std::max(start_ms, end_ms - 600000) : start_ms;
  RS_RETURN_IF_ERROR(store.ReadSamples(
      job.cluster, job.job_id, "memory_bytes", from_ms, std::numeric_limits<int64_t>::max(),
      [&](const Sample& s) {
        t.memory.emplace_back(static_cast<double>(s.t_ms - start_ms) / 1000, s.value);
        newest_ms = std::max(newest_ms, s.t_ms);
      }));
  any |= !t.memory.empty();
  double gpu_peak = -1;
  RS_RETURN_IF_ERROR(store.ReadSamples(job.cluster, job.job_id, "gpu_memory_bytes", start_ms,
                                       std::numeric_limits<int64_t>::max(), [&](const Sample& s) {
                                         gpu_peak = std::max(gpu_peak, s.value);
                                         newest_ms = std::max(newest_ms, s.t_ms);
                                       }));
  if (gpu_peak >= 0) {
    t.gpu_memory_peak_bytes = static_cast<int64_t>(gpu_peak);
    any = true;
    // The job's GPU memory is summed over its GPUs: its capacity is theirs, by model.
    double bytes = prices != nullptr
                       ? prices->GpuMemoryBytes(job.GpuType(), job.AllocatedGpus().value_or(0))
                       : 0;
    if (bytes > 0) t.gpu_memory_total_bytes = static_cast<int64_t>(bytes);
  }
  if (job.end_time && newest_ms >= 0) {
    t.silent_before_end_s = std::max(0.0, static_cast<double>(end_ms - newest_ms) / 1000);
  }
  RS_ASSIGN_OR_RETURN(auto stacks, store.GetStacks(job.cluster, job.job_id));
  for (const auto& [stack, n] : stacks) t.hottest_stacks.emplace_back(stack, n);
  std::sort(t.hottest_stacks.begin(), t.hottest_stacks.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  if (t.hottest_stacks.size() > 5) t.hottest_stacks.resize(5);
  any |= !t.hottest_stacks.empty();
  if (!any) return std::optional<Telemetry>();
  return std::optional<Telemetry>(std::move(t));
}

Status SaveDiagnosis(Store& store, const JobRecord& job, const Diagnosis& d, int64_t now_s) {
  StoredDiagnosis stored{job.cluster,  job.job_id,
                         now_s,        std::string(FailureClassName(d.cls)),
                         d.confidence, JsonText(DiagnosisToJson(d))};
  return store.PutDiagnosis(stored);
}

Status AddStoredJob(Store& store, const std::string& cluster, const std::string& job_id,
                    const PriceTable* prices, DiagnoseInput* input) {
  RS_ASSIGN_OR_RETURN(input->job, store.GetJob(cluster, job_id));
  RS_ASSIGN_OR_RETURN(input->telemetry, StoredTelemetry(store, *input->job, prices));
  return Status::Ok();
}

}  // namespace rightsize
