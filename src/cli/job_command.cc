// `rightsize job JOBID`: one job's efficiency card.
#include <fmt/format.h>

#include "cli/app.h"
#include "cli/terminal.h"
#include "report/job_card.h"

namespace rightsize::cli {

StatusOr<PriceTable> PricesFor(const std::string& path);

void AddJobCommand(CLI::App& app, Context& ctx, Action* action) {
  auto* cmd = app.add_subcommand(
      "job", "One job's efficiency (CPU, memory, GPU, time) with advice for its next request");
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
      auto job = (*store)->GetJob(f->cluster, f->job_id);
      if (!job.ok()) return Fail(job.status());
      if (f->json) {
        fmt::print("{}\n", RenderJobCardJson(*job, *prices).dump(2));
      } else {
        fmt::print("{}", RenderJobCardText(*job, *prices));
      }
      return kExitOk;
    };
  });
}

}  // namespace rightsize::cli
