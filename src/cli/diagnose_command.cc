// `rightsize diagnose JOBID | --log FILE…`: why a job failed and what to change.
#include <fmt/format.h>

#include <ctime>
#include <optional>

#include "cli/app.h"
#include "cli/terminal.h"
#include "core/json_text.h"
#include "diagnose/diagnosis.h"
#include "diagnose/stored_telemetry.h"

namespace rightsize::cli {

void AddDiagnoseCommand(CLI::App& app, Context& ctx, Action* action) {
  auto* cmd = app.add_subcommand(
      "diagnose",
      "Why a job failed and how to fix it, from its logs, its job record, its script and code");
  struct Flags {
    std::string job_id, cluster, script, code, state;
    std::vector<std::string> logs;
    std::optional<int> exit_code, signal;
    bool json = false, no_save = false;
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
  cmd->add_flag("--json", f->json, "Print the diagnosis as JSON (schema rightsize.diagnosis/v1)");
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
      if (!f->job_id.empty()) {
        auto store = ctx.OpenedStore();
        if (!store.ok()) return Fail(store.status());
        auto prices = PricesFor("");  // the GPUs' memory by model
        Status st =
            AddStoredJob(**store, f->cluster, f->job_id, prices.ok() ? &*prices : nullptr, &input);
        if (!st.ok()) return Fail(st);
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
