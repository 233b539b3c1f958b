// `rightsize simulate`: replays a trace (SWF, sacct -P, or the store's jobs) through the
// scheduler simulator, with the users' requests and, given `eval --jobs` predictions, with each
// predictor's suggested requests; prints wait, slowdown, utilisation and kills per scenario.
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "cli/terminal.h"
#include "core/json_text.h"
#include "core/units.h"
#include "ingest/line_reader.h"
#include "ingest/sacct.h"
#include "ingest/swf.h"
#include "predict/cluster.h"
#include "sim/scenarios.h"
#include "sim/simulator.h"
#include "sim/workload.h"

namespace rightsize::cli {

namespace {

struct SimulateFlags {
  std::string trace, format, cluster, policy = "easy", predictions, plan;
  std::vector<std::string> corrections;
  bool store = false, nodes = false, validate = false, json = false, head_guard = false;
  int64_t processors = 0;
  double risk = 0.01;
};

struct Loaded {
  std::vector<JobRecord> records;
  std::map<std::string, std::string> metadata;
  double store_cpus = 0;
  std::vector<std::string> notes;
};

StatusOr<Loaded> ReadTrace(const SimulateFlags& f) {
  std::string format = f.format;
  if (format.empty() || format == "auto") {
    format = f.trace.find(".swf") != std::string::npos ? "swf" : "sacct";
  }
  std::unique_ptr<RecordParser> parser;
  if (format == "swf") {
    parser = std::make_unique<SwfParser>();
  } else if (format == "sacct") {
    parser = std::make_unique<SacctParser>(SacctOptions{});
  } else {
    return Status::InvalidArgument(
        fmt::format("--format: expected swf or sacct, got {}", Quote(format)));
  }
  RS_ASSIGN_OR_RETURN(auto reader, LineReader::Open(f.trace));
  Loaded out;
  int64_t malformed = 0;
  std::string first_error;
  std::string_view line;
  while (true) {
    auto more = reader->Next(&line);
    if (!more.ok()) {
      if (!reader->last_error_was_overlong_line()) return more.status();
      ++malformed;
      continue;
    }
    if (!*more) break;
    Status s = parser->ParseLine(line, out.records);
    if (!s.ok()) {
      if (malformed++ == 0) {
        first_error = fmt::format("{}:{}: {}", f.trace, reader->line_number(), s.message());
      }
    }
  }
  RS_RETURN_IF_ERROR(parser->Finish(out.records));
  if (out.records.empty()) {
    return Status::BadInput(fmt::format("{}: no job records ({})", f.trace,
                                        first_error.empty() ? "empty" : first_error));
  }
  if (malformed > 0) {
    out.notes.push_back(
        fmt::format("{} malformed lines skipped (first: {})", malformed, first_error));
  }
  if (!f.cluster.empty()) {
    std::erase_if(out.records,
                  [&](const JobRecord& r) { return !r.cluster.empty() && r.cluster != f.cluster; });
  }
  out.metadata = parser->metadata();
  return out;
}

StatusOr<Loaded> ReadStore(Context& ctx, const SimulateFlags& f) {
  RS_ASSIGN_OR_RETURN(Store * store, ctx.OpenedStore());
  RS_ASSIGN_OR_RETURN(std::string cluster, PickCluster(*store, f.cluster));
  Loaded out;
  RS_ASSIGN_OR_RETURN(out.records, LoadJobs(*store, cluster));
  out.store_cpus = ContextFor(*store, cluster).total_cpus;
  return out;
}

nlohmann::ordered_json MetricsJson(const sim::Metrics& m) {
  return {
      {"jobs", m.jobs},       {"mean_wait_s", m.mean_wait_s},         {"p95_wait_s", m.p95_wait_s},
      {"avebsld", m.avebsld}, {"utilisation", m.utilisation},         {"makespan_s", m.makespan_s},
      {"killed", m.killed},   {"lost_proc_hours", m.lost_proc_hours}, {"backfilled", m.backfilled}};
}

int RunSimulate(Context& ctx, const SimulateFlags& f) {
  if (f.trace.empty() == !f.store) {
    return Fail(Status::InvalidArgument("simulate: give a TRACE file or --store (one of them)"));
  }
  auto policy = sim::ParsePolicy(f.policy);
  if (!policy.ok()) return Fail(policy.status());
  if (!(f.risk > 0 && f.risk < 1)) {
    return Fail(Status::InvalidArgument(fmt::format("--risk: expected 0 < R < 1, got {}", f.risk)));
  }
  std::map<std::string, sim::PredictedJob> predictions;
  if (!f.predictions.empty()) {
    auto p = sim::ReadPredictions(f.predictions);
    if (!p.ok()) return Fail(p.status());
    predictions = std::move(*p);
  }
  auto loaded = f.store ? ReadStore(ctx, f) : ReadTrace(f);
  if (!loaded.ok()) return Fail(loaded.status());
  sim::SizeUnit unit = f.nodes ? sim::SizeUnit::kNodes : sim::SizeUnit::kProcessors;
  auto machine =
      sim::ResolveMachineSize({f.processors, unit, loaded->metadata, loaded->store_cpus, f.store});
  if (!machine.ok()) return Fail(machine.status());
  int64_t n = machine->size;
  sim::Workload w = sim::WorkloadFromRecords(loaded->records, unit, n);
  std::vector<std::string> notes = loaded->notes;
  notes.insert(notes.end(), w.notes.begin(), w.notes.end());
  if (w.jobs.empty()) {
    return Fail(
        Status::BadInput(fmt::format("{}: no job can be simulated ({})",
                                     f.store ? "the store" : f.trace, fmt::join(notes, "; "))));
  }
  std::string input = f.store ? "store" : f.trace;
  sim::ScenarioOptions options;
  options.policy = *policy;
  options.machine_procs = n;
  options.risk = f.risk;
  options.validate = f.validate;
  options.predictions = std::move(predictions);
  options.predictions_name = f.predictions;
  options.plan = f.plan;
  options.head_guard = f.head_guard;
  options.corrections = f.corrections;
  options.input_name = input;
  auto what_if = sim::RunScenarios(w, options);
  if (!what_if.ok()) return Fail(what_if.status());
  const std::vector<sim::Scenario>& scenarios = what_if->scenarios;
  nlohmann::ordered_json validation;
  if (what_if->validation) {
    validation = {{"jobs", what_if->validation->jobs},
                  {"same_start", what_if->validation->same_start},
                  {"share", what_if->validation->share}};
  }

  if (f.json) {
    nlohmann::ordered_json doc = {
        {"schema", "rightsize.simulate/v1"},
        {"input", input},
        {"policy", sim::PolicyName(*policy)},
        {"head_guard", f.head_guard},
        {"machine",
         {{"size", n}, {"unit", f.nodes ? "nodes" : "processors"}, {"from", machine->from}}},
        {"records", w.records},
        {"jobs", w.jobs.size()},
        {"notes", notes}};
    if (!validation.is_null()) doc["validation"] = validation;
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const sim::Scenario& s : scenarios) {
      nlohmann::ordered_json j = {{"requests", s.name},
                                  {"plan", s.plan},
                                  {"jobs_with_new_limit", s.new_limits},
                                  {"limits_lowered", s.lowered},
                                  {"jobs_planned", s.planned}};
      j["metrics"] = MetricsJson(s.metrics);
      j["seconds"] = s.seconds;
      list.push_back(std::move(j));
    }
    doc["scenarios"] = std::move(list);
    fmt::print("{}\n", JsonText(doc, 2));
    return kExitOk;
  }
  fmt::print("{}: {} jobs on {} {} ({}), policy {}{}\n", input, w.jobs.size(), n,
             f.nodes ? "nodes" : "processors", machine->from, sim::PolicyName(*policy),
             f.head_guard ? " with the head guard" : "");
  for (const std::string& note : notes) fmt::print("  note: {}\n", note);
  if (!validation.is_null()) {
    fmt::print("validation: {} of {} jobs ({:.2f}%) start when the trace says\n",
               validation["same_start"].get<int64_t>(), validation["jobs"].get<int64_t>(),
               100 * validation["share"].get<double>());
  }
  fmt::print("{:<16} {:<18} {:>9} {:>8} {:>11} {:>11} {:>9} {:>7} {:>11} {:>8} {:>12}\n",
             "requests", "plan", "new limit", "lowered", "mean wait", "p95 wait", "AVEbsld", "util",
             "makespan", "killed", "lost proc·h");
  for (const sim::Scenario& s : scenarios) {
    fmt::print(
        "{:<16} {:<18} {:>9} {:>8} {:>11} {:>11} {:>9.2f} {:>6.1f}% {:>11} {:>8} {:>12.0f}\n",
        s.name, s.plan, s.new_limits, s.lowered, FormatDuration(s.metrics.mean_wait_s),
        FormatDuration(s.metrics.p95_wait_s), s.metrics.avebsld, 100 * s.metrics.utilisation,
        FormatDuration(static_cast<double>(s.metrics.makespan_s)), s.metrics.killed,
        s.metrics.lost_proc_hours);
  }
  return kExitOk;
}

}  // namespace

