// `rightsize job JOBID`: one job's efficiency card.
#include <fmt/format.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "cli/terminal.h"
#include "core/json_text.h"
#include "core/units.h"
#include "report/job_card.h"
#include "report/prices.h"
#include "report/live.h"

namespace rightsize::cli {


void AddJobCommand(CLI::App& app, Context& ctx, Action* action) {
  auto* cmd = app.add_subcommand(
      "job",
      "One job's efficiency (CPU, memory, GPU, time) with advice for its next request; for a "
      "running job, its use so far from the agents' samples");
  struct Flags {
    std::string job_id, cluster, prices;
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  cmd->add_option("jobid", f->job_id, "The job id (123, 123_4 for an array task)")->required();
  cmd->add_option("--cluster", f->cluster, "The job's cluster (default: any)");
  cmd->add_option("--prices", f->prices, "Price table (default: the built-in one)");
  cmd->add_flag("--json", f->json, "Print the job card as JSON (schema rightsize.job/v1)");
  cmd->callback([&ctx, action, f] {
    *action = [&ctx, f]() -> int {
      auto prices = PricesFor(f->prices);
      if (!prices.ok()) return Fail(prices.status());
      auto store = ctx.OpenedStore();
      if (!store.ok()) return Fail(store.status());
      auto stored = (*store)->GetJob(f->cluster, f->job_id);
      if (!stored.ok()) return Fail(stored.status());
      // A running job: its efficiency so far, from the samples the agents shipped.
      LiveUsage live;
      auto job = WithUsageSoFar(**store, *stored, static_cast<int64_t>(std::time(nullptr)), &live);
      if (!job.ok()) return Fail(job.status());
      // The diagnosis `rightsize diagnose` kept with the job, when there is one.
      auto diagnosis = (*store)->GetDiagnosis(job->cluster, job->job_id);
      if (!diagnosis.ok() && diagnosis.status().code() != Status::Code::kNotFound) {
        return Fail(diagnosis.status());
      }
      nlohmann::json diag = nullptr;
      if (diagnosis.ok()) {
        diag = nlohmann::json::parse(diagnosis->document, nullptr, /*allow_exceptions=*/false);
        if (diag.is_discarded()) diag = nullptr;
      }
      if (f->json) {
        nlohmann::json card = RenderJobCardJson(*job, *prices);
        card["diagnosis"] = diag;
        card["live"] = nullptr;
        if (!job->end_time) {
          card["live"] = {
              {"as_of", live.as_of_s > 0 ? nlohmann::json(live.as_of_s) : nlohmann::json()},
              {"cores_last_minute",
               live.cores_now ? nlohmann::json(*live.cores_now) : nlohmann::json()},
              {"memory_bytes_now",
               live.memory_bytes_now ? nlohmann::json(*live.memory_bytes_now) : nlohmann::json()}};
        }
        fmt::print("{}\n", JsonText(card, 2));
      } else {
        fmt::print("{}", RenderJobCardText(*job, *prices));
        if (!job->end_time && live.as_of_s > 0) {
          fmt::print("\nnow (last sample {}): {:.2f} cores over the last minute, {} resident\n",
                     FormatTimestamp(live.as_of_s), live.cores_now.value_or(0),
                     FormatMemory(live.memory_bytes_now.value_or(0)));
        } else if (!job->end_time) {
          fmt::print("\nno samples of this running job yet (is `rightsize agent` on its node?)\n");
        }
        if (diag.is_object()) {
          fmt::print("\ndiagnosis: {} (confidence {:.2f}) {}\n", diag.value("class", "?"),
                     diag.value("confidence", 0.0), diag.value("summary", ""));
          fmt::print("           `rightsize diagnose {}` for the evidence and the fixes\n",
                     job->job_id);
        }
      }
      return kExitOk;
    };
  });
}

}  // namespace rightsize::cli
