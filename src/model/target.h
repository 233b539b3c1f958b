// Targets: the quantities rightsize predicts for a job before it runs.
//
// Each target is read from a finished JobRecord (the value the job really reached) beside what
// the job asked for (its request), so the model can learn both the value and the ratio
// used/requested. Models work on log(value): every target spans orders of magnitude, and the
// quantiles of log(value) are the logs of the quantiles of value, so nothing is lost.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "core/job.h"

namespace rightsize {

enum class Target : int {
  kRuntime = 0,  // elapsed seconds; request = time limit
  kPeakMemory,   // peak resident bytes, whole job; request = allocated memory
  kCpuCores,     // cores kept busy on average (CPU time / elapsed); request = allocated cores
  kGpuMemory,    // peak GPU memory bytes, all the job's GPUs; request = their capacity
  kGpuUtil,      // mean GPU utilisation, 0..100 %; request = 100
};
inline constexpr int kNumTargets = 5;
inline constexpr std::array<Target, kNumTargets> kAllTargets = {
    Target::kRuntime, Target::kPeakMemory, Target::kCpuCores, Target::kGpuMemory, Target::kGpuUtil};

struct TargetInfo {
  std::string_view name;  // "runtime": the key in JSON and on the command line
  std::string_view unit;  // "s", "bytes", "cores", "%"
  double floor;           // values below this are taken as this (log of 0 is undefined)
};
const TargetInfo& InfoOf(Target t);
inline std::string_view NameOf(Target t) { return InfoOf(t).name; }
std::optional<Target> TargetFromName(std::string_view name);

// What the finished job reached; nullopt when the source did not measure it (or, for the GPU
// targets, when the job had no GPU).
std::optional<double> TargetValue(const JobRecord& job, Target t);
// What the job asked for, in the same unit; nullopt when unknown (an unlimited time limit, a
// source without requests). GPU memory needs the GPUs' capacity, which the job record does not
// hold: `gpu_capacity_bytes` (per GPU) supplies it when known.
std::optional<double> TargetRequest(const JobRecord& job, Target t,
                                    std::optional<double> gpu_capacity_bytes = std::nullopt);

// "3h 20m", "12.4 GiB", "3.5 cores", "41 %": a value for people; "unbounded" for infinity.
std::string FormatTargetValue(Target t, double v);

}  // namespace rightsize
