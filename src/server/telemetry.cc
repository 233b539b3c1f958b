#include "server/telemetry.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "core/json_text.h"
#include "core/plausible.h"

namespace rightsize {

namespace {

// A value for an error message. Containers are named, never dumped: dumping recurses once per
// level, and a hostile 130 KB body of nested brackets would overflow the stack.
std::string Shown(const nlohmann::json& j) {
  if (j.is_array()) return fmt::format("an array of {}", j.size());
  if (j.is_object()) return fmt::format("an object of {} keys", j.size());
  std::string s = JsonText(j);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

// The deepest nesting of arrays and objects, outside strings; stops counting past `limit`.
int NestingDepth(std::string_view body, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

bool ValidName(std::string_view name, size_t max_bytes) {
  if (name.empty() || name.size() > max_bytes) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// Plausible ranges: core/plausible.h's, which the file readers use (named here as the JSON
// schema names the fields).
constexpr double kMaxDurationS = kMaxPlausibleDurationS;
constexpr double kMaxTimeLimitS = kMaxPlausibleTimeLimitS;
constexpr double kMaxCpus = kMaxPlausibleCpus;
constexpr double kMaxCount = kMaxPlausibleNodes;
static_assert(kMaxPlausibleNodes == kMaxPlausibleGpus);
constexpr double kMaxMemoryBytes = kMaxPlausibleMemoryBytes;
constexpr double kMaxIoBytes = kMaxPlausibleIoBytes;
constexpr double kMaxCpuEfficiency = kMaxPlausibleCpuEfficiency;
constexpr double kMaxOtherSample = 1e15;  // counts, seconds, rates of other metrics

// "" when `v` is within [lo, hi]; else why not.
std::string OutOfRange(double v, double lo, double hi, std::string_view unit) {
  if (std::isfinite(v) && v >= lo && v <= hi) return "";
  return fmt::format("expected {:g} to {:g}{}, got {:g}", lo, hi, unit, v);
}

// The range of a metric's samples, from its name (docs/api.md lists the agents' metrics).
std::pair<double, double> SampleRange(std::string_view metric) {
  auto ends = [&](std::string_view suffix) {
    return metric.size() >= suffix.size() && metric.substr(metric.size() - suffix.size()) == suffix;
  };
  if (ends("_pct")) return {0, 100};
  if (metric == "cpu_cores") return {0, kMaxCpus};
  if (ends("_bytes") && metric.find("memory") != std::string_view::npos) {
    return {0, kMaxMemoryBytes};
  }
  if (ends("_bytes") || ends("_bytes_per_s")) return {0, kMaxIoBytes};
  return {0, kMaxOtherSample};
}

// The first implausible number of a job record: {field, why}; {"", ""} when all are plausible.
std::pair<std::string, std::string> ImplausibleField(const JobRecord& r,
                                                     const TelemetryLimits& limits) {
  double lo_time = 0, hi_time = 7258118400;  // 1970 to 2200
  if (limits.now_s > 0) {
    lo_time = std::max<double>(0, static_cast<double>(limits.now_s - limits.max_record_age_s));
    hi_time = static_cast<double>(limits.now_s + limits.max_future_s);
  }
  struct Check {
    const char* field;
    std::optional<double> value;
    double lo, hi;
    const char* unit;
  };
  auto d = [](const auto& o) -> std::optional<double> {
    return o ? std::optional<double>(static_cast<double>(*o)) : std::nullopt;
  };
  const Check checks[] = {
      {"submit_time", d(r.submit_time), lo_time, hi_time, " (Unix seconds)"},
      {"start_time", d(r.start_time), lo_time, hi_time, " (Unix seconds)"},
      {"end_time", d(r.end_time), lo_time, hi_time, " (Unix seconds)"},
      {"request.cpus", r.request.cpus, 0, kMaxCpus, " CPUs"},
      {"request.memory_bytes", d(r.request.memory_bytes), 0, kMaxMemoryBytes, " bytes"},
      {"request.memory_per_unit_bytes", d(r.request.memory_per_unit_bytes), 0, kMaxMemoryBytes,
       " bytes"},
      {"request.gpus", d(r.request.gpus), 0, kMaxCount, " GPUs"},
      {"request.time_limit_s", d(r.request.time_limit_s), 0, kMaxTimeLimitS, " s"},
      {"request.nodes", d(r.request.nodes), 0, kMaxCount, " nodes"},
      {"alloc.cpus", r.alloc.cpus, 0, kMaxCpus, " CPUs"},
      {"alloc.memory_bytes", d(r.alloc.memory_bytes), 0, kMaxMemoryBytes, " bytes"},
      {"alloc.gpus", d(r.alloc.gpus), 0, kMaxCount, " GPUs"},
      {"alloc.nodes", d(r.alloc.nodes), 0, kMaxCount, " nodes"},
      {"usage.elapsed_s", r.usage.elapsed_s, 0, kMaxDurationS, " s"},
      {"usage.cpu_time_s", r.usage.cpu_time_s, 0, kMaxDurationS * kMaxCpus, " s"},
      {"usage.peak_memory_bytes", d(r.usage.peak_rss_bytes), 0, kMaxMemoryBytes, " bytes"},
      {"usage.avg_memory_bytes", d(r.usage.avg_rss_bytes), 0, kMaxMemoryBytes, " bytes"},
      {"usage.gpu_util_pct", r.usage.gpu_util_pct, 0, 100, " %"},
      {"usage.peak_gpu_memory_bytes", d(r.usage.peak_gpu_memory_bytes), 0, kMaxMemoryBytes,
       " bytes"},
      {"usage.io_read_bytes", d(r.usage.io_read_bytes), 0, kMaxIoBytes, " bytes"},
      {"usage.io_write_bytes", d(r.usage.io_write_bytes), 0, kMaxIoBytes, " bytes"},
      {"usage.gpu_energy_j", r.usage.gpu_energy_j, 0, kMaxPlausibleEnergyJ, " J"},
      {"usage.cpu_energy_j", r.usage.cpu_energy_j, 0, kMaxPlausibleEnergyJ, " J"},
      {"usage.node_energy_j", r.usage.node_energy_j, 0, kMaxPlausibleEnergyJ, " J"},
  };
  for (const Check& c : checks) {
    if (!c.value) continue;
    if (std::string why = OutOfRange(*c.value, c.lo, c.hi, c.unit); !why.empty()) {
      return {c.field, why};
    }
  }
  // CPU time beyond what the CPUs could deliver in the run time is not a measurement.
  auto cpus = r.AllocatedCpus();
  if (r.usage.cpu_time_s && cpus && *cpus > 0 && r.usage.elapsed_s) {
    double most = kMaxCpuEfficiency * *cpus * *r.usage.elapsed_s + kCpuTimeSlackS;
    if (*r.usage.cpu_time_s > most) {
      return {"usage.cpu_time_s",
              fmt::format("expected at most {:g} s ({:g}x {:g} CPUs x {:g} s run time), got {:g}",
                          most, kMaxCpuEfficiency, *cpus, *r.usage.elapsed_s, *r.usage.cpu_time_s)};
    }
  }
  return {"", ""};
}

// One job entry; on failure `rejected` says where and nothing of the entry is kept.
bool DecodeEntry(const nlohmann::json& e, const std::string& path, const TelemetryLimits& limits,
                 JobTelemetry* out, std::map<std::string, double>* energy_before_j,
                 RejectedEntry* rejected) {
  auto fail = [&](std::string where, std::string error) {
    rejected->path = path + where;
    rejected->error = std::move(error);
    return false;
  };
  if (!e.is_object()) return fail("", "expected an object, got " + Shown(e));
  auto job = e.find("job");
  if (job == e.end()) return fail(".job", "required (the job record, with cluster and job_id)");
  auto record = JobRecordFromJson(*job);
  if (!record.ok()) return fail(".job", record.status().message());
  out->job = std::move(*record);
  if (out->job.source.empty()) out->job.source = "agent";
  if (auto [field, why] = ImplausibleField(out->job, limits); !field.empty()) {
    return fail(".job." + field, why);
  }
  // Sample times: 1970 to 2286 without a clock (anything else is a unit mistake: ms, ns), else
  // near the server's clock.
  double lo_t = 0, hi_t = 1e10;
  if (limits.now_s > 0) {
    lo_t = std::max<double>(0, static_cast<double>(limits.now_s - limits.max_sample_age_s));
    hi_t = static_cast<double>(limits.now_s + limits.max_future_s);
  }
  if (auto s = e.find("samples"); s != e.end() && !s->is_null()) {
    if (!s->is_object()) {
      return fail(".samples", "expected an object of metric -> [[time, value], …]");
    }
    if (s->size() > limits.max_metrics) {
      return fail(".samples",
                  fmt::format("at most {} metrics, got {}", limits.max_metrics, s->size()));
    }
    for (const auto& [metric, points] : s->items()) {
      std::string where = ".samples." + metric;
      if (!ValidName(metric, limits.max_name_bytes)) {
        return fail(".samples", "metric names are letters, digits and _, got " + Shown(metric));
      }
      if (!points.is_array()) return fail(where, "expected an array of [time, value]");
      if (points.size() > limits.max_samples_per_metric) {
        return fail(where, fmt::format("at most {} samples per metric, got {}",
                                       limits.max_samples_per_metric, points.size()));
      }
      auto& samples = out->samples[metric];
      samples.reserve(points.size());
      auto [lo_v, hi_v] = SampleRange(metric);
      for (size_t i = 0; i < points.size(); ++i) {
        const auto& p = points[i];
        bool ok = p.is_array() && p.size() == 2 && p[0].is_number() && p[1].is_number();
        double t = ok ? p[0].get<double>() : 0, v = ok ? p[1].get<double>() : 0;
        if (!ok || !std::isfinite(v)) {
          return fail(fmt::format("{}[{}]", where, i),
                      "expected [time, value]: Unix seconds and a finite number, got " + Shown(p));
        }
        if (!(t >= lo_t && t < hi_t)) {
          return fail(
              fmt::format("{}[{}]", where, i),
              fmt::format("expected a time from {:.0f} to {:.0f} (Unix seconds{}), got {}", lo_t,
                          hi_t, limits.now_s > 0 ? ", near the server's clock" : "", Shown(p[0])));
        }
        if (std::string why = OutOfRange(v, lo_v, hi_v, ""); !why.empty()) {
          return fail(fmt::format("{}[{}]", where, i), why);
        }
        samples.push_back(Sample{static_cast<int64_t>(std::llround(t * 1000)), v});
      }
      std::stable_sort(samples.begin(), samples.end(),
                       [](const Sample& a, const Sample& b) { return a.t_ms < b.t_ms; });
    }
  }
  if (auto s = e.find("stacks"); s != e.end() && !s->is_null()) {
    if (!s->is_object()) return fail(".stacks", "expected an object of folded stack -> count");
    if (s->size() > limits.max_stacks) {
      return fail(".stacks",
                  fmt::format("at most {} stacks, got {}", limits.max_stacks, s->size()));
    }
    for (const auto& [stack, count] : s->items()) {
      if (stack.empty() || stack.size() > limits.max_stack_bytes ||
          stack.find('\n') != std::string::npos) {
        return fail(".stacks", fmt::format("a folded stack is 1 to {} bytes on one line, got {}",
                                           limits.max_stack_bytes, Shown(stack)));
      }
      if (!count.is_number_integer() || count.get<int64_t>() <= 0 ||
          count.get<int64_t>() > (int64_t{1} << 40)) {
        return fail(".stacks[" + Shown(stack) + "]",
                    "expected a positive whole number of samples, got " + Shown(count));
      }
      out->stacks[stack] += count.get<int64_t>();
    }
  }
  if (auto d = e.find("diagnosis"); d != e.end() && !d->is_null()) {
    // What the agent concluded about a failed job from the logs on its node.
    if (!d->is_object() || d->value("schema", "") != "rightsize.diagnosis/v1") {
      return fail(".diagnosis", "expected a rightsize.diagnosis/v1 object");
    }
    auto cls = d->find("class");
    auto confidence = d->find("confidence");
    if (cls == d->end() || !cls->is_string() || !ValidName(cls->get<std::string>(), 64)) {
      return fail(".diagnosis.class", "expected a failure class like host_oom");
    }
    if (confidence == d->end() || !confidence->is_number() || !(confidence->get<double>() >= 0) ||
        !(confidence->get<double>() <= 1)) {
      return fail(".diagnosis.confidence", "expected a number from 0 to 1");
    }
    std::string document = d->dump();
    if (document.size() > limits.max_diagnosis_bytes) {
      return fail(".diagnosis", fmt::format("at most {} bytes, got {}", limits.max_diagnosis_bytes,
                                            document.size()));
    }
    out->diagnosis =
        ShippedDiagnosis{cls->get<std::string>(), confidence->get<double>(), std::move(document)};
  }
  if (auto b = e.find("energy_before_j"); b != e.end() && !b->is_null()) {
    if (!b->is_object() || b->size() > limits.max_metrics) {
      return fail(".energy_before_j",
                  "expected an object of energy metric -> joules (\"gpu_energy_j\": 1200.5)");
    }
    for (const auto& [metric, joules] : b->items()) {
      bool energy = metric.size() > 9 && metric.ends_with("_energy_j") &&
                    ValidName(metric, limits.max_name_bytes);
      if (!energy || !joules.is_number() || !(joules.get<double>() >= 0) ||
          !(joules.get<double>() <= 1e15)) {
        return fail(".energy_before_j." + metric,
                    "expected an energy metric (…_energy_j) -> joules from 0 to 1e15, got " +
                        Shown(joules));
      }
      (*energy_before_j)[metric] = joules.get<double>();
    }
  }
  return true;
}

}  // namespace

StatusOr<TelemetryBatch> DecodeTelemetry(std::string_view body, const TelemetryLimits& limits) {
  // A batch is 5 levels deep (batch, jobs, entry, samples, point); the job record a few more.
  if (NestingDepth(body, limits.max_depth) > limits.max_depth) {
    return Status::BadInput(
        fmt::format("the body nests arrays and objects more than {} deep: not a telemetry batch",
                    limits.max_depth));
  }
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return Status::BadInput("the body is not JSON (a rightsize.telemetry/v1 batch was expected)");
  }
  if (!j.is_object()) return Status::BadInput("expected a JSON object, got " + Shown(j));
  auto schema = j.find("schema");
  if (schema == j.end() || !schema->is_string() || *schema != "rightsize.telemetry/v1") {
    return Status::BadInput("schema: expected \"rightsize.telemetry/v1\", got " +
                            (schema == j.end() ? std::string("nothing") : Shown(*schema)));
  }
  TelemetryBatch batch;
  auto agent = j.find("agent");
  if (agent == j.end() || !agent->is_string() || agent->get<std::string>().empty() ||
      agent->get<std::string>().size() > 256) {
    return Status::BadInput("agent: expected the agent's name (a string of 1 to 256 bytes)");
  }
  batch.agent = agent->get<std::string>();
  auto seq = j.find("seq");
  if (seq == j.end() || !seq->is_number_integer() || seq->get<int64_t>() <= 0) {
    return Status::BadInput("seq: expected the batch's sequence number (a positive integer)");
  }
  batch.seq = seq->get<int64_t>();
  auto jobs = j.find("jobs");
  if (jobs == j.end() || !jobs->is_array()) {
    return Status::BadInput("jobs: expected an array of job entries");
  }
  if (jobs->size() > limits.max_jobs) {
    return Status::BadInput(
        fmt::format("jobs: at most {} entries per batch, got {}", limits.max_jobs, jobs->size()));
  }
  for (size_t i = 0; i < jobs->size(); ++i) {
    JobTelemetry entry;
    std::map<std::string, double> energy_before_j;
    RejectedEntry rejected;
    if (DecodeEntry((*jobs)[i], fmt::format("jobs[{}]", i), limits, &entry, &energy_before_j,
                    &rejected)) {
      for (const auto& [metric, samples] : entry.samples) {
        batch.samples += static_cast<int64_t>(samples.size());
      }
      batch.stacks += static_cast<int64_t>(entry.stacks.size());
      batch.jobs.push_back(std::move(entry));
      batch.energy_before_j.push_back(std::move(energy_before_j));
    } else {
      batch.rejected.push_back(std::move(rejected));
    }
  }
  return batch;
}

std::string AgentTokenId(std::string_view token) {
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : token) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return fmt::format("{:016x}", h);
}

bool AgentNameAllowed(const std::string& agent, const std::vector<std::string>& patterns) {
  return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& p) {
    return fnmatch(p.c_str(), agent.c_str(), 0) == 0;
  });
}

std::string AgentSeqKey(std::string_view agent, std::string_view token_id) {
  if (token_id.empty()) return std::string(agent);
  return fmt::format("{}#{}", agent, token_id);
}

}  // namespace rightsize
