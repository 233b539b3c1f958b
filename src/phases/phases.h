// Phases: where inside a job the reservation sits idle. From a job's sampled series (the agent's
// or `rightsize run`'s: CPU cores, memory, I/O, GPU), DetectPhases finds the change points and
// cuts the run into phases; SuggestSplit prices the split that would free the idle capacity:
// one step per phase, each asking for its own phase's use, chained by dependencies.
//
// The segmentation is an optimal partition (dynamic programming) of all metrics together into
// segments each fitted by a straight line (a growing memory is one phase, not many), every
// metric scaled to its own peak and its noise, with a penalty per phase and a shortest phase;
// then neighbours that differ too little to be worth their own request are merged.
// Pure, deterministic, thread-compatible; bad series (unsorted, NaN) are skipped point by point.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace rightsize {

struct SeriesPoint {
  int64_t t_s = 0;
  double value = 0;
};

// Metric name -> points, oldest first. Read: cpu_cores, memory_bytes, gpu_util_pct,
// gpu_memory_bytes as levels; io_read_bytes, io_write_bytes as running totals (their rate is
// what is segmented). Other metrics are ignored.
using JobSeries = std::map<std::string, std::vector<SeriesPoint>>;

struct PhaseOptions {
  int64_t min_phase_s = 10;  // no phase shorter than this
  double penalty = 0;        // cost of one more phase; 0 = 4 × metrics × ln(points)
  // Neighbouring phases whose means differ by less than this share of the metric's peak in
  // every metric are one phase.
  double merge_share = 0.2;
};

struct PhaseUse {
  double mean = 0;
  double p95 = 0;
  double peak = 0;
};

struct Phase {
  int64_t start_s = 0;  // first sample of the phase
  int64_t end_s = 0;    // first sample of the next phase (the job's last sample + 1 for the last)
  std::map<std::string, PhaseUse> use;  // per metric read (I/O as bytes per second)
};

std::vector<Phase> DetectPhases(const JobSeries& series, const PhaseOptions& options = {});

// What the job reserved for its whole run; 0 = unknown: then the single-step right-size, the
// whole run's 95th-percentile cores rounded up to a whole core and its peak memory.
struct Reservation {
  double cores = 0;
  double memory_bytes = 0;
};

struct SplitStep {
  int64_t start_s = 0, end_s = 0;
  double cores = 0;         // the phase's 95th percentile, rounded up to a whole core (>= 1)
  double memory_bytes = 0;  // the phase's peak
  double idle_core_s = 0;   // reserved but unused in this phase: (reserved - mean) × duration
  double idle_memory_byte_s = 0;
};

struct SplitSuggestion {
  Reservation reserved;  // what the comparison is against (given or the single-step right-size)
  std::vector<SplitStep> steps;
  double reserved_core_s = 0, reserved_memory_byte_s = 0;  // the reservation over the whole run
  double freed_core_s = 0, freed_memory_byte_s = 0;  // (reserved - step request) × duration, summed
  // Each step after the first waits in the queue once more: the split's cost in run time is
  // this many scheduling waits (and any intermediate data the programs piped to each other
  // written out instead).
  int64_t extra_starts = 0;
};

SplitSuggestion SuggestSplit(const std::vector<Phase>& phases, Reservation reserved);

// The document `rightsize run --json --series`, `rightsize job` and the job page show:
// {"phases": [{start_s, end_s, use: {metric: {mean, p95, peak}}, step_cores, step_memory_bytes,
// idle_core_s, idle_memory_byte_s}], "split": {reserved_cores, reserved_memory_bytes,
// reserved_core_s, reserved_memory_byte_s, freed_core_s, freed_memory_byte_s,
// extra_queue_waits}} (docs/phases.md). `split` is SuggestSplit(phases, …) of the same phases.
nlohmann::json PhasesJson(const std::vector<Phase>& phases, const SplitSuggestion& split);

}  // namespace rightsize
