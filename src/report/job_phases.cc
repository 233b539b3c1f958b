#include "report/job_phases.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/telemetry.h"
#include "core/units.h"
#include "phases/phases.h"

namespace rightsize {

namespace {

// The metrics DetectPhases reads (phases/phases.h).
constexpr const char* kPhaseMetrics[] = {"cpu_cores",        "memory_bytes",  "gpu_util_pct",
                                         "gpu_memory_bytes", "io_read_bytes", "io_write_bytes"};

std::string Clock(double s) {
  auto t = static_cast<int64_t>(std::llround(std::max(0.0, s)));
  return fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60);
}

}  // namespace

StatusOr<nlohmann::json> JobPhasesJson(Store& store, const JobRecord& job) {
  JobSeries series;
  int64_t first_ms = std::numeric_limits<int64_t>::max();
  size_t samples = 0;
  for (const char* metric : kPhaseMetrics) {
    std::vector<SeriesPoint>& points = series[metric];
    RS_RETURN_IF_ERROR(store.ReadSamples(job.cluster, job.job_id, metric, 0,
                                         std::numeric_limits<int64_t>::max(), [&](const Sample& s) {
                                           first_ms = std::min(first_ms, s.t_ms);
                                           points.push_back({s.t_ms, s.value});
                                         }));
    samples += points.size();
    if (points.empty()) series.erase(metric);
  }
  if (series.empty()) return nlohmann::json(nullptr);
  // Seconds from the job's start: the phases' times read as a run's do.
  int64_t from_s = job.start_time.value_or(first_ms / 1000);
  for (auto& [metric, points] : series) {
    for (SeriesPoint& p : points) p.t_s = p.t_s / 1000 - from_s;
  }
  std::vector<Phase> phases = DetectPhases(series);
  Reservation reserved;
  if (auto cpus = job.AllocatedCpus()) reserved.cores = *cpus;
  if (auto mem = job.AllocatedMemoryBytes()) reserved.memory_bytes = static_cast<double>(*mem);
  nlohmann::json doc = PhasesJson(phases, SuggestSplit(phases, reserved));
  doc["from"] = from_s;
  doc["samples"] = samples;
  return doc;
}

std::string JobPhasesText(const nlohmann::json& doc) {
  if (!doc.is_object() || !doc.contains("phases") || doc["phases"].size() < 2) return "";
  const nlohmann::json& split = doc["split"];
  std::string out = fmt::format("\nphases ({} of them, from the job's samples; docs/phases.md):\n",
                                doc["phases"].size());
  int n = 0;
  for (const auto& p : doc["phases"]) {
    const nlohmann::json& use = p["use"];
    std::string cores =
        use.contains("cpu_cores")
            ? fmt::format("{:.2f} cores (p95 {:.2f})", use["cpu_cores"]["mean"].get<double>(),
                          use["cpu_cores"]["p95"].get<double>())
            : std::string("cores ?");
    std::string memory =
        use.contains("memory_bytes")
            ? FormatMemory(static_cast<int64_t>(use["memory_bytes"]["peak"].get<double>())) +
                  " peak"
            : std::string("memory ?");
    out += fmt::format("  {}. {} - {}  {}, {}; a step of its own: {} core{}, {}\n", ++n,
                       Clock(p["start_s"].get<double>()), Clock(p["end_s"].get<double>()), cores,
                       memory, p["step_cores"].get<double>(),
                       p["step_cores"].get<double>() == 1 ? "" : "s",
                       FormatMemory(static_cast<int64_t>(p["step_memory_bytes"].get<double>())));
  }
  double freed_core_h = split["freed_core_s"].get<double>() / 3600;
  double freed_gib_h = split["freed_memory_byte_s"].get<double>() / 3600 / (1024.0 * 1024 * 1024);
  out += fmt::format(
      "  as {} chained steps (each asking for its phase's use): {:.2f} core-hours and {:.2f} "
      "GiB-hours of the reservation freed, for {} more queue wait{}\n",
      doc["phases"].size(), freed_core_h, freed_gib_h, split["extra_queue_waits"].get<int64_t>(),
      split["extra_queue_waits"].get<int64_t>() == 1 ? "" : "s");
  return out;
}

}  // namespace rightsize
