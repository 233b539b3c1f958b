// Scenarios: the what-if a user asks for, as one in-process call the CLI, the report and the
// server share. Given a workload, it simulates the users' requests and, given `eval --jobs`
// predictions, each predictor's suggested requests (rightsize at a risk, last2, user_mean),
// and returns each scenario's figures; with validation, the share of jobs whose simulated
// start equals the trace's.
//
// Pure apart from timing each simulation (reported, never used to decide anything).
// Thread-compatible. Failures are InvalidArgument (a bad option, a risk the predictions lack)
// or BadInput (the inputs do not fit together), with a message for the user.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "sim/simulator.h"
#include "sim/workload.h"

namespace rightsize::sim {

// Where the machine size comes from, in order: an explicit size, the SWF header (MaxProcs, or
// MaxNodes when sizing in nodes), the store's total CPUs.
struct MachineSizeInputs {
  int64_t explicit_size = 0;                    // --processors; 0 = not given
  SizeUnit unit = SizeUnit::kProcessors;        // kNodes reads MaxNodes and never the store
  std::map<std::string, std::string> metadata;  // the trace parser's ("swf.MaxProcs", ...)
  double store_cpus = 0;                        // the store cluster's total CPUs; 0 = unknown
  bool from_store = false;                      // the jobs came from the store (for the message)
};

struct MachineSize {
  int64_t size = 0;
  std::string from;  // "--processors", "MaxProcs", "MaxNodes" or "store"
};

// InvalidArgument saying to give --processors when no source knows the size.
StatusOr<MachineSize> ResolveMachineSize(const MachineSizeInputs& in);

struct ScenarioOptions {
  Policy policy = Policy::kEasy;
  int64_t machine_procs = 0;
  double risk = 0.01;  // rightsize's suggested requests at this risk
  bool validate = false;
  // Empty: only the users' scenario. Otherwise rightsize@risk, last2 and user_mean, each when
  // it gives at least one job a limit.
  std::map<std::string, PredictedJob> predictions;
  // EASY++ only, with predictions: also run the users' and rightsize's limits with each scored
  // job planned on rightsize's own run-time quantile `plan` ("point", "p10", ...; empty: not)
  // and corrected through `corrections` (ApplyEstimates).
  std::string plan;
  std::vector<std::string> corrections;
  bool head_guard = false;       // EASY++: SimOptions::head_guard, in every scenario
  std::string predictions_name;  // the predictions' file, for messages
  std::string input_name;        // the trace's name ("store" for the store), for messages
};

struct Scenario {
  std::string name;  // the limits: "users", "rightsize@0.01", "last2", "user_mean"
  // What EASY++ plans with: "last2" (the simulation's), or rightsize's quantile and its
  // corrections ("point>p90>p97_5"); "limit" for FCFS and EASY.
  std::string plan;
  int64_t new_limits = 0;  // jobs the predictor gave a limit
  int64_t planned = 0;     // jobs planned on rightsize's quantile
  int64_t lowered = 0;     // of those, limits below the job's request
  Metrics metrics;
  double seconds = 0;        // the simulation's own wall time
  std::vector<SimJob> jobs;  // the limits it ran with (same order as the workload)
  SimResult result;
};

struct Validation {
  int64_t jobs = 0;        // jobs with a known start in the trace
  int64_t same_start = 0;  // of those, started at the same second in the simulation
  double share = 0;
};

struct WhatIf {
  std::vector<Scenario> scenarios;  // "users" first
  std::optional<Validation> validation;
};

// Runs every scenario on `workload.jobs`. BadInput when validation is asked for a trace with no
// start times, or when no job of the predictions is in the workload; InvalidArgument for a plan
// without EASY++ or predictions, or an unknown quantile; a simulator error as is.
StatusOr<WhatIf> RunScenarios(const Workload& workload, const ScenarioOptions& options);

}  // namespace rightsize::sim
