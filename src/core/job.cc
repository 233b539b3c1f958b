#include "core/job.h"

#include <nlohmann/json.hpp>

namespace rightsize {

namespace {
template <typename T>
nlohmann::json OrNull(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
nlohmann::json OrNull(const std::string& s) {
  return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
}
}  // namespace

void to_json(nlohmann::json& j, const JobRecord& job) {
  j = nlohmann::json{
      {"cluster", job.cluster},
      {"job_id", job.job_id},
      {"source", OrNull(job.source)},
      {"submit_time", job.submit_time ? nlohmann::json(FormatTimestamp(*job.submit_time))
                                      : nlohmann::json(nullptr)},
      {"start_time",
       job.start_time ? nlohmann::json(FormatTimestamp(*job.start_time)) : nlohmann::json(nullptr)},
      {"end_time",
       job.end_time ? nlohmann::json(FormatTimestamp(*job.end_time)) : nlohmann::json(nullptr)},
      {"request",
       {{"user", OrNull(job.request.user)},
        {"group", OrNull(job.request.group)},
        {"account", OrNull(job.request.account)},
        {"partition", OrNull(job.request.partition)},
        {"qos", OrNull(job.request.qos)},
        {"job_name", OrNull(job.request.job_name)},
        {"cpus", OrNull(job.request.cpus)},
        {"memory_bytes", OrNull(job.request.memory_bytes)},
        {"memory_per_unit_bytes", OrNull(job.request.memory_per_unit_bytes)},
        {"memory_scope", MemoryScopeName(job.request.memory_scope)},
        {"gpus", OrNull(job.request.gpus)},
        {"gpu_type", OrNull(job.request.gpu_type)},
        {"time_limit_s", OrNull(job.request.time_limit_s)},
        {"time_unlimited", job.request.time_unlimited},
        {"nodes", OrNull(job.request.nodes)}}},
      {"allocation",
       {{"cpus", OrNull(job.AllocatedCpus())},
        {"memory_bytes", OrNull(job.AllocatedMemoryBytes())},
        {"gpus", OrNull(job.AllocatedGpus())},
        {"gpu_type", OrNull(job.GpuType())},
        {"nodes", OrNull(job.alloc.nodes ? job.alloc.nodes : job.request.nodes)},
        {"node_list", OrNull(job.alloc.node_list)}}},
      {"usage",
       {{"elapsed_s", OrNull(job.usage.elapsed_s)},
        {"cpu_time_s", OrNull(job.usage.cpu_time_s)},
        {"peak_memory_bytes", OrNull(job.usage.peak_rss_bytes)},
        {"avg_memory_bytes", OrNull(job.usage.avg_rss_bytes)},
        {"gpu_util_pct", OrNull(job.usage.gpu_util_pct)},
        {"peak_gpu_memory_bytes", OrNull(job.usage.peak_gpu_memory_bytes)},
        {"io_read_bytes", OrNull(job.usage.io_read_bytes)},
        {"io_write_bytes", OrNull(job.usage.io_write_bytes)}}},
      {"outcome",
       {{"state", OrNull(job.outcome.state)},
        {"exit_code", OrNull(job.outcome.exit_code)},
        {"signal", OrNull(job.outcome.signal)}}},
  };
}

}  // namespace rightsize
