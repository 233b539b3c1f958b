// Simulator: replays jobs through an event-driven batch scheduler on one machine of N
// processors (or nodes): FCFS, EASY backfilling, or EASY++ (Tsafrir, Etsion & Feitelson 2007).
//
// Each job asks for `procs` processors and runs under a time limit `limit_s`; it really needs
// `run_s`. A job whose run outgrows its limit is killed at the limit and, when it has a
// `resubmit_limit_s`, submitted again at the kill time with that limit (both runs occupy the
// machine; the job's wait and slowdown are counted from its first submission to its last end).
// EASY plans with each job's limit; EASY++ plans with a prediction (given per job, or the
// user's last two completed runs in the simulation, "last2"), extends a running job's
// prediction when the job outlives it (to its next given correction, else to its limit), and
// backfills the shortest predicted job first; with the head guard, a head that outwaits EASY's
// reservation is planned for with limits until it starts. The event order and backfilling rule
// follow pyss (the simulator of predictsim, used to make the derived traces); docs/simulate.md
// lists every difference.
//
// Pure: no I/O, no clock. Deterministic. Thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace rightsize::sim {

enum class Policy { kFcfs, kEasy, kEasyPlusPlus };

// "fcfs", "easy", "easy++".
std::string_view PolicyName(Policy p);
StatusOr<Policy> ParsePolicy(std::string_view name);

struct SimJob {
  std::string id;        // the trace's job id, for reports
  int64_t submit_s = 0;  // seconds, any origin
  int64_t run_s = 1;     // what the job needs, > 0
  int64_t limit_s = 1;   // the time limit it runs under, > 0 (killed at it)
  int64_t procs = 1;     // processors (or nodes), 1..machine size
  int64_t user = -1;     // for EASY++ last2; -1 = unknown
  // EASY++: the run time the scheduler plans with, 0 < estimate <= limit; 0 = use the policy's
  // predictor (last2 in the simulation, else the limit).
  int64_t estimate_s = 0;
  // EASY++ with a given estimate: when the job outlives the run time planned so far, the next
  // planned run times in order (ascending; steps at or past the limit are ignored), then the
  // limit. Empty: straight to the limit (Tsafrir's correction).
  std::vector<int64_t> corrections_s;
  // When the job is killed at its limit: the limit of its second submission (0 = not resubmitted).
  int64_t resubmit_limit_s = 0;
};

struct SimOptions {
  Policy policy = Policy::kEasy;
  int64_t machine_procs = 0;  // > 0
  // EASY++ only: a head of the queue that is still waiting at the reservation EASY would have
  // given it (the earliest time enough processors come back by the running jobs' limits, taken
  // when it became the head) is protected: until it starts, every pass plans with limits, as
  // EASY does, so no job backfilled on a too-short prediction can push it back again.
  bool head_guard = false;
};

// What happened to one job (the input's index). For a killed and resubmitted job, start and end
// are those of its last run.
struct JobOutcome {
  int64_t start_s = -1;
  int64_t end_s = -1;
  bool killed = false;
  bool backfilled = false;  // its last run started past a waiting head
  int64_t lost_proc_s = 0;  // processor-seconds of its killed run
};

struct SimResult {
  std::vector<JobOutcome> jobs;  // same order as the input
  int64_t events = 0;
};

// Runs the jobs. InvalidArgument for a job the machine cannot hold or a field out of range
// (naming the job), or a machine size <= 0.
StatusOr<SimResult> Simulate(const std::vector<SimJob>& jobs, const SimOptions& options);

// The figures a scheduler is judged by.
struct Metrics {
  int64_t jobs = 0;
  double mean_wait_s = 0;
  double p95_wait_s = 0;
  double avebsld = 0;      // mean of max(1, (end - submit) / max(run, 10 s))
  double utilisation = 0;  // busy processor-seconds (killed runs too) / (N * makespan)
  int64_t makespan_s = 0;  // last end - first submit
  int64_t killed = 0;
  double lost_proc_hours = 0;
  int64_t backfilled = 0;
};

// `result` must come from Simulate(jobs, ...). Wait = last start - first submit - (nothing):
// a killed job's wait includes its killed run.
Metrics Summarise(const std::vector<SimJob>& jobs, const SimResult& result, int64_t machine_procs);

}  // namespace rightsize::sim
