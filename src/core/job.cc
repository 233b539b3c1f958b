#include "core/job.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/json_text.h"

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

namespace {

// Who said how the job ended: accounting (sacct, SWF, …), or the agent that watched it (and
// `rightsize run`, the kubelet) before accounting did; "pending" for an agent's record of a job
// whose end it saw but whose state it could not know: accounting will say.
const char* StateSource(const JobRecord& job) {
  if (job.source != "agent" && job.source != "run" && job.source != "kubernetes") {
    return "accounting";
  }
  return job.outcome.state.empty() ? "pending" : "agent";
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
        {"io_write_bytes", OrNull(job.usage.io_write_bytes)},
        {"gpu_energy_j", OrNull(job.usage.gpu_energy_j)},
        {"cpu_energy_j", OrNull(job.usage.cpu_energy_j)},
        {"node_energy_j", OrNull(job.usage.node_energy_j)}}},
      {"outcome",
       {{"state", OrNull(job.outcome.state)},
        {"exit_code", OrNull(job.outcome.exit_code)},
        {"signal", OrNull(job.outcome.signal)},
        {"state_source", StateSource(job)}}},
  };
}

namespace {

// Reads the optional fields of one JSON object, remembering the first type error.
class FieldReader {
 public:
  FieldReader(const nlohmann::json& j, std::string prefix, Status* error)
      : j_(j), prefix_(std::move(prefix)), error_(error) {}

  const nlohmann::json* Get(const char* key) {
    if (!j_.is_object()) return nullptr;
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  void Fail(const char* key, const char* expected, const nlohmann::json& got) {
    if (!error_->ok()) return;
    // Containers are named, not dumped (dumping a deeply nested value recurses per level).
    std::string shown = got.is_array() ? "an array" : got.is_object() ? "an object" : JsonText(got);
    if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
    *error_ =
        Status::BadInput(fmt::format("{}{}: expected {}, got {}", prefix_, key, expected, shown));
  }
  void Text(const char* key, std::string* out) {
    if (const auto* v = Get(key)) {
      if (v->is_string()) {
        *out = v->get<std::string>();
      } else {
        Fail(key, "a string", *v);
      }
    }
  }
  template <typename T>
  void Number(const char* key, std::optional<T>* out) {
    if (const auto* v = Get(key)) {
      // Integers must fit: casting 1e30 to int64 is undefined behaviour.
      double d = v->is_number() ? v->get<double>() : NAN;
      bool fits = std::isfinite(d) && (!std::is_integral_v<T> ||
                                       (d >= static_cast<double>(std::numeric_limits<T>::min()) &&
                                        d < static_cast<double>(std::numeric_limits<T>::max())));
      if (fits) {
        *out = static_cast<T>(d);
      } else {
        Fail(key, std::is_integral_v<T> ? "a whole number in range" : "a number", *v);
      }
    }
  }
  void Time(const char* key, std::optional<int64_t>* out) {
    const auto* v = Get(key);
    if (v == nullptr) return;
    if (v->is_number()) {
      Number(key, out);
      return;
    }
    if (v->is_string()) {
      auto t = ParseSlurmTimestamp(v->get<std::string>());
      if (t.ok()) {
        *out = *t;
        return;
      }
    }
    Fail(key, "Unix seconds or a time like 2024-01-31T08:00:00", *v);
  }
  void Flag(const char* key, bool* out) {
    if (const auto* v = Get(key)) {
      if (v->is_boolean()) {
        *out = v->get<bool>();
      } else {
        Fail(key, "true or false", *v);
      }
    }
  }
  FieldReader Object(const char* key) {
    static const nlohmann::json kEmpty = nlohmann::json::object();
    const auto* v = Get(key);
    if (v != nullptr && !v->is_object()) Fail(key, "an object", *v);
    return FieldReader(v != nullptr && v->is_object() ? *v : kEmpty, prefix_ + key + ".", error_);
  }

 private:
  const nlohmann::json& j_;
  std::string prefix_;
  Status* error_;
};

}  // namespace

StatusOr<JobRecord> JobRecordFromJson(const nlohmann::json& j) {
  if (!j.is_object()) {
    return Status::BadInput("expected a job record (an object), got " + std::string(j.type_name()));
  }
  Status error = Status::Ok();
  FieldReader r(j, "", &error);
  JobRecord job;
  r.Text("cluster", &job.cluster);
  r.Text("job_id", &job.job_id);
  r.Text("source", &job.source);
  r.Time("submit_time", &job.submit_time);
  r.Time("start_time", &job.start_time);
  r.Time("end_time", &job.end_time);
  FieldReader q = r.Object("request");
  q.Text("user", &job.request.user);
  q.Text("group", &job.request.group);
  q.Text("account", &job.request.account);
  q.Text("partition", &job.request.partition);
  q.Text("qos", &job.request.qos);
  q.Text("job_name", &job.request.job_name);
  q.Number("cpus", &job.request.cpus);
  q.Number("memory_bytes", &job.request.memory_bytes);
  q.Number("memory_per_unit_bytes", &job.request.memory_per_unit_bytes);
  std::string scope;
  q.Text("memory_scope", &scope);
  if (!scope.empty()) {
    bool known = false;
    for (auto s : {MemoryScope::kUnknown, MemoryScope::kPerCpu, MemoryScope::kPerNode,
                   MemoryScope::kPerJob, MemoryScope::kPerGpu}) {
      if (scope == MemoryScopeName(s)) {
        job.request.memory_scope = s;
        known = true;
      }
    }
    if (!known) q.Fail("memory_scope", "per_cpu, per_node, per_job, per_gpu or unknown", scope);
  }
  q.Number("gpus", &job.request.gpus);
  q.Text("gpu_type", &job.request.gpu_type);
  q.Number("time_limit_s", &job.request.time_limit_s);
  q.Flag("time_unlimited", &job.request.time_unlimited);
  q.Number("nodes", &job.request.nodes);
  FieldReader a = r.Object("allocation");
  a.Number("cpus", &job.alloc.cpus);
  a.Number("memory_bytes", &job.alloc.memory_bytes);
  a.Number("gpus", &job.alloc.gpus);
  a.Text("gpu_type", &job.alloc.gpu_type);
  a.Number("nodes", &job.alloc.nodes);
  a.Text("node_list", &job.alloc.node_list);
  FieldReader u = r.Object("usage");
  u.Number("elapsed_s", &job.usage.elapsed_s);
  u.Number("cpu_time_s", &job.usage.cpu_time_s);
  u.Number("peak_memory_bytes", &job.usage.peak_rss_bytes);
  u.Number("avg_memory_bytes", &job.usage.avg_rss_bytes);
  u.Number("gpu_util_pct", &job.usage.gpu_util_pct);
  u.Number("peak_gpu_memory_bytes", &job.usage.peak_gpu_memory_bytes);
  u.Number("io_read_bytes", &job.usage.io_read_bytes);
  u.Number("io_write_bytes", &job.usage.io_write_bytes);
  u.Number("gpu_energy_j", &job.usage.gpu_energy_j);
  u.Number("cpu_energy_j", &job.usage.cpu_energy_j);
  u.Number("node_energy_j", &job.usage.node_energy_j);
  FieldReader o = r.Object("outcome");
  o.Text("state", &job.outcome.state);
  o.Number("exit_code", &job.outcome.exit_code);
  o.Number("signal", &job.outcome.signal);
  if (!error.ok()) return error;
  if (job.cluster.empty()) return Status::BadInput("cluster: required");
  if (job.job_id.empty()) return Status::BadInput("job_id: required");
  return job;
}

}  // namespace rightsize
