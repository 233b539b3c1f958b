// `rightsize job JOBID`: one job's efficiency card.
#include <fmt/format.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "cli/terminal.h"
#include "core/json_text.h"
#include "core/units.h"
#include "report/job_card.h"
#include "report/live.h"
#include "report/prices.h"

namespace rightsize::cli {

void AddJobCommand(CLI::App& app, Context& ctx, Action* action) {
  auto* cmd = app.add_subcommand(
      "job",
      "One job's efficiency (CPU, memory, GPU, time) with advice for its next request; for a "
      "running job, its use so far from the agents' samples; for a job whose use changed along "
      "the way, its phases and what splitting it into steps would free");
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
      auto view = ViewJob(**store, f->cluster, f->job_id, static_cast<int64_t>(std::time(nullptr)));
      if (!view.ok()) return Fail(view.status());
      if (f->json) {
        fmt::print("{}\n", JsonText(JobViewJson(*view, *prices), 2));
      } else {
        fmt::print("{}", JobViewText(*view, *prices));
      }
      return kExitOk;
    };
  });
}

}  // namespace rightsize::cli
