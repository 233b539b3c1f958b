// The report's "what the queue would have done": the window's jobs replayed through the EASY
// backfilling simulator (src/sim) twice, with the users' time limits and with right-sized
// ones, and wait and slowdown before and after.
//
// Right-sized time limit: the report's history policy applied to time. At submission, 1.2 x
// the longest run among the same user's (and job name's) last 5 jobs that had already ended,
// when there are at least 3, never above the job's own limit. A job that outruns its
// right-sized limit is killed there and resubmitted with its own limit; both runs count.
// The machine is the cluster's CPUs (sinfo, or the largest job seen), jobs sized in CPUs.
// Pure; thread-compatible; never fails (what it could not simulate it says in `why_not`).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "core/job.h"

namespace rightsize {

struct QueueFigures {
  double mean_wait_s = 0;
  double p95_wait_s = 0;
  double avebsld = 0;  // bounded slowdown, 10 s threshold
  double utilisation = 0;
  int64_t killed = 0;
  double lost_core_hours = 0;
};

struct QueueWhatIf {
  bool simulated = false;
  std::string why_not;  // when not simulated
  int64_t machine_cpus = 0;
  int64_t jobs = 0;         // jobs simulated (submit, run, limit and CPUs known)
  int64_t left_out = 0;     // the window's other jobs
  int64_t right_sized = 0;  // jobs whose limit the policy lowered
  QueueFigures before, after;
};

// `jobs`: the report's jobs (one cluster); `machine_cpus` <= 0 = unknown.
QueueWhatIf SimulateQueue(std::span<const JobRecord> jobs, double machine_cpus);

std::vector<std::string> QueueSentences(const QueueWhatIf& q);
nlohmann::json QueueJson(const QueueWhatIf& q);
// An inline SVG: before/after bars of mean wait, p95 wait (hours) and AVEbsld.
std::string QueueSvg(const QueueWhatIf& q);

extern const char* const kQueueRule;

}  // namespace rightsize
