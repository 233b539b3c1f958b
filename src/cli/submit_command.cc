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

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "cli/app.h"
#include "cli/terminal.h"
#include "core/json_text.h"
#include "core/units.h"
#include "ingest/job_script.h"
#include "predict/predict.h"
#include "slurm/command.h"
#include "slurm/submit_advice.h"

namespace rightsize::cli {

namespace {

struct SubmitFlags {
  std::string cluster, user, account, partition, sbatch = "sbatch";
  double risk = 0.01;
  bool per_job_risk = false;
  bool apply = false, dry_run = false, json = false;
};

std::string PredictionTable(const nlohmann::json& doc) {
  std::string out = fmt::format("  {:<12} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "", "p10", "p50",
                                "p90", "request", "suggested");
  for (const auto& item : doc["targets"].items()) {
    const std::string& name = item.key();
    const nlohmann::json& t = item.value();
    bool bytes = t.value("unit", "") == "bytes";
    bool secs = t.value("unit", "") == "s";
    auto cell = [&](const char* key) -> std::string {
      auto it = t.find(key);
      if (it == t.end() || !it->is_number()) return "-";
      double v = it->get<double>();
      if (bytes) return FormatMemory(static_cast<int64_t>(v));
      if (secs) return FormatDuration(v);
      return fmt::format("{:.1f}", v);
    };
    out += fmt::format("  {:<12} {:>10} {:>10} {:>10} {:>10} {:>10}\n", name, cell("p10"),
                       cell("p50"), cell("p90"), cell("request"), cell("suggested_request"));
  }
  for (const auto& n : doc["notes"]) out += fmt::format("note: {}\n", n.get<std::string>());
  return out;
}

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

  nlohmann::json changes_json = nlohmann::json::array();
  for (const auto& c : changes) {
    changes_json.push_back(
        {{"option", "--" + c.option},
         {"from", c.from.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.from)},
         {"to", c.to},
         {"where", c.where},
         {"line", c.line == 0 ? nlohmann::json(nullptr) : nlohmann::json(c.line)},
         {"why", c.why}});
  }
  if (!f.json) {
    fmt::print("{}: prediction (cluster {})\n{}", script_path, (*doc)["cluster"].get<std::string>(),
               PredictionTable(*doc));
    if (changes.empty()) {
      fmt::print("no changes suggested\n");
    } else {
      fmt::print("suggested changes{}:\n", f.apply ? " (applied)" : "");
      for (const auto& c : changes) {
        fmt::print("  --{}: {} -> {} ({}{}): {}\n", c.option, c.from.empty() ? "(unset)" : c.from,
                   c.to, c.where, c.line > 0 ? fmt::format(" line {}", c.line) : "", c.why);
      }
      if (!diff.empty()) fmt::print("{}", diff);
      if (new_args != sbatch_args) {
        std::string joined;
        for (const auto& a : new_args) joined += " " + a;
        fmt::print("sbatch options:{}\n", joined);
      }
      if (!f.apply) fmt::print("(add --apply to submit with these changes)\n");
    }
  }
  nlohmann::json out = {{"schema", "rightsize.submit/v1"},
                        {"script", script_path},
                        {"prediction", *doc},
                        {"changes", changes_json},
                        {"diff", diff},
                        {"applied", f.apply && !changes.empty()},
                        {"submitted", false},
                        {"job_id", nullptr}};
  int exit_code = kExitOk;
  if (!f.dry_run) {
    std::vector<std::string> argv = {f.sbatch};
    const auto& args = f.apply ? new_args : sbatch_args;
    argv.insert(argv.end(), args.begin(), args.end());
    std::string tmp;
    if (f.apply && advice.script_changed) {
      // sbatch reads the script when it submits, so a private copy can go right after.
      bool named = script->request.job_name.size() > 0;
      if (!named) argv.push_back("--job-name=" + pin.script);
      char path[] = "/tmp/rightsize-submit-XXXXXX";
      int fd = mkstemp(path);
      if (fd < 0) return Fail(Status::IoError(fmt::format("mkstemp: {}", std::strerror(errno))));
      tmp = path;
      const std::string& new_text = advice.script;
      bool ok =
          write(fd, new_text.data(), new_text.size()) == static_cast<ssize_t>(new_text.size());
      close(fd);
      if (!ok) {
        std::filesystem::remove(tmp);
        return Fail(Status::IoError(fmt::format("{}: cannot write", tmp)));
      }
      argv.push_back(tmp);
    } else {
      argv.push_back(script_path);
    }
    argv.insert(argv.end(), script_args.begin(), script_args.end());
    auto run = slurm::RunCommand(argv);
    if (!tmp.empty()) std::filesystem::remove(tmp);
    if (!run.ok()) return Fail(run.status());
    int code = run->exit_status;
    const std::string& sbatch_out = run->out;
    out["sbatch"] = {{"exit_code", code}, {"stdout", sbatch_out}};
    std::smatch m;
    static const std::regex kJobId(R"((\d+))");
    if (code == 0 && std::regex_search(sbatch_out, m, kJobId)) {
      out["submitted"] = true;
      out["job_id"] = m[1].str();
      StoredPrediction p{(*doc)["cluster"].get<std::string>(), m[1].str(), pin.now, JsonText(*doc)};
      Status st = (*store)->PutPrediction(p);
      if (!st.ok()) fmt::print(stderr, "rightsize: prediction not stored: {}\n", st.message());
    } else {
      exit_code = kExitBadInput;
      if (!f.json) fmt::print(stderr, "rightsize: {} exited with status {}\n", f.sbatch, code);
    }
    if (!f.json) fmt::print("{}", sbatch_out);
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
