#include "sim/workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <unordered_map>

#include "core/units.h"

namespace rightsize::sim {

namespace {

// A job id's leading number ("123", "123_4" -> 123), or -1.
int64_t NumericId(const std::string& id) {
  int64_t v = -1;
  auto [p, ec] = std::from_chars(id.data(), id.data() + id.size(), v);
  return ec == std::errc() ? v : -1;
}

std::string QuoteName(const std::string& name) { return fmt::format("\"{}\"", name); }

std::string Plural(int64_t n, const char* what) {
  return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s");
}

}  // namespace

Workload WorkloadFromRecords(const std::vector<JobRecord>& records, SizeUnit unit,
                             int64_t machine) {
  Workload w;
  w.records = static_cast<int64_t>(records.size());
  int64_t no_submit = 0, no_run = 0, no_limit = 0, no_size = 0, too_big = 0, clipped = 0;
  struct Row {
    SimJob job;
    int64_t start;
    int64_t numeric_id;
    size_t index;
  };
  std::vector<Row> rows;
  rows.reserve(records.size());
  std::unordered_map<std::string, int64_t> users;
  for (size_t i = 0; i < records.size(); ++i) {
    const JobRecord& r = records[i];
    if (!r.submit_time) {
      ++no_submit;
      continue;
    }
    double run = -1;
    if (r.usage.elapsed_s) {
      run = *r.usage.elapsed_s;
    } else if (r.start_time && r.end_time) {
      run = static_cast<double>(*r.end_time - *r.start_time);
    }
    if (!(run >= 0.5)) {
      ++no_run;
      continue;
    }
    if (!r.request.time_limit_s || *r.request.time_limit_s <= 0) {
      ++no_limit;
      continue;
    }
    double size = 0;
    if (unit == SizeUnit::kNodes) {
      size = static_cast<double>(std::max(r.request.nodes.value_or(0), r.alloc.nodes.value_or(0)));
    } else {
      size = std::max(r.request.cpus.value_or(0), r.alloc.cpus.value_or(0));
    }
    if (size < 1) {
      ++no_size;
      continue;
    }
    SimJob j;
    j.id = r.job_id;
    j.submit_s = *r.submit_time;
    j.run_s = std::llround(run);
    j.limit_s = *r.request.time_limit_s;
    j.procs = static_cast<int64_t>(std::ceil(size));
    if (machine > 0 && j.procs > machine) {
      ++too_big;
      continue;
    }
    if (j.run_s > j.limit_s) {
      j.run_s = j.limit_s;
      ++clipped;
    }
    j.resubmit_limit_s = j.limit_s;
    if (!r.request.user.empty()) {
      j.user = users.emplace(r.request.user, static_cast<int64_t>(users.size())).first->second;
    }
    rows.push_back(Row{std::move(j), r.start_time.value_or(-1), NumericId(r.job_id), i});
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    if (a.job.submit_s != b.job.submit_s) return a.job.submit_s < b.job.submit_s;
    if (a.numeric_id != b.numeric_id) return a.numeric_id < b.numeric_id;
    return a.index < b.index;
  });
  for (Row& row : rows) {
    w.jobs.push_back(std::move(row.job));
    w.trace_start_s.push_back(row.start);
  }
  auto note = [&](int64_t n, const char* why) {
    if (n > 0) w.notes.push_back(fmt::format("{} {}", Plural(n, "job"), why));
  };
  note(no_submit, "without a submit time left out");
  note(no_run, "without a run time of at least 1 s left out");
  note(no_limit, "without a time limit left out");
  note(no_size, unit == SizeUnit::kNodes ? "without a node count left out"
                                         : "without a processor count left out");
  note(too_big, "larger than the machine left out");
  note(clipped, "ran past their limit: cut to it");
  return w;
}

