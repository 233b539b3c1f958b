#include "report/live.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string>

#include "core/units.h"
#include "report/job_card.h"
#include "report/job_phases.h"

namespace rightsize {

StatusOr<LiveUsage> UsageSoFar(Store& store, const JobRecord& job, int64_t now_s) {
  LiveUsage live;
  int64_t from_ms = job.start_time.value_or(0) * 1000;
  int64_t to_ms = std::numeric_limits<int64_t>::max();
  int64_t newest_ms = 0, covered_ms = 0;
  // The cores series: each sample is the rate over the interval that ends at it.
  double cpu_s = 0, last_minute = 0;
  int64_t prev_ms = -1, n = 0, minute_n = 0;
  std::vector<std::pair<int64_t, double>> cores;
  RS_RETURN_IF_ERROR(
      store.ReadSamples(job.cluster, job.job_id, "cpu_cores", from_ms, to_ms,
                        [&](const Sample& s) { cores.emplace_back(s.t_ms, s.value); }));
  // The first sample's interval is unknown: the typical spacing of the others stands for it.
  int64_t typical_ms = 1000;
  if (cores.size() >= 2) {
    std::vector<int64_t> gaps;
    for (size_t i = 1; i < cores.size(); ++i) gaps.push_back(cores[i].first - cores[i - 1].first);
    std::nth_element(gaps.begin(), gaps.begin() + static_cast<ptrdiff_t>(gaps.size() / 2),
                     gaps.end());
    typical_ms = std::max<int64_t>(1, gaps[gaps.size() / 2]);
  }
  for (const auto& [t_ms, v] : cores) {
    int64_t dt = prev_ms < 0 ? typical_ms : t_ms - prev_ms;
    if (dt > 0 && dt <= kMaxGapS * 1000) cpu_s += v * static_cast<double>(dt) / 1000;
    prev_ms = t_ms;
    ++n;
    newest_ms = std::max(newest_ms, t_ms);
  }
  if (n > 0) {
    covered_ms = cores.back().first - cores.front().first + typical_ms;
    live.so_far.cpu_time_s = cpu_s;
    for (const auto& [t_ms, v] : cores) {
      if (t_ms > newest_ms - 60000) {
        last_minute += v;
        ++minute_n;
      }
    }
    live.cores_now = last_minute / static_cast<double>(minute_n);
  }
  // Memory, GPU: largest and mean of what was sampled.
  auto stats = [&](const char* metric, double* peak, double* mean, double* last) -> StatusOr<bool> {
    double sum = 0, mx = 0, newest = 0;
    int64_t count = 0, at = -1;
    RS_RETURN_IF_ERROR(
        store.ReadSamples(job.cluster, job.job_id, metric, from_ms, to_ms, [&](const Sample& s) {
          sum += s.value;
          mx = std::max(mx, s.value);
          ++count;
          if (s.t_ms >= at) {
            at = s.t_ms;
            newest = s.value;
          }
        }));
    if (count == 0) return false;
    newest_ms = std::max(newest_ms, at);
    *peak = mx;
    *mean = sum / static_cast<double>(count);
    if (last) *last = newest;
    return true;
  };
  double peak = 0, mean = 0, last = 0;
  RS_ASSIGN_OR_RETURN(bool mem, stats("memory_bytes", &peak, &mean, &last));
  if (mem) {
    live.so_far.peak_rss_bytes = static_cast<int64_t>(peak);
    live.so_far.avg_rss_bytes = static_cast<int64_t>(mean);
    live.memory_bytes_now = static_cast<int64_t>(last);
  }
  RS_ASSIGN_OR_RETURN(bool util, stats("gpu_util_pct", &peak, &mean, nullptr));
  if (util) live.so_far.gpu_util_pct = mean;
  RS_ASSIGN_OR_RETURN(bool gmem, stats("gpu_memory_bytes", &peak, &mean, nullptr));
  if (gmem) live.so_far.peak_gpu_memory_bytes = static_cast<int64_t>(peak);
  live.as_of_s = newest_ms / 1000;
  // Start times and `now` are whole seconds, so early in a job `now - start` can fall up to two
  // seconds short of the time the samples already cover, and the efficiency so far would then
  // exceed what the job holds. The elapsed time is never shorter than what was sampled.
  // Without a sample no agent watches the job (an UNKNOWN job of a 2002 trace, a RUNNING row of
  // an old sacct export): `now - start` would have it running for 8,846 days.
  if (newest_ms == 0) return live;
  if (job.start_time && now_s > *job.start_time) {
    live.so_far.elapsed_s = std::max(static_cast<double>(now_s - *job.start_time),
                                     static_cast<double>(covered_ms) / 1000);
  } else if (covered_ms > 0) {
    live.so_far.elapsed_s = static_cast<double>(covered_ms) / 1000;
  }
  return live;
}

StatusOr<JobRecord> WithUsageSoFar(Store& store, JobRecord job, int64_t now_s, LiveUsage* live) {
  if (job.end_time) return job;
  RS_ASSIGN_OR_RETURN(LiveUsage l, UsageSoFar(store, job, now_s));
  ResourceUsage& u = job.usage;
  const ResourceUsage& s = l.so_far;
  if (!u.elapsed_s) u.elapsed_s = s.elapsed_s;
  if (!u.cpu_time_s) u.cpu_time_s = s.cpu_time_s;
  if (!u.peak_rss_bytes) u.peak_rss_bytes = s.peak_rss_bytes;
  if (!u.avg_rss_bytes) u.avg_rss_bytes = s.avg_rss_bytes;
  if (!u.gpu_util_pct) u.gpu_util_pct = s.gpu_util_pct;
  if (!u.peak_gpu_memory_bytes) u.peak_gpu_memory_bytes = s.peak_gpu_memory_bytes;
  if (live) *live = l;
  return job;
}

StatusOr<JobView> ViewJob(Store& store, const std::string& cluster, const std::string& job_id,
                          int64_t now_s) {
  RS_ASSIGN_OR_RETURN(JobRecord stored, store.GetJob(cluster, job_id));
  JobView view;
  // A running job: its efficiency so far, from the samples the agents shipped.
  RS_ASSIGN_OR_RETURN(view.job, WithUsageSoFar(store, std::move(stored), now_s, &view.live));
  // The diagnosis `rightsize diagnose` or the follower kept with the job, when there is one.
  auto diagnosis = store.GetDiagnosis(view.job.cluster, view.job.job_id);
  if (!diagnosis.ok() && diagnosis.status().code() != Status::Code::kNotFound) {
    return diagnosis.status();
  }
  if (diagnosis.ok()) {
    view.diagnosis =
        nlohmann::json::parse(diagnosis->document, nullptr, /*allow_exceptions=*/false);
    if (view.diagnosis.is_discarded()) view.diagnosis = nullptr;
  }
  RS_ASSIGN_OR_RETURN(view.phases, JobPhasesJson(store, view.job));
  return view;
}

namespace {

std::string DiagnosisClass(const JobView& view) {
  const nlohmann::json& d = view.diagnosis;
  return d.is_object() && d.contains("class") && d["class"].is_string()
             ? d["class"].get<std::string>()
             : std::string();
}

}  // namespace

nlohmann::json JobViewJson(const JobView& view, const PriceTable& prices) {
  nlohmann::json card = RenderJobCardJson(view.job, prices, DiagnosisClass(view));
  card["diagnosis"] = view.diagnosis;
  card["phases"] = view.phases;
  card["live"] = nullptr;
  const LiveUsage& live = view.live;
  if (!view.job.end_time) {
    card["live"] = {
        {"as_of", live.as_of_s > 0 ? nlohmann::json(live.as_of_s) : nlohmann::json()},
        {"cores_last_minute", live.cores_now ? nlohmann::json(*live.cores_now) : nlohmann::json()},
        {"memory_bytes_now",
         live.memory_bytes_now ? nlohmann::json(*live.memory_bytes_now) : nlohmann::json()}};
  }
  return card;
}

std::string JobViewText(const JobView& view, const PriceTable& prices) {
  const JobRecord& job = view.job;
  const LiveUsage& live = view.live;
  std::string out = RenderJobCardText(job, prices, DiagnosisClass(view));
  if (!job.end_time && live.as_of_s > 0) {
    out += fmt::format("\nnow (last sample {}): {:.2f} cores over the last minute, {} resident\n",
                       FormatTimestamp(live.as_of_s), live.cores_now.value_or(0),
                       FormatMemory(live.memory_bytes_now.value_or(0)));
  } else if (!job.end_time) {
    out += "\nno samples of this running job yet (is `rightsize agent` on its node?)\n";
  }
  out += JobPhasesText(view.phases);
  const nlohmann::json& diag = view.diagnosis;
  if (diag.is_object()) {
    out += fmt::format("\ndiagnosis: {} (confidence {:.2f}) {}\n", diag.value("class", "?"),
                       diag.value("confidence", 0.0), diag.value("summary", ""));
    out += fmt::format("           `rightsize diagnose {}` for the evidence and the fixes\n",
                       job.job_id);
  }
  return out;
}

}  // namespace rightsize