void AddSimulateCommand(CLI::App& app, Context& ctx, Action* action) {
  auto f = std::make_shared<SimulateFlags>();
  auto* cmd = app.add_subcommand(
      "simulate",
      "Replay a trace through a scheduler simulator (FCFS, EASY, EASY++) with the users' "
      "requests and, given --predictions, with each predictor's suggested requests");
  cmd->add_option("trace", f->trace, "SWF or sacct -P file (.gz too; - for stdin)");
  cmd->add_flag("--store", f->store, "Simulate the store's jobs instead of a file");
  cmd->add_option("--cluster", f->cluster, "The cluster to simulate (default: the only one)");
  cmd->add_option("--format", f->format, "Format of TRACE: swf or sacct (default: from the name)");
  cmd->add_option("--policy", f->policy, "fcfs, easy (default) or easy++");
  cmd->add_option("--processors", f->processors,
                  "Machine size (default: the SWF header's MaxProcs, or MaxNodes with --nodes, "
                  "or the store's total CPUs)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--nodes", f->nodes, "Jobs occupy whole nodes: sizes and machine in nodes");
  cmd->add_option("--predictions", f->predictions,
                  "Per-job predictions written by `rightsize eval --trace TRACE --jobs FILE`: "
                  "adds the what-if runs with rightsize's suggested requests at --risk, last2's "
                  "and user_mean's (a job that outruns its limit is killed and resubmitted with "
                  "its own request)");
  cmd->add_option("--risk", f->risk, "The risk of rightsize's suggested requests (default 0.01)");
  cmd->add_option("--plan", f->plan,
                  "With --policy easy++ and --predictions: also run the users' and rightsize's "
                  "limits with each scored job planned (backfilled) on this quantile of "
                  "rightsize's run time: p2_5, p10, point (its median), p90 or p97_5");
  cmd->add_option("--correct", f->corrections,
                  "With --plan: when a job outlives its planned run, plan with these quantiles "
                  "in turn before its limit (comma-separated, e.g. p90,p97_5; default: straight "
                  "to the limit)")
      ->delimiter(',');
  cmd->add_flag("--head-guard", f->head_guard,
                "With --policy easy++: a head of the queue still waiting at the reservation EASY "
                "would have given it is planned for with limits until it starts (jobs backfilled "
                "on too-short predictions cannot push it back for ever)");
  cmd->add_flag("--validate", f->validate,
                "Also count the jobs that start when the trace says (for traces that are "
                "themselves a simulation's output)");
  cmd->add_flag("--json", f->json, "Print the rightsize.simulate/v1 document");
  cmd->callback([&ctx, action, f] { *action = [&ctx, f] { return RunSimulate(ctx, *f); }; });
}

}  // namespace rightsize::cli