StatusOr<std::map<std::string, PredictedJob>> ReadPredictions(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return Status::IoError(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  }
  std::map<std::string, PredictedJob> out;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    auto bad = [&](std::string_view why) {
      return Status::BadInput(fmt::format("{}:{}: {}", path, n, why));
    };
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) return bad("expected a JSON object (a line of `rightsize eval --jobs`)");
    if (!j.contains("target") || !j["target"].is_string() || !j.contains("job_id") ||
        !j["job_id"].is_string()) {
      return bad("expected \"target\" and \"job_id\" strings");
    }
    if (j["target"] != "runtime") continue;
    PredictedJob p;
    if (j.contains("suggested")) {
      if (!j["suggested"].is_array()) return bad("\"suggested\": expected an array");
      for (const auto& s : j["suggested"]) {
        if (!s.is_object() || !s.contains("risk") || !s["risk"].is_number() ||
            !s.contains("request") || !s["request"].is_number()) {
          return bad("\"suggested\": expected {\"risk\": number, \"request\": number} items");
        }
        p.suggested[s["risk"].get<double>()] = s["request"].get<double>();
      }
    }
    // A fallback answer's "point" is a baseline's, not the model's.
    if (!j.contains("fallback")) {
      for (const char* q : kQuantileNames) {
        if (j.contains(q) && j[q].is_number()) {
          double v = j[q].get<double>();
          if (std::isfinite(v) && v > 0) p.quantiles[q] = v;
        }
      }
    }
    if (j.contains("baselines") && j["baselines"].is_object()) {
      for (const auto& [name, v] : j["baselines"].items()) {
        if (v.is_number()) p.baselines[name] = v.get<double>();
      }
    }
    out[j["job_id"].get<std::string>()] = std::move(p);
  }
  if (in.bad()) return Status::IoError(fmt::format("{}: read failed", path));
  if (out.empty()) {
    return Status::BadInput(fmt::format(
        "{}: no runtime predictions (write them with `rightsize eval --trace TRACE --jobs {}`)",
        path, path));
  }
  return out;
}

StatusOr<int64_t> ApplyLimits(const std::map<std::string, PredictedJob>& predictions,
                              const std::string& source, double risk, std::vector<SimJob>& jobs) {
  bool rightsize = source == "rightsize";
  if (rightsize) {
    bool found = std::any_of(predictions.begin(), predictions.end(),
                             [&](const auto& kv) { return kv.second.suggested.contains(risk); });
    if (!found) {
      std::string held;
      for (const auto& [id, p] : predictions) {
        if (p.suggested.empty()) continue;
        for (const auto& [r, v] : p.suggested) {
          held += fmt::format("{}{:g}", held.empty() ? "" : ", ", r);
        }
        break;
      }
      return Status::InvalidArgument(
          fmt::format("--risk {:g}: the predictions hold suggested requests at {} only", risk,
                      held.empty() ? "no risk" : held));
    }
  }
  int64_t changed = 0;
  for (SimJob& j : jobs) {
    auto it = predictions.find(j.id);
    if (it == predictions.end()) continue;
    double v = 0;
    if (rightsize) {
      auto s = it->second.suggested.find(risk);
      if (s == it->second.suggested.end()) continue;
      v = s->second;
    } else {
      auto b = it->second.baselines.find(source);
      if (b == it->second.baselines.end()) continue;
      v = b->second;
    }
    if (!std::isfinite(v) || v <= 0) continue;
    j.limit_s = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(v - 1e-9)));
    ++changed;
  }
  return changed;
}

StatusOr<int64_t> ApplyEstimates(const std::map<std::string, PredictedJob>& predictions,
                                 const std::string& estimate,
                                 const std::vector<std::string>& corrections,
                                 std::vector<SimJob>& jobs) {
  auto known = [](const std::string& name) {
    return std::any_of(std::begin(kQuantileNames), std::end(kQuantileNames),
                       [&](const char* q) { return name == q; });
  };
  std::vector<std::string> names = corrections;
  names.insert(names.begin(), estimate);
  for (const std::string& name : names) {
    if (!known(name)) {
      return Status::InvalidArgument(fmt::format(
          "expected a quantile of rightsize's run time (p2_5, p10, point, p90, p97_5), got {}",
          QuoteName(name)));
    }
  }
  auto seconds = [](double v) {
    return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(v - 1e-9)));
  };
  int64_t changed = 0;
  for (SimJob& j : jobs) {
    auto it = predictions.find(j.id);
    if (it == predictions.end()) continue;
    const auto& q = it->second.quantiles;
    auto e = q.find(estimate);
    if (e == q.end()) continue;
    j.estimate_s = std::min(j.limit_s, seconds(e->second));
    j.corrections_s.clear();
    int64_t last = j.estimate_s;
    for (const std::string& name : corrections) {
      auto c = q.find(name);
      if (c == q.end()) continue;
      int64_t step = seconds(c->second);
      if (step <= last || step >= j.limit_s) continue;
      j.corrections_s.push_back(step);
      last = step;
    }
    ++changed;
  }
  return changed;
}

}  // namespace rightsize::sim
