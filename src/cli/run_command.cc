// `rightsize run [--] CMD…`: runs one command as a job and watches it like the agent does.
#include <fmt/format.h>

#include <cstdlib>
#include <optional>

#include "agent/job_runner.h"
#include "cli/app.h"
#include "cli/terminal.h"
#include "core/json_text.h"
#include "core/units.h"
#include "diagnose/diagnosis.h"
#include "jobscript/job_script.h"
#include "phases/phases.h"
#include "predict/code_estimate.h"

namespace rightsize::cli {
namespace {

struct RunFlags {
  double interval_s = 1;
  std::string stacks, log, gpu_library = "libnvidia-ml.so.1", dcgm_library, name, mem, script;
  std::string powercap = "/sys/class/powercap";
  bool json = false, series = false, save = false, no_cgroup = false;
};

// The runner's options from the flags; InvalidArgument for a --mem that is not a size.
StatusOr<JobRunOptions> RunOptions(const RunFlags& f, const std::vector<std::string>& argv) {
  JobRunOptions o;
  o.argv = argv;
  o.name = f.name;
  if (const char* user = std::getenv("USER")) o.user = user;
  o.interval_s = f.interval_s;
  o.use_cgroup = !f.no_cgroup;
  if (!f.mem.empty()) {
    auto mem = ParseSlurmMemory(f.mem, int64_t{1} << 20);
    if (!mem.ok() || !mem->has_value()) {
      return Status::InvalidArgument("--mem: expected a size like 4G, got '" + f.mem + "'");
    }
    o.memory_limit_bytes = (*mem)->bytes;
  }
  o.stacks_path = f.stacks;
  o.log_path = f.log;
  o.gpu_library = f.gpu_library;
  o.dcgm_library = f.dcgm_library;
  o.powercap_root = f.powercap;
  o.summary_series = f.series;
  return o;
}

// The code the job runs, read as at submission: the --script's (code in its folder), else the
// command's own, read as a one-line job script run from here. nullopt when it runs no Python
// program the analysis finds (a note on stderr for a --script).
std::optional<StoredJobCode> RunCode(const RunFlags& f, const std::vector<std::string>& argv) {
  StatusOr<StoredJobCode> code = Status::NotFound("no code");
  if (!f.script.empty()) {
    auto script = ParseJobScriptFile(f.script);
    code = script.ok() ? ReadJobCode(*script, f.script, "", code::JobEnvironment::OfThisProcess())
                       : script.status();
    if (!code.ok()) {
      fmt::print(stderr, "rightsize run: no code facts from {}: {}\n", f.script,
                 code.status().message());
    }
  } else {
    std::string line;
    for (const auto& a : argv) {
      line += (line.empty() ? "" : " ") +
              (a.find_first_of(" \t'\"$\\") == std::string::npos ? a : Quote(a));
    }
    auto script = ParseJobScript("#!/bin/bash\n" + line + "\n");
    if (script.ok()) {
      code = ReadJobCode(*script, "command", ".", code::JobEnvironment::OfThisProcess());
    }
  }
  if (!code.ok()) return std::nullopt;
  return std::move(*code);
}

nlohmann::json CodeJson(const StoredJobCode& c) {
  nlohmann::json facts = nlohmann::json::parse(c.facts, nullptr, false);
  nlohmann::json estimate = c.estimate.empty() ? nlohmann::json(nullptr)
                                               : nlohmann::json::parse(c.estimate, nullptr, false);
  return {{"program", c.program},
          {"code_hash", c.code_hash},
          {"facts", facts.is_discarded() ? nlohmann::json(nullptr) : facts},
          {"estimate", estimate.is_discarded() ? nlohmann::json(nullptr) : estimate}};
}

// The run's phases and the split that frees their idle reservation (src/phases), from the
// series of a --series document; against the job's --mem when given.
nlohmann::json RunPhasesJson(const nlohmann::json& doc, std::optional<int64_t> mem_bytes) {
  JobSeries series;
  for (const auto& [name, m] : doc["summary"]["metrics"].items()) {
    if (!m.contains("points")) continue;
    for (const auto& p : m["points"]) {
      series[name].push_back(SeriesPoint{p[0].get<int64_t>(), p[1].get<double>()});
    }
  }
  std::vector<Phase> phases = DetectPhases(series);
  Reservation reserved;
  if (mem_bytes) reserved.memory_bytes = static_cast<double>(*mem_bytes);
  return PhasesJson(phases, SuggestSplit(phases, reserved));
}

// Why a job that did not complete failed, from its output and what the runner saw.

int Run(Context& ctx, const RunFlags& f, const std::vector<std::string>& argv) {
  if (argv.empty()) return Fail(Status::InvalidArgument("run: give the command to run"));
  auto options = RunOptions(f, argv);
  if (!options.ok()) return Fail(options.status());
  // Read before the run, as a submission would be: the code is what it was when it started.
  std::optional<StoredJobCode> code = RunCode(f, argv);
  auto run = RunJob(*options);
  if (!run.ok()) return Fail(run.status());
  if (!f.stacks.empty() && !run->stacks_sampled) {
    fmt::print(stderr, "rightsize run: no stacks: {}\n", run->stacks_note);
  } else if (!f.stacks.empty() && !run->stacks_note.empty()) {
    fmt::print(stderr, "rightsize run: stacks: {}\n", run->stacks_note);
  }
  std::optional<Diagnosis> diagnosis = DiagnoseRun(*run);
  run->temp_log = TempFile();  // removed now that the diagnosis has read it
  const JobRecord& job = run->job;
  if (f.save) {
    auto store = ctx.OpenedStore();
    if (!store.ok()) return Fail(store.status());
    Status st = (*store)->UpsertJobs({&job, 1});
    if (st.ok() && code) {
      code->cluster = job.cluster;
      code->job_id = job.job_id;
      code->created_at = job.submit_time.value_or(0);
      st = (*store)->PutJobCode(*code);
    }
    if (!st.ok()) return Fail(st);
  }
  if (f.json) {
    auto doc = JobRunJson(*run, argv, diagnosis);
    if (code) doc["code"] = CodeJson(*code);
    if (f.series) doc["phases"] = RunPhasesJson(doc, options->memory_limit_bytes);
    fmt::print("{}\n", JsonText(doc, 2));
  } else {
    fmt::print(
        stderr, "rightsize run: {} in {}, peak memory {}, {:.2f} CPU cores{}\n", job.outcome.state,
        FormatDuration(run->elapsed_s), FormatMemory(job.usage.peak_rss_bytes.value_or(0)),
        run->mean_cpu_cores,
        job.usage.peak_gpu_memory_bytes
            ? fmt::format(", peak GPU memory {}", FormatMemory(*job.usage.peak_gpu_memory_bytes))
            : "");
    fmt::print(stderr, "rightsize run: energy: GPU {}, CPU {}\n",
               job.usage.gpu_energy_j ? fmt::format("{:.0f} J", *job.usage.gpu_energy_j)
                                      : std::string("unknown"),
               job.usage.cpu_energy_j ? fmt::format("{:.0f} J", *job.usage.cpu_energy_j)
                                      : fmt::format("unknown ({})", run->rapl_status));
    if (diagnosis) fmt::print(stderr, "{}", RenderDiagnosisText(*diagnosis));
  }
  // Exit as the command did, so scripts see its status.
  return job.outcome.exit_code.value_or(1);
}

}  // namespace

void AddRunCommand(CLI::App& app, Context& ctx, Action* action) {
  auto* cmd = app.add_subcommand(
      "run",
      "Run a command as a job and watch it like the agent does: peak memory, CPU cores, GPU "
      "memory and utilisation, I/O, stacks; diagnose it if it fails");
  auto f = std::make_shared<RunFlags>();
  cmd->add_option("--interval", f->interval_s, "Seconds between samples (default 1)")
      ->check(CLI::Range(0.05, 3600.0));
  cmd->add_flag("--json", f->json,
                "Print the job record, the usage summary, the code's facts (\"code\", when it "
                "runs a Python program) and, if it failed, the diagnosis as JSON (schema "
                "rightsize.run/v1) instead of the human summary");
  cmd->add_flag("--series", f->series,
                "With --json: include every metric's time series, and the run's phases with the "
                "split that would free their idle reservation (docs/phases.md)");
  cmd->add_option("--stacks", f->stacks,
                  "Sample the command's call stacks (perf, 49 Hz) and write them folded "
                  "(\"a;b;c count\") to FILE");
  cmd->add_option("--log", f->log,
                  "Also write the command's output (stdout and stderr) to FILE; it is what a "
                  "failure is diagnosed from");
  cmd->add_option("--name", f->name, "The job's name (default: the program's name)");
  cmd->add_option("--script", f->script,
                  "The job script the command runs for: its code (in the script's folder) is "
                  "read instead of the command's own, for --json's \"code\" and --save");
  cmd->add_flag("--save", f->save,
                "Store the job record (and its code's facts) in the store, for `train`, "
                "`predict` and `report`");
  cmd->add_option("--mem", f->mem,
                  "Limit the command's memory like a scheduler would (e.g. 4G); over it, the "
                  "kernel's OOM killer stops it. Needs a memory cgroup");
  cmd->add_flag("--no-cgroup", f->no_cgroup,
                "Do not put the command in a memory cgroup of its own");
  cmd->add_option("--nvml", f->gpu_library, "The NVML library to load (default libnvidia-ml.so.1)");
  cmd->add_option("--dcgm", f->dcgm_library,
                  "The DCGM library to load for SM, tensor and DRAM activity (default "
                  "libdcgm.so.4, then libdcgm.so.3, then libdcgm.so)");
  cmd->add_option("--powercap", f->powercap,
                  "Where RAPL's powercap zones are, for the job's CPU energy (default "
                  "/sys/class/powercap)");
  // Everything from the first word that is not one of ours is the command, in order.
  cmd->prefix_command();
  cmd->allow_extras();
  cmd->footer("Everything after the first non-option word (or after --) is the command.");
  cmd->callback([&ctx, action, f, cmd] {
    std::vector<std::string> argv = ctx.run_command.empty() ? cmd->remaining() : ctx.run_command;
    *action = [&ctx, f, argv]() -> int { return Run(ctx, *f, argv); };
  });
}

}  // namespace rightsize::cli
