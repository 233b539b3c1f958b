#include "model/pod_replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>

#include "core/units.h"

namespace rightsize {

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

std::string_view TrimField(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '"')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '"' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// One method at one setting, scored over a set of pod-hours.
struct Score {
  int64_t pod_hours = 0;
  int64_t under_hours = 0;
  double held_byte_hours = 0;
  double baseline_byte_hours = 0;
};

nlohmann::ordered_json ScoreJson(const Score& s) {
  double freed = s.baseline_byte_hours - s.held_byte_hours;
  nlohmann::ordered_json j;
  j["pod_hours"] = s.pod_hours;
  j["under_hours"] = s.under_hours;
  j["under_share"] = s.pod_hours > 0 ? static_cast<double>(s.under_hours) / s.pod_hours : 0.0;
  j["held_gib_hours"] = s.held_byte_hours / kGiB;
  j["baseline_gib_hours"] = s.baseline_byte_hours / kGiB;
  j["freed_gib_hours"] = freed / kGiB;
  j["freed_share"] = s.baseline_byte_hours > 0 ? freed / s.baseline_byte_hours : 0.0;
  return j;
}

// Every recommender a pod is replayed with: the three defaults, then each curve's settings.
struct PodMethods {
  explicit PodMethods(const PodReplayOptions& o) {
    vpa.emplace_back(o.vpa);
    krr.emplace_back(o.krr);
    rightsize.emplace_back(o.rightsize);
    for (double m : o.margins) {
      VpaOptions v = o.vpa;
      v.safety_margin = m;
      vpa.emplace_back(v);
      KrrOptions k = o.krr;
      k.buffer = m;
      krr.emplace_back(k);
    }
    for (double f : o.fresh) {
      PeakHeadroomOptions r = o.rightsize;
      r.fresh = f;
      rightsize.emplace_back(r);
    }
  }
  void Add(const PodSample& s) {
    for (auto& r : vpa) r.Add(s.time_s, s.bytes);
    for (auto& r : krr) r.Add(s.time_s, s.bytes);
    for (auto& r : rightsize) r.Add(s.time_s, s.bytes);
  }
  std::vector<VpaMemoryRecommender> vpa;
  std::vector<KrrSimpleRecommender> krr;
  std::vector<PeakHeadroomRecommender> rightsize;
};

// Scores of one half: index 0 of each vector is the default setting, then the curve's.
struct HalfScores {
  int pods = 0;
  int pods_scored = 0;
  int64_t skipped_hours = 0;  // a default method had no answer
  std::vector<Score> vpa, krr, rightsize;
};

void ScoreHour(double rec, double peak_so_far, double next_max, Score* s) {
  s->pod_hours += 1;
  if (next_max > rec) s->under_hours += 1;
  s->held_byte_hours += rec;
  s->baseline_byte_hours += peak_so_far;
}

void ReplayPod(const PodSeries& pod, double start_s, const PodReplayOptions& o, HalfScores* h) {
  PodMethods m(o);
  const auto& samples = pod.samples;
  size_t next = 0;
  double peak = 0;
  bool scored = false;
  for (double b = start_s; next < samples.size(); b += o.step_s) {
    while (next < samples.size() && samples[next].time_s < b) {
      m.Add(samples[next]);
      peak = std::max(peak, samples[next].bytes);
      ++next;
    }
    if (static_cast<int>(next) < o.min_past_samples) continue;
    double next_max = -1;
    for (size_t i = next; i < samples.size() && samples[i].time_s < b + o.step_s; ++i) {
      next_max = std::max(next_max, samples[i].bytes);
    }
    if (next_max < 0) continue;
    if (!m.vpa[0].Recommend() || !m.krr[0].Recommend(b) || !m.rightsize[0].Recommend(b)) {
      ++h->skipped_hours;
      continue;
    }
    scored = true;
    for (size_t i = 0; i < m.vpa.size(); ++i) {
      ScoreHour(m.vpa[i].Recommend().value_or(peak), peak, next_max, &h->vpa[i]);
    }
    for (size_t i = 0; i < m.krr.size(); ++i) {
      ScoreHour(m.krr[i].Recommend(b).value_or(peak), peak, next_max, &h->krr[i]);
    }
    for (size_t i = 0; i < m.rightsize.size(); ++i) {
      ScoreHour(m.rightsize[i].Recommend(b).value_or(peak), peak, next_max, &h->rightsize[i]);
    }
  }
  h->pods += 1;
  if (scored) h->pods_scored += 1;
}

nlohmann::ordered_json HalfJson(const HalfScores& h, const PodReplayOptions& o) {
  nlohmann::ordered_json j;
  j["pods"] = h.pods;
  j["pods_scored"] = h.pods_scored;
  j["pod_hours"] = h.rightsize.empty() ? 0 : h.rightsize[0].pod_hours;
  auto method = [](const char* name, std::string setting, const Score& s) {
    nlohmann::ordered_json m;
    m["method"] = name;
    m["setting"] = std::move(setting);
    m.update(ScoreJson(s));
    return m;
  };
  j["methods"] = nlohmann::ordered_json::array(
      {method("rightsize",
              fmt::format("peak × (1 + {:g} + {:g} / (1 + hours since the peak rose))",
                          o.rightsize.floor, o.rightsize.fresh),
              h.rightsize[0]),
       method("vpa",
              fmt::format("P{:g} of 24 h peaks × {:g}, min {:g} MiB", o.vpa.target_percentile * 100,
                          1 + o.vpa.safety_margin, o.vpa.min_bytes / (1024 * 1024)),
              h.vpa[0]),
       method(
           "krr",
           fmt::format("max × {:g}, {} points required", 1 + o.krr.buffer, o.krr.points_required),
           h.krr[0])});
  auto curve = [](const char* param, const std::vector<double>& values,
                  const std::vector<Score>& scores) {
    auto c = nlohmann::ordered_json::array();
    for (size_t i = 0; i < values.size(); ++i) {
      nlohmann::ordered_json p;
      p[param] = values[i];
      p.update(ScoreJson(scores[i + 1]));
      c.push_back(std::move(p));
    }
    return c;
  };
  j["curves"]["rightsize"] = curve("fresh", o.fresh, h.rightsize);
  j["curves"]["vpa"] = curve("margin", o.margins, h.vpa);
  j["curves"]["krr"] = curve("margin", o.margins, h.krr);
  // The acceptance bar: more freed than each baseline at no more under-provisioned hours.
  const Score& rs = h.rightsize[0];
  auto beats = [&rs](const Score& b) {
    return rs.baseline_byte_hours - rs.held_byte_hours >
               b.baseline_byte_hours - b.held_byte_hours &&
           rs.under_hours <= b.under_hours;
  };
  j["checks"]["beats_vpa"] = beats(h.vpa[0]);
  j["checks"]["beats_krr"] = beats(h.krr[0]);
  return j;
}

}  // namespace

