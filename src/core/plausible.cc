#include "core/plausible.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace rightsize {

namespace {

struct Range {
  double min, max;
  const char* expected;
};

Range RangeOf(Plausible kind) {
  switch (kind) {
    case Plausible::kUnixTime:
      return {static_cast<double>(kMinPlausibleUnixTime),
              static_cast<double>(kMaxPlausibleUnixTime), "a time from 1970 to 2200"};
    case Plausible::kDuration:
      return {0, kMaxPlausibleDurationS, "a duration from 0 to 10 years (315,576,000 s)"};
    case Plausible::kTimeLimit:
      return {0, kMaxPlausibleTimeLimitS, "a time limit from 0 to 100 years (3,155,760,000 s)"};
    case Plausible::kCpuTime:
      return {0, kMaxPlausibleCpus * kMaxPlausibleDurationS,
              "CPU seconds from 0 to 100,000,000 CPUs x 10 years"};
    case Plausible::kCpus:
      return {0, kMaxPlausibleCpus, "a CPU count from 0 to 100,000,000"};
    case Plausible::kNodes:
      return {0, kMaxPlausibleNodes, "a node count from 0 to 1,000,000"};
    case Plausible::kGpus:
      return {0, kMaxPlausibleGpus, "a GPU count from 0 to 1,000,000"};
    case Plausible::kMemoryBytes:
      return {0, kMaxPlausibleMemoryBytes, "a memory size from 0 to 64 PiB"};
    case Plausible::kIoBytes:
      return {0, kMaxPlausibleIoBytes, "a byte count from 0 to 1 EiB"};
    case Plausible::kEnergyJ:
      return {0, kMaxPlausibleEnergyJ, "an energy from 0 to 1e17 J (28 TWh)"};
    case Plausible::kPercent:
      return {0, 100, "a percentage from 0 to 100"};
  }
  return {0, 0, "a valid value"};
}

std::string Got(double value, std::string_view text) {
  if (!text.empty()) return Quote(text);
  return fmt::format("{}", value);
}

}  // namespace

bool IsPlausible(Plausible kind, double value) {
  Range r = RangeOf(kind);
  return std::isfinite(value) && value >= r.min && value <= r.max;
}

Status CheckPlausible(std::string_view field, Plausible kind, double value, std::string_view text) {
  if (IsPlausible(kind, value)) return Status::Ok();
  Range r = RangeOf(kind);
  return Status::BadInput(
      fmt::format("field {}: expected {}, got {}", field, r.expected, Got(value, text)));
}

Status CheckCpuEfficiency(std::string_view field, double cpu_time_s, double cpus,
                          double elapsed_s) {
  // NaN compares false: unknown values pass.
  if (!(cpu_time_s >= 0) || !(cpus > 0) || !(elapsed_s >= 0)) return Status::Ok();
  double limit = kMaxPlausibleCpuEfficiency * cpus * elapsed_s + kCpuTimeSlackS;
  if (cpu_time_s <= limit) return Status::Ok();
  double pct = elapsed_s > 0 ? 100 * cpu_time_s / (cpus * elapsed_s)
                             : std::numeric_limits<double>::infinity();
  return Status::BadInput(fmt::format(
      "field {}: expected a CPU efficiency of at most 1,000% (CPU time up to 10 x {} CPUs x {} s "
      "+ 1 h), got {} s of CPU time ({:.3g}%)",
      field, cpus, elapsed_s, cpu_time_s, pct));
}

Status CheckJobRecord(const JobRecord& job) {
  auto opt = [](std::string_view field, Plausible kind, const auto& v) -> Status {
    if (!v) return Status::Ok();
    return CheckPlausible(field, kind, static_cast<double>(*v));
  };
  const auto& r = job.request;
  const auto& a = job.alloc;
  const auto& u = job.usage;
  for (Status st : {
           opt("submit_time", Plausible::kUnixTime, job.submit_time),
           opt("start_time", Plausible::kUnixTime, job.start_time),
           opt("end_time", Plausible::kUnixTime, job.end_time),
           opt("request.cpus", Plausible::kCpus, r.cpus),
           opt("request.memory_bytes", Plausible::kMemoryBytes, r.memory_bytes),
           opt("request.memory_per_unit_bytes", Plausible::kMemoryBytes, r.memory_per_unit_bytes),
           opt("request.gpus", Plausible::kGpus, r.gpus),
           opt("request.time_limit_s", Plausible::kTimeLimit, r.time_limit_s),
           opt("request.nodes", Plausible::kNodes, r.nodes),
           opt("alloc.cpus", Plausible::kCpus, a.cpus),
           opt("alloc.memory_bytes", Plausible::kMemoryBytes, a.memory_bytes),
           opt("alloc.gpus", Plausible::kGpus, a.gpus),
           opt("alloc.nodes", Plausible::kNodes, a.nodes),
           opt("usage.elapsed_s", Plausible::kDuration, u.elapsed_s),
           // CPU time sums over cores: bounded by the efficiency check below, and by CPUs x
           // the longest run when the CPUs are unknown.
           opt("usage.peak_rss_bytes", Plausible::kMemoryBytes, u.peak_rss_bytes),
           opt("usage.avg_rss_bytes", Plausible::kMemoryBytes, u.avg_rss_bytes),
           opt("usage.gpu_util_pct", Plausible::kPercent, u.gpu_util_pct),
           opt("usage.peak_gpu_memory_bytes", Plausible::kMemoryBytes, u.peak_gpu_memory_bytes),
           opt("usage.io_read_bytes", Plausible::kIoBytes, u.io_read_bytes),
           opt("usage.io_write_bytes", Plausible::kIoBytes, u.io_write_bytes),
           opt("usage.gpu_energy_j", Plausible::kEnergyJ, u.gpu_energy_j),
           opt("usage.cpu_energy_j", Plausible::kEnergyJ, u.cpu_energy_j),
           opt("usage.node_energy_j", Plausible::kEnergyJ, u.node_energy_j),
       }) {
    if (!st.ok()) return st;
  }
  if (u.cpu_time_s) {
    double cpu = *u.cpu_time_s;
    RS_RETURN_IF_ERROR(CheckPlausible("usage.cpu_time_s", Plausible::kCpuTime, cpu));
    // Only against an allocation the scheduler enforces: a Kubernetes request is no limit, and a
    // pod may use many times its requested cores.
    const auto& cpus = job.alloc.cpus;
    RS_RETURN_IF_ERROR(CheckCpuEfficiency("usage.cpu_time_s", cpu, cpus ? *cpus : -1,
                                          u.elapsed_s ? *u.elapsed_s : -1));
  }
  return Status::Ok();
}

}  // namespace rightsize
