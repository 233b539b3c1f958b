#include "server/telemetry.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/json_text.h"

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

// One job entry; on failure `rejected` says where and nothing of the entry is kept.
bool DecodeEntry(const nlohmann::json& e, const std::string& path, const TelemetryLimits& limits,
                 JobTelemetry* out, RejectedEntry* rejected) {
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
  for (auto [name, t] :
       {std::pair<const char*, std::optional<int64_t>*>{"submit_time", &out->job.submit_time},
        {"start_time", &out->job.start_time},
        {"end_time", &out->job.end_time}}) {
    // The same range as sample times (1970 to 2286): arithmetic on them cannot overflow.
    if (*t && (**t < 0 || **t >= 10'000'000'000)) {
      return fail(std::string(".job.") + name, fmt::format("expected Unix seconds, got {}", **t));
    }
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
      for (size_t i = 0; i < points.size(); ++i) {
        const auto& p = points[i];
        bool ok = p.is_array() && p.size() == 2 && p[0].is_number() && p[1].is_number();
        double t = ok ? p[0].get<double>() : 0, v = ok ? p[1].get<double>() : 0;
        // Times between 1970 and 2286 in seconds: anything else is a unit mistake (ms, ns).
        if (!ok || !std::isfinite(v) || !(t >= 0 && t < 1e10)) {
          return fail(fmt::format("{}[{}]", where, i),
                      "expected [time, value]: Unix seconds and a finite number, got " + Shown(p));
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
    RejectedEntry rejected;
    if (DecodeEntry((*jobs)[i], fmt::format("jobs[{}]", i), limits, &entry, &rejected)) {
      for (const auto& [metric, samples] : entry.samples) {
        batch.samples += static_cast<int64_t>(samples.size());
      }
      batch.stacks += static_cast<int64_t>(entry.stacks.size());
      batch.jobs.push_back(std::move(entry));
    } else {
      batch.rejected.push_back(std::move(rejected));
    }
  }
  return batch;
}

}  // namespace rightsize
