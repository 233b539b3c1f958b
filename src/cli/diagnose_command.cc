// `rightsize diagnose JOBID | --log FILE…`: why a job failed and what to change.
#include <fmt/format.h>

#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/app.h"
#include "cli/terminal.h"
#include "core/json_text.h"
#include "diagnose/diagnosis.h"
#include "diagnose/stored_telemetry.h"
#include "slurm/follower.h"

namespace rightsize::cli {

namespace {

// The files a stored diagnosis read (its document's logs[].file).
std::vector<std::string> StoredDiagnosisLogs(const StoredDiagnosis& d) {
  std::vector<std::string> files;
  auto doc = nlohmann::json::parse(d.document, nullptr, false);
  if (!doc.is_object() || !doc.contains("logs") || !doc["logs"].is_array()) return files;
  for (const auto& log : doc["logs"]) {
    if (log.is_object() && log.contains("file") && log["file"].is_string()) {
      files.push_back(log["file"].get<std::string>());
    }
  }
  return files;
}

// A stored diagnosis as text: what, why and the fixes of its document.
std::string StoredDiagnosisText(const StoredDiagnosis& d) {
  auto doc = nlohmann::json::parse(d.document, nullptr, false);
  auto text = [&doc](const char* key) {
    return doc.is_object() && doc.contains(key) && doc[key].is_string()
               ? doc[key].get<std::string>()
               : std::string();
  };
  std::string out = fmt::format("job {} ({}): stored diagnosis\n", d.job_id, d.cluster);
  out += fmt::format("what:  {} (confidence {:.2f})\n       {}\n", d.cls, d.confidence,
                     text("summary"));
  if (std::string why = text("why"); !why.empty()) out += fmt::format("why:   {}\n", why);
  if (doc.is_object() && doc.contains("fixes") && doc["fixes"].is_array() &&
      !doc["fixes"].empty()) {
    out += "fix:\n";
    int n = 0;
    for (const auto& fix : doc["fixes"]) {
      if (fix.is_object() && fix.contains("text") && fix["text"].is_string()) {
        out += fmt::format("  {}. {}\n", ++n, fix["text"].get<std::string>());
      }
    }
  }
  return out;
}

}  // namespace

void AddDiagnoseCommand(CLI::App& app, Context& ctx, Action* action) {
  auto* cmd = app.add_subcommand(
      "diagnose",
      "Why a job failed and how to fix it, from its logs, its job record, its script and code");
  struct Flags {
    std::string job_id, cluster, script, code, state;
    std::string sacct = "sacct", scontrol = "scontrol", log_dir;
    std::vector<std::string> logs;
    std::optional<int> exit_code, signal;
    bool json = false, no_save = false, no_learned = false;
  };
  auto f = std::make_shared<Flags>();
  cmd->add_option("jobid", f->job_id,
                  "A job in the store (its state, exit code, limits and peaks are evidence)");
  cmd->add_option("--log", f->logs,
                  "A log of the job: slurm-N.out, stderr, dmesg, kubectl logs (repeatable; "
                  "- reads standard input; .gz read as is)");
  cmd->add_option("--script", f->script,
                  "The job script: fixes name its #SBATCH lines (--mem, --time) and its "
                  "command-line arguments");
  cmd->add_option("--code", f->code,
                  "The job's source folder or file: fixes name the lines that set the batch "
                  "size, data-loader workers, precision and learning rate");
  cmd->add_option("--cluster", f->cluster, "The job's cluster (default: any)");
  cmd->add_option("--state", f->state,
                  "The job's end state when it is not in the store (FAILED, TIMEOUT, "
                  "OUT_OF_MEMORY, NODE_FAIL, PREEMPTED, …)");
  cmd->add_option("--exit-code", f->exit_code, "The job's exit code (137 = killed by SIGKILL)");
  cmd->add_option("--signal", f->signal, "The signal that ended the job (9, 11, …)");
  cmd->add_option("--sacct", f->sacct,
                  "The sacct program that finds a SLURM job's output file when no --log is given "
                  "(its working directory, the job_submit.lua hook's out=)")
      ->capture_default_str();
  cmd->add_option("--scontrol", f->scontrol,
                  "The scontrol program (the job's StdOut while slurmctld still knows it)")
      ->capture_default_str();
  cmd->add_option("--log-dir", f->log_dir,
                  "Where jobs' slurm-N.out files are when nothing else says (as `ingest slurm`)");
  cmd->add_flag("--json", f->json, "Print the diagnosis as JSON (schema rightsize.diagnosis/v1)");
  cmd->add_flag("--no-learned", f->no_learned,
                "Answer with the signatures alone: no learned match when none of them applies");
  cmd->add_flag("--no-save", f->no_save,
                "Do not keep the diagnosis with the job in the store (kept by default when "
                "JOBID is given; `rightsize job JOBID` shows it)");
  cmd->callback([&ctx, action, f] {
    *action = [&ctx, f]() -> int {
      if (f->job_id.empty() && f->logs.empty()) {
        return Fail(Status::InvalidArgument("diagnose: give a JOBID from the store or --log FILE"));
      }
      DiagnoseInput input;
      input.log_paths = f->logs;
      input.script_path = f->script;
      input.code_dir = f->code;
      input.learned_fallback = !f->no_learned;
      if (!f->job_id.empty()) {
        auto store = ctx.OpenedStore();
        if (!store.ok()) return Fail(store.status());
        auto prices = PricesFor("");  // the GPUs' memory by model
        Status st =
            AddStoredJob(**store, f->cluster, f->job_id, prices.ok() ? &*prices : nullptr, &input);
        if (!st.ok()) return Fail(st);
        // Without --log, the job's output file found as the follower finds it, so both read
        // the same evidence (issue 28: the follower's host_oom from slurm-N.out was replaced
        // by an `unknown` made without it).
        if (f->logs.empty() && input.job->source != "kubernetes") {
          slurm::OutputSearch search{f->sacct, f->scontrol, f->log_dir, {}};
          if (auto stored = (*store)->GetDiagnosis(input.job->cluster, input.job->job_id);
              stored.ok()) {
            search.known = StoredDiagnosisLogs(*stored);
          }
          if (std::string log = slurm::FindSlurmJobOutput(input.job->job_id, search);
              !log.empty()) {
            input.log_paths.push_back(std::move(log));
          }
        }
      } else if (!f->state.empty() || f->exit_code || f->signal) {
        input.job = JobRecord{};
      }
      if (input.job) {
        if (!f->state.empty()) input.job->outcome.state = f->state;
        if (f->exit_code) input.job->outcome.exit_code = f->exit_code;
        if (f->signal) input.job->outcome.signal = f->signal;
      }
      auto d = Diagnose(input);
      if (!d.ok()) return Fail(d.status());
      if (!f->job_id.empty() && !f->no_save) {
        auto store = ctx.OpenedStore();
        if (!store.ok()) return Fail(store.status());
        Status st =
            SaveDiagnosis(**store, *input.job, *d, static_cast<int64_t>(std::time(nullptr)));
        if (!st.ok()) return Fail(st);
        // The store keeps a stronger diagnosis than this one (see Store::PutDiagnosis): show
        // that one, and say why.
        auto kept = (*store)->GetDiagnosis(input.job->cluster, input.job->job_id);
        auto kept_doc =
            kept.ok() ? nlohmann::json::parse(kept->document, nullptr, false) : nlohmann::json();
        if (kept.ok() && kept_doc.is_object() &&
            (kept->cls != FailureClassName(d->cls) || kept->confidence > d->confidence)) {
          fmt::print(stderr,
                     "rightsize: the stored diagnosis ({} {:.2f}) is kept: this one ({} {:.2f}) "
                     "is weaker; it is shown instead\n",
                     kept->cls, kept->confidence, FailureClassName(d->cls), d->confidence);
          fmt::print("{}", f->json ? JsonText(kept_doc, 2) + "\n" : StoredDiagnosisText(*kept));
          return kExitOk;
        }
      }
      if (f->json) {
        // Log text is cleaned to UTF-8 already; replace, never throw, if anything slipped by.
        fmt::print("{}\n", JsonText(DiagnosisToJson(*d), 2));
      } else {
        fmt::print("{}", RenderDiagnosisText(*d));
      }
      return kExitOk;
    };
  });
}

}  // namespace rightsize::cli
