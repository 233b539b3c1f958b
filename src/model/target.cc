#include "model/target.h"

#include <fmt/format.h>

#include <cmath>

namespace rightsize {
namespace {

constexpr std::array<TargetInfo, kNumTargets> kInfo = {{
    {"runtime", "s", 1.0},
    {"peak_memory", "bytes", 1024.0 * 1024},
    {"cpu_cores", "cores", 0.01},
    {"gpu_memory", "bytes", 1024.0 * 1024},
    {"gpu_util", "%", 0.1},
}};

// CPU time over a few seconds says little about the cores a job keeps busy.
constexpr double kMinElapsedForCores = 60;

}  // namespace

const TargetInfo& InfoOf(Target t) { return kInfo[static_cast<int>(t)]; }

std::optional<Target> TargetFromName(std::string_view name) {
  for (Target t : kAllTargets) {
    if (NameOf(t) == name) return t;
  }
  return std::nullopt;
}

std::optional<double> TargetValue(const JobRecord& job, Target t) {
  const ResourceUsage& u = job.usage;
  auto gpus = job.AllocatedGpus();
  switch (t) {
    case Target::kRuntime:
      if (u.elapsed_s && *u.elapsed_s > 0) return *u.elapsed_s;
      return std::nullopt;
    case Target::kPeakMemory:
      if (u.peak_rss_bytes && *u.peak_rss_bytes > 0) return static_cast<double>(*u.peak_rss_bytes);
      return std::nullopt;
    case Target::kCpuCores:
      if (u.cpu_time_s && u.elapsed_s && *u.elapsed_s >= kMinElapsedForCores) {
        return *u.cpu_time_s / *u.elapsed_s;
      }
      return std::nullopt;
    case Target::kGpuMemory:
      if (gpus && *gpus > 0 && u.peak_gpu_memory_bytes) {
        return static_cast<double>(*u.peak_gpu_memory_bytes);
      }
      return std::nullopt;
    case Target::kGpuUtil:
      if (gpus && *gpus > 0 && u.gpu_util_pct) return *u.gpu_util_pct;
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<double> TargetRequest(const JobRecord& job, Target t,
                                    std::optional<double> gpu_capacity_bytes) {
  switch (t) {
    case Target::kRuntime:
      if (job.request.time_limit_s && *job.request.time_limit_s > 0) {
        return static_cast<double>(*job.request.time_limit_s);
      }
      return std::nullopt;
    case Target::kPeakMemory:
      if (auto m = job.AllocatedMemoryBytes(); m && *m > 0) return static_cast<double>(*m);
      return std::nullopt;
    case Target::kCpuCores:
      if (auto c = job.AllocatedCpus(); c && *c > 0) return *c;
      return std::nullopt;
    case Target::kGpuMemory:
      if (auto g = job.AllocatedGpus(); g && *g > 0 && gpu_capacity_bytes) {
        return *g * *gpu_capacity_bytes;
      }
      return std::nullopt;
    case Target::kGpuUtil:
      if (auto g = job.AllocatedGpus(); g && *g > 0) return 100.0;
      return std::nullopt;
  }
  return std::nullopt;
}

std::string FormatTargetValue(Target t, double v) {
  // An interval's bound that the held-out jobs were too few to set.
  if (std::isinf(v)) return v > 0 ? "unbounded" : "-unbounded";
  switch (t) {
    case Target::kRuntime:
      return FormatDuration(v);
    case Target::kPeakMemory:
    case Target::kGpuMemory:
      return FormatMemory(static_cast<int64_t>(std::llround(v)));
    case Target::kCpuCores:
      return fmt::format("{:.1f} cores", v);
    case Target::kGpuUtil:
      return fmt::format("{:.0f} %", v);
  }
  return fmt::format("{}", v);
}

}  // namespace rightsize