Status PodSeriesReader::AddLine(std::string_view line, int64_t line_number) {
  if (TrimField(line).empty()) return Status::Ok();
  auto fields = Split(line, ",");
  if (!have_header_) {
    columns_ = static_cast<int>(fields.size());
    for (int i = 0; i < columns_; ++i) {
      std::string_view name = TrimField(fields[static_cast<size_t>(i)]);
      if (name.find("timestamp") != std::string_view::npos && time_column_ < 0) {
        time_column_ = i;
      } else if (name == "value" && value_column_ < 0) {
        value_column_ = i;
      } else if (key_column_ < 0) {
        key_column_ = i;
      }
    }
    if (columns_ != 3 || time_column_ < 0 || value_column_ < 0 || key_column_ < 0) {
      return Status::BadInput(fmt::format(
          "{}:{}: expected a header of three columns: a timestamp, \"value\" and the pod's key "
          "(as timestamp_anon,value,container_ip), got \"{}\"",
          name_, line_number, line.substr(0, 200)));
    }
    have_header_ = true;
    return Status::Ok();
  }
  if (static_cast<int>(fields.size()) != columns_) {
    return Status::BadInput(fmt::format("{}:{}: expected {} fields, got {}", name_, line_number,
                                        columns_, fields.size()));
  }
  auto t = ParseDouble(TrimField(fields[static_cast<size_t>(time_column_)]));
  auto v = ParseDouble(TrimField(fields[static_cast<size_t>(value_column_)]));
  std::string_view key = TrimField(fields[static_cast<size_t>(key_column_)]);
  if (!t || !std::isfinite(*t)) {
    return Status::BadInput(fmt::format("{}:{}: timestamp is not a number: \"{}\"", name_,
                                        line_number, fields[static_cast<size_t>(time_column_)]));
  }
  if (!v || !std::isfinite(*v) || *v < 0) {
    return Status::BadInput(fmt::format("{}:{}: value is not a non-negative number: \"{}\"", name_,
                                        line_number, fields[static_cast<size_t>(value_column_)]));
  }
  if (key.empty()) {
    return Status::BadInput(fmt::format("{}:{}: the pod's key is empty", name_, line_number));
  }
  rows_.emplace_back(std::string(key), PodSample{*t, *v});
  return Status::Ok();
}

