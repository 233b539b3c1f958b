// `rightsize advise`: reads a job script and the Python code it runs, estimates the GPU memory
// the code needs and says, line by line, what to change.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/app.h"
#include "cli/terminal.h"
#include "code/advice.h"
#include "code/analysis.h"
#include "code/memory_model.h"
#include "code/report.h"
#include "core/json_text.h"
#include "jobscript/job_script.h"
#include "predict/code_estimate.h"

namespace rightsize::cli {

namespace {

struct AdviseFlags {
  std::string script, code, gpu, python;
  std::vector<std::string> sbatch_args;
  bool json = false;
};

int RunAdvise(const AdviseFlags& f) {
  auto script = ParseJobScriptFile(f.script, f.sbatch_args);
  if (!script.ok()) return Fail(script.status());
  code::JobEnvironment env = code::JobEnvironment::OfThisProcess();
  env.python = f.python;
  auto a = AdviseJobCode(*script, f.script, f.code, f.gpu, env);
  if (!a.ok()) return Fail(a.status());
  const std::string& code_dir = a->code_dir;
  const code::GpuSpec* gpu = &a->gpu;
  const std::string& gpu_from = a->gpu_from;
  const code::CodeFacts* facts = &a->facts;
  const auto& estimate = a->estimate;
  const std::vector<code::Advice>& advice = a->advice;

  if (f.json) {
    fmt::print("{}\n", JsonText(AdviseJson(*a, f.script), 2));
    return kExitOk;
  }
  fmt::print("{}: {} {} ({}), code in {}\n", f.script,
             facts->launcher.empty() ? "runs" : facts->launcher, facts->entry,
             facts->command.ToString(), code_dir);
  fmt::print("read {} file{}: {}\n", facts->files.size(), facts->files.size() == 1 ? "" : "s",
             fmt::join(facts->files, ", "));
  fmt::print("facts:\n{}", code::FactsText(*facts));
  if (estimate.ok()) {
    fmt::print("GPU memory per GPU, on {} ({}, {}):\n{}", gpu->name,
               code::FormatGb(gpu->memory_bytes), gpu_from, code::EstimateText(*estimate));
  } else {
    fmt::print("GPU memory: undetermined: {}\n", estimate.status().message());
  }
  if (!advice.empty()) {
    fmt::print("advice:\n");
    for (const auto& item : advice) fmt::print("  {}\n", item.message);
  }
  return kExitOk;
}

}  // namespace

void AddAdviseCommand(CLI::App& app, Context& /*ctx*/, Action* action) {
  auto* cmd = app.add_subcommand("advise",
                                 "Read a job script's Python code (or a torchtune job's config): "
                                 "GPU memory it needs (p10/p50/p90, with the lines that "
                                 "drive it) and line-level advice");
  auto f = std::make_shared<AdviseFlags>();
  cmd->add_option("script", f->script, "The batch script")->required();
  cmd->add_option("sbatch_args", f->sbatch_args,
                  "sbatch options after --, which override the script's #SBATCH lines");
  cmd->add_option("--code", f->code, "Folder of the job's code (default: the script's folder)")
      ->type_name("DIR");
  cmd->add_option("--python", f->python,
                  "The Python the job runs, whose torch decides what its attention keeps "
                  "(default: the one the script names, found on PATH or in the virtualenv it "
                  "activates, as sbatch passes this shell's environment to the job; none: read "
                  "no environment)")
      ->type_name("PATH");
  cmd->add_option("--gpu", f->gpu,
                  "GPU to fit on: H100-80GB, A100-40GB, A100-80GB, H200-141GB, V100-16GB, "
                  "V100-32GB, L40S-48GB, A10-24GB, T4-16GB, RTX-4090-24GB, … (default: the "
                  "script's --gres type, else H100-80GB)");
  cmd->add_flag("--json", f->json, "Print the rightsize.advise/v1 document");
  cmd->callback([action, f] { *action = [f]() -> int { return RunAdvise(*f); }; });
}

}  // namespace rightsize::cli
