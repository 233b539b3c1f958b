// `rightsize submit [OPTIONS] SCRIPT [SBATCH_OPTIONS…] [-- SCRIPT_ARGS…]`: predict, show the
// suggested #SBATCH changes as a unified diff of the script, and submit with sbatch (with the
// changes when --apply).
//
// The changes are slurm::AdviseSubmit's (slurm/submit_advice.h), made where each value is set.
// With --apply the rewritten script goes to sbatch as a temporary copy (named -J after the
// script, as sbatch would); the original is never written. When sbatch gives a job id, the
// prediction is stored with the job in the store.
#include <fmt/format.h>
#include <pwd.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "cli/terminal.h"
#include "core/json_text.h"
#include "core/units.h"
#include "jobscript/job_script.h"
#include "predict/code_estimate.h"
#include "predict/predict.h"
#include "slurm/sbatch.h"
#include "slurm/submit_advice.h"

namespace rightsize::cli {

namespace {

struct SubmitFlags {
  std::string cluster, user, account, partition, sbatch = "sbatch";
  double risk = 0.01;
  bool per_job_risk = false;
  bool apply = false, dry_run = false, json = false;
};

int RunSubmit(Context& ctx, const SubmitFlags& f, std::vector<std::string> rest) {
  // rest: SCRIPT [SBATCH_OPTIONS…] [-- SCRIPT_ARGS…]
  if (rest.empty()) return Fail(Status::InvalidArgument("submit: give the job SCRIPT"));
  std::string script_path = rest.front();
  std::vector<std::string> sbatch_args, script_args;
  bool after_dashes = false;
  for (size_t i = 1; i < rest.size(); ++i) {
    if (!after_dashes && rest[i] == "--") {
      after_dashes = true;
      continue;
    }
    (after_dashes ? script_args : sbatch_args).push_back(rest[i]);
  }
  std::ifstream in(script_path, std::ios::binary);
  if (!in) return Fail(Status::NotFound(fmt::format("{}: cannot read the script", script_path)));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto script = ParseJobScript(text, sbatch_args);
  if (!script.ok()) return Fail(script.status().WithContext(script_path));

  auto store = ctx.OpenedStore();
  if (!store.ok()) return Fail(store.status());
  PredictRequest pin;
  pin.script_text = text;
  pin.script = std::filesystem::path(script_path).filename().string();
  pin.code = DefaultCodeDir(script_path);  // the code beside the script, stored with the job
  // sbatch passes this shell's environment to the job (--export=ALL): its Python is found here.
  pin.environment = code::JobEnvironment::OfThisProcess();
  pin.sbatch_args = sbatch_args;
  pin.cluster = f.cluster;
  pin.user = f.user;
  if (pin.user.empty()) {  // sbatch submits as this user, whatever $USER says
    if (const passwd* pw = getpwuid(geteuid()); pw != nullptr) pin.user = pw->pw_name;
  }
  pin.account = f.account;
  pin.partition = f.partition;
  pin.risk = f.risk;
  pin.per_job_risk = f.per_job_risk;
  pin.now = static_cast<int64_t>(std::time(nullptr));
  auto predicted = PredictJob(**store, pin);
  if (!predicted.ok()) return Fail(predicted.status().WithContext(script_path));
  const nlohmann::json* doc = &predicted->doc;

  slurm::SubmitAdvice advice = slurm::AdviseSubmit(*doc, *script, sbatch_args, text, script_path);
  const std::vector<slurm::Change>& changes = advice.changes;
  const std::vector<std::string>& new_args = advice.args;
  const std::string& diff = advice.diff;

  if (!f.json) {
    fmt::print("{}: prediction (cluster {})\n{}", script_path, (*doc)["cluster"].get<std::string>(),
               PredictionTable(*doc));
    fmt::print("{}", slurm::SubmitAdviceText(advice, sbatch_args, f.apply, doc));
  }
  nlohmann::json out = {{"schema", "rightsize.submit/v1"},
                        {"script", script_path},
                        {"prediction", *doc},
                        {"changes", slurm::ChangesJson(changes)},
                        {"diff", diff},
                        {"applied", f.apply && !changes.empty()},
                        {"submitted", false},
                        {"job_id", nullptr}};
  int exit_code = kExitOk;
  if (!f.dry_run) {
    slurm::SbatchRequest sb;
    sb.sbatch = f.sbatch;
    sb.args = f.apply ? new_args : sbatch_args;
    sb.script_path = script_path;
    if (f.apply && advice.script_changed) {
      sb.rewritten = advice.script;
      if (script->request.job_name.empty()) sb.job_name = pin.script;
    }
    sb.script_args = script_args;
    auto run = slurm::RunSbatch(sb);
    if (!run.ok()) return Fail(run.status());
    out["sbatch"] = {{"exit_code", run->exit_code}, {"stdout", run->out}};
    if (run->job_id) {
      out["submitted"] = true;
      out["job_id"] = *run->job_id;
      StoredPrediction p{(*doc)["cluster"].get<std::string>(), *run->job_id, pin.now,
                         JsonText(*doc)};
      Status st = (*store)->PutPrediction(p);
      if (!st.ok()) fmt::print(stderr, "rightsize: prediction not stored: {}\n", st.message());
      if (predicted->code) {
        StoredJobCode code = *predicted->code;
        code.job_id = *run->job_id;
        code.created_at = pin.now;
        st = (*store)->PutJobCode(code);
        if (!st.ok()) fmt::print(stderr, "rightsize: code facts not stored: {}\n", st.message());
      }
    } else {
      exit_code = kExitBadInput;
      if (!f.json) {
        fmt::print(stderr, "rightsize: {} exited with status {}\n", f.sbatch, run->exit_code);
      }
    }
    if (!f.json) fmt::print("{}", run->out);
  }
  if (f.json) fmt::print("{}\n", JsonText(out, 2));
  return exit_code;
}

}  // namespace

void AddSubmitCommand(CLI::App& app, Context& ctx, Action* action) {
  auto* cmd = app.add_subcommand(
      "submit",
      "Predict a job script's use, show the suggested #SBATCH changes as a diff, and submit it "
      "with sbatch (with the changes when --apply). Usage: rightsize submit [OPTIONS] SCRIPT "
      "[SBATCH_OPTIONS…] [-- SCRIPT_ARGS…]");
  auto f = std::make_shared<SubmitFlags>();
  cmd->add_flag("--apply", f->apply, "Submit with the suggested changes");
  cmd->add_flag("--dry-run", f->dry_run, "Print the prediction and the changes; do not submit");
  cmd->add_flag("--json", f->json, "Print the rightsize.submit/v1 document");
  cmd->add_option("--cluster", f->cluster, "The cluster (default: the store's only one)");
  cmd->add_option("--user", f->user, "Whose job it is (default: the script's, else $USER)");
  cmd->add_option("--account", f->account, "Account, for the prediction");
  cmd->add_option("--partition", f->partition, "Partition, for the prediction");
  cmd->add_option("--risk", f->risk,
                  "Accepted share of jobs whose suggested request is too small, spent where "
                  "a cut frees the most (default 0.01, as in predict)")
      ->check(CLI::Range(0.0001, 0.5));
  cmd->add_flag("--per-job-risk", f->per_job_risk,
                "Bound this job's own chance to outgrow a suggested request by --risk instead");
  cmd->add_option("--sbatch", f->sbatch, "The sbatch program")->capture_default_str();
  // Everything from SCRIPT on is ours to split (sbatch's options are not rightsize's).
  cmd->prefix_command();
  cmd->callback([&ctx, action, f, cmd] {
    std::vector<std::string> rest = cmd->remaining();
    *action = [&ctx, f, rest]() -> int { return RunSubmit(ctx, *f, rest); };
  });
}

}  // namespace rightsize::cli