StatusOr<std::vector<PodSeries>> PodSeriesReader::Finish() {
  if (rows_.empty()) {
    return Status::BadInput(fmt::format("{}: no samples (only {})", name_,
                                        have_header_ ? "a header" : "an empty file"));
  }
  std::map<std::string, std::vector<PodSample>> by_key;
  for (auto& [key, s] : rows_) by_key[key].push_back(s);
  rows_.clear();
  std::vector<PodSeries> out;
  out.reserve(by_key.size());
  for (auto& [key, samples] : by_key) {
    std::stable_sort(samples.begin(), samples.end(),
                     [](const PodSample& a, const PodSample& b) { return a.time_s < b.time_s; });
    out.push_back(PodSeries{key, std::move(samples)});
  }
  return out;
}

PodHalf HalfOf(std::string_view key) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64
  for (char c : key) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h % 2 == 0 ? PodHalf::kDev : PodHalf::kBlind;
}

nlohmann::ordered_json ReplayPods(const std::vector<PodSeries>& pods,
                                  const PodReplayOptions& options) {
  double start_s = 0, end_s = 0;
  int64_t samples = 0;
  int zero_start = 0;
  bool any = false;
  for (const auto& p : pods) {
    if (p.samples.empty()) continue;
    start_s = any ? std::min(start_s, p.samples.front().time_s) : p.samples.front().time_s;
    end_s = any ? std::max(end_s, p.samples.back().time_s) : p.samples.back().time_s;
    any = true;
    samples += static_cast<int64_t>(p.samples.size());
    if (p.samples.front().bytes == 0) ++zero_start;
  }
  size_t settings_vpa = options.margins.size() + 1;
  size_t settings_rs = options.fresh.size() + 1;
  std::array<HalfScores, 3> halves;  // dev, blind, all
  for (auto& h : halves) {
    h.vpa.resize(settings_vpa);
    h.krr.resize(settings_vpa);
    h.rightsize.resize(settings_rs);
  }
  for (const auto& p : pods) {
    if (p.samples.empty()) continue;
    HalfScores one;
    one.vpa.resize(settings_vpa);
    one.krr.resize(settings_vpa);
    one.rightsize.resize(settings_rs);
    ReplayPod(p, start_s, options, &one);
    for (HalfScores* h : {&halves[HalfOf(p.key) == PodHalf::kDev ? 0 : 1], &halves[2]}) {
      h->pods += one.pods;
      h->pods_scored += one.pods_scored;
      h->skipped_hours += one.skipped_hours;
      auto add = [](std::vector<Score>& to, const std::vector<Score>& from) {
        for (size_t i = 0; i < to.size(); ++i) {
          to[i].pod_hours += from[i].pod_hours;
          to[i].under_hours += from[i].under_hours;
          to[i].held_byte_hours += from[i].held_byte_hours;
          to[i].baseline_byte_hours += from[i].baseline_byte_hours;
        }
      };
      add(h->vpa, one.vpa);
      add(h->krr, one.krr);
      add(h->rightsize, one.rightsize);
    }
  }
  nlohmann::ordered_json doc;
  doc["schema"] = "rightsize.eval_pods/v1";
  doc["data"] = {{"pods", pods.size()},
                 {"samples", samples},
                 {"first_s", start_s},
                 {"last_s", end_s},
                 {"hours", (end_s - start_s) / 3600},
                 {"pods_starting_at_zero", zero_start}};
  doc["method"] = {
      {"step_s", options.step_s},
      {"min_past_samples", options.min_past_samples},
      {"baseline", "the pod's peak so far (the most it held before the hour)"},
      {"under_provisioned", "an hour in which any sample exceeded the recommendation"},
      {"split", "FNV-1a 64 of the pod's key: even = dev (rightsize tuned here), odd = blind"}};
  doc["dev"] = HalfJson(halves[0], options);
  doc["blind"] = HalfJson(halves[1], options);
  doc["all"] = HalfJson(halves[2], options);
  return doc;
}

}  // namespace rightsize
