#include "sim/scenarios.h"

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <utility>

namespace rightsize::sim {

StatusOr<MachineSize> ResolveMachineSize(const MachineSizeInputs& in) {
  bool nodes = in.unit == SizeUnit::kNodes;
  if (in.explicit_size > 0) return MachineSize{in.explicit_size, "--processors"};
  auto it = in.metadata.find(nodes ? "swf.MaxNodes" : "swf.MaxProcs");
  if (it != in.metadata.end()) {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
    if (ec == std::errc() && v > 0) return MachineSize{v, nodes ? "MaxNodes" : "MaxProcs"};
  }
  if (!nodes && in.store_cpus >= 1) {
    return MachineSize{static_cast<int64_t>(in.store_cpus), "store"};
  }
  return Status::InvalidArgument(fmt::format(
      "the machine size is not known ({}): give --processors N", in.from_store
                                                                     ? "the store has none"
                                                                 : nodes ? "no MaxNodes header"
                                                                         : "no MaxProcs header"));
}

StatusOr<WhatIf> RunScenarios(const Workload& workload, const ScenarioOptions& options) {
  const std::vector<SimJob>& base = workload.jobs;
  SimOptions sim_options{options.policy, options.machine_procs, options.head_guard};
  WhatIf out;
  std::string default_plan = options.policy == Policy::kEasyPlusPlus ? "last2" : "limit";
  auto run = [&](std::string name, std::vector<SimJob> jobs, int64_t new_limits,
                 std::string plan = "", int64_t planned = 0) -> Status {
    int64_t lowered = 0;
    for (size_t i = 0; i < jobs.size(); ++i) lowered += jobs[i].limit_s < base[i].limit_s;
    // Timed for the user's information only.
    auto t0 = std::chrono::steady_clock::now();
    RS_ASSIGN_OR_RETURN(SimResult r, Simulate(jobs, sim_options));
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    Metrics m = Summarise(jobs, r, options.machine_procs);
    out.scenarios.push_back(Scenario{std::move(name), plan.empty() ? default_plan : plan,
                                     new_limits, planned, lowered, m, s, std::move(jobs),
                                     std::move(r)});
    return Status::Ok();
  };
  if (!options.plan.empty() &&
      (options.policy != Policy::kEasyPlusPlus || options.predictions.empty())) {
    return Status::InvalidArgument(
        "--plan: planning on rightsize's run times needs --policy easy++ and --predictions");
  }
  if (options.head_guard && options.policy != Policy::kEasyPlusPlus) {
    return Status::InvalidArgument(
        "--head-guard: guards EASY++'s head of the queue; give --policy easy++");
  }
  if (options.plan.empty() && !options.corrections.empty()) {
    return Status::InvalidArgument("--correct: give --plan too (the quantile to plan with)");
  }
  if (!options.plan.empty()) {
    std::vector<SimJob> none;  // checks the quantiles' names before any simulation
    RS_RETURN_IF_ERROR(
        ApplyEstimates(options.predictions, options.plan, options.corrections, none).status());
  }
  RS_RETURN_IF_ERROR(run("users", base, 0));
  if (options.validate) {
    const SimResult& users = out.scenarios.front().result;
    Validation v;
    for (size_t i = 0; i < base.size(); ++i) {
      if (i >= workload.trace_start_s.size() || workload.trace_start_s[i] < 0) continue;
      ++v.jobs;
      if (users.jobs[i].start_s == workload.trace_start_s[i]) ++v.same_start;
    }
    if (v.jobs == 0) {
      return Status::BadInput("--validate: the trace has no start times to compare with");
    }
    v.share = static_cast<double>(v.same_start) / static_cast<double>(v.jobs);
    out.validation = v;
  }
  if (options.predictions.empty()) return out;
  size_t matched = 0;
  for (const SimJob& j : base) matched += options.predictions.contains(j.id);
  if (matched == 0) {
    return Status::BadInput(
        fmt::format("{}: none of its {} jobs is a job of {} (predictions of another trace?)",
                    options.predictions_name, options.predictions.size(), options.input_name));
  }
  const std::pair<std::string, std::string> sources[] = {
      {"rightsize", fmt::format("rightsize@{:g}", options.risk)},
      {"last2", "last2"},
      {"user_mean", "user_mean"}};
  std::vector<SimJob> rightsize_limits;
  int64_t rightsize_changed = 0;
  for (const auto& [source, name] : sources) {
    std::vector<SimJob> jobs = base;
    RS_ASSIGN_OR_RETURN(int64_t changed,
                        ApplyLimits(options.predictions, source, options.risk, jobs));
    if (changed == 0) continue;
    if (source == "rightsize") {
      rightsize_limits = jobs;
      rightsize_changed = changed;
    }
    RS_RETURN_IF_ERROR(run(name, std::move(jobs), changed));
  }
  if (options.plan.empty()) return out;
  std::string plan = options.plan;
  for (const std::string& c : options.corrections) plan += ">" + c;
  // The users' limits and rightsize's, each planned on rightsize's run times.
  std::vector<std::pair<std::string, std::vector<SimJob>>> planned_runs;
  planned_runs.emplace_back("users", base);
  if (rightsize_changed > 0) {
    planned_runs.emplace_back(fmt::format("rightsize@{:g}", options.risk), rightsize_limits);
  }
  for (auto& [name, jobs] : planned_runs) {
    RS_ASSIGN_OR_RETURN(int64_t planned, ApplyEstimates(options.predictions, options.plan,
                                                        options.corrections, jobs));
    int64_t limits = name == "users" ? 0 : rightsize_changed;
    RS_RETURN_IF_ERROR(run(name, std::move(jobs), limits, plan, planned));
  }
  return out;
}

}  // namespace rightsize::sim
