// `rightsize diagnose JOBID | --log FILE…`: why a job failed and what to change.
#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <limits>
#include <optional>

#include "cli/app.h"
#include "cli/terminal.h"
#include "core/json_text.h"
#include "diagnose/diagnosis.h"
#include "report/prices.h"

namespace rightsize::cli {


StatusOr<std::optional<Telemetry>> StoredTelemetry(Store& store, const JobRecord& job) {
  Telemetry t;
  bool any = false;
  int64_t start_ms = job.start_time.value_or(0) * 1000;
  int64_t newest_ms = -1;
  // The memory series of the last ten minutes: enough for the trend before an OOM kill.
  int64_t end_ms = job.end_time ? *job.end_time * 1000 : std::numeric_limits<int64_t>::max();
  int64_t from_ms = job.end_time ? std::max(start_ms, end_ms - 600000) : start_ms;
  RS_RETURN_IF_ERROR(store.ReadSamples(
      job.cluster, job.job_id, "memory_bytes", from_ms, std::numeric_limits<int64_t>::max(),
      [&](const Sample& s) {
        t.memory.emplace_back(static_cast<double>(s.t_ms - start_ms) / 1000, s.value);
        newest_ms = std::max(newest_ms, s.t_ms);
      }));
  any |= !t.memory.empty();
  double gpu_peak = -1;
  RS_RETURN_IF_ERROR(store.ReadSamples(job.cluster, job.job_id, "gpu_memory_bytes", start_ms,
                                       std::numeric_limits<int64_t>::max(), [&](const Sample& s) {
                                         gpu_peak = std::max(gpu_peak, s.value);
                                         newest_ms = std::max(newest_ms, s.t_ms);
                                       }));
  if (gpu_peak >= 0) {
    t.gpu_memory_peak_bytes = static_cast<int64_t>(gpu_peak);
    any = true;
    // The job's GPU memory is summed over its GPUs: its capacity is theirs, by model.
    auto prices = PricesFor("");
    double bytes =
        prices.ok() ? prices->GpuMemoryBytes(job.GpuType(), job.AllocatedGpus().value_or(0)) : 0;
    if (bytes > 0) t.gpu_memory_total_bytes = static_cast<int64_t>(bytes);
  }
  if (job.end_time && newest_ms >= 0) {
    t.silent_before_end_s = std::max(0.0, static_cast<double>(end_ms - newest_ms) / 1000);
  }
  RS_ASSIGN_OR_RETURN(auto stacks, store.GetStacks(job.cluster, job.job_id));
  for (const auto& [stack, n] : stacks) t.hottest_stacks.emplace_back(stack, n);
  std::sort(t.hottest_stacks.begin(), t.hottest_stacks.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  if (t.hottest_stacks.size() > 5) t.hottest_stacks.resize(5);
  any |= !t.hottest_stacks.empty();
  if (!any) return std::optional<Telemetry>();
  return std::optional<Telemetry>(std::move(t));
}

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
        auto job = (*store)->GetJob(f->cluster, f->job_id);
        if (!job.ok()) return Fail(job.status());
        input.job = std::move(*job);
        auto tel = StoredTelemetry(**store, *input.job);
        if (!tel.ok()) return Fail(tel.status());
        input.telemetry = std::move(*tel);
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
      nlohmann::json doc = DiagnosisToJson(*d);
      if (!f->job_id.empty() && !f->no_save) {
        auto store = ctx.OpenedStore();
        if (!store.ok()) return Fail(store.status());
        StoredDiagnosis stored{input.job->cluster,
                               input.job->job_id,
                               static_cast<int64_t>(std::time(nullptr)),
                               std::string(FailureClassName(d->cls)),
                               d->confidence,
                               JsonText(doc)};
        Status st = (*store)->PutDiagnosis(stored);
        if (!st.ok()) return Fail(st);
      }
      if (f->json) {
        // Log text is cleaned to UTF-8 already; replace, never throw, if anything slipped by.
        fmt::print("{}\n", JsonText(doc, 2));
      } else {
        fmt::print("{}", RenderDiagnosisText(*d));
      }
      return kExitOk;
    };
  });
}

}  // namespace rightsize::cli
