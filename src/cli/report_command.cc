// `rightsize report`: the measurement-window waste report.
#include <fmt/format.h>

#include <chrono>
#include <fstream>

#include "cli/app.h"
#include "cli/terminal.h"
#include "core/json_text.h"
#include "report/render.h"
#include "report/showback.h"
#include "report/waste.h"

namespace rightsize::cli {

void AddReportCommand(CLI::App& app, Context& ctx, Action* action) {
  auto* cmd = app.add_subcommand(
      "report",
      "How much of what jobs reserved they used, what the rest cost, and what right-sizing "
      "would recover (jobs that ended in the window)");
  struct Flags {
    std::string since, until, cluster, by, format = "text", prices, output, showback;
    bool json = false, all_clusters = false;
    int top = 10;
  };
  auto f = std::make_shared<Flags>();
  cmd->add_option("--since", f->since,
                  "Jobs that ended at or after: 14d (ago), 12h, or 2024-01-31 (default: all)");
  cmd->add_option("--until", f->until, "Jobs that ended before (default: no limit)");
  auto* cluster_opt = cmd->add_option(
      "--cluster", f->cluster,
      "Only this cluster (default: when the store holds several, the one with the most jobs "
      "among those with current data, and the report says so)");
  cmd->add_flag("--all-clusters", f->all_clusters, "Mix every cluster of the store in one report")
      ->excludes(cluster_opt);
  std::string by_help = "Group the waste table by";
  for (const char* k : kReportGroupKeys) by_help += std::string(" ") + k;
  cmd->add_option("--by", f->by, by_help)
      ->check(CLI::IsMember(
          std::vector<std::string>(kReportGroupKeys.begin(), kReportGroupKeys.end())));
  cmd->add_option("--showback", f->showback,
                  "Print the showback table instead: allocated, used and right-sized cost and "
                  "share of the cluster per account or per user (text, json, csv or html)")
      ->check(CLI::IsMember(std::vector<std::string>(kShowbackKeys.begin(), kShowbackKeys.end())));
  cmd->add_option("--format", f->format, "text, json, html, or csv (with --showback)")
      ->check(CLI::IsMember({"text", "json", "html", "csv"}))
      ->capture_default_str();
  cmd->add_flag("--json", f->json, "Same as --format json");
  cmd->add_option("--prices", f->prices,
                  "Price table (JSON, see docs/report-schema.md); default: the built-in "
                  "on-demand list prices of share/prices.json");
  cmd->add_option("--top", f->top, "How many top wasters to list")->capture_default_str();
  cmd->add_option("-o,--output", f->output, "Write to FILE instead of standard output");
  cmd->callback([&ctx, action, f] {
    *action = [&ctx, f]() -> int {
      int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
      ReportOptions opts;
      opts.cluster = f->cluster;
      opts.by = f->by;
      opts.top_n = f->top;
      opts.choose_cluster = !f->all_clusters;
      opts.showback = f->showback;
      std::string format = f->json ? "json" : f->format;
      if (format == "csv" && f->showback.empty()) {
        return Fail(Status::InvalidArgument(
            "--format csv is for the showback table: add --showback account or --showback user"));
      }
      if (!f->since.empty()) {
        auto t = ParseTimeSpec(f->since, now);
        if (!t.ok()) return Fail(t.status().WithContext("--since"));
        opts.since = *t;
      }
      if (!f->until.empty()) {
        auto t = ParseTimeSpec(f->until, now);
        if (!t.ok()) return Fail(t.status().WithContext("--until"));
        opts.until = *t;
      }
      auto prices = PricesFor(f->prices);
      if (!prices.ok()) return Fail(prices.status());
      auto store = ctx.OpenedStore();
      if (!store.ok()) return Fail(store.status());
      auto report = BuildWasteReport(**store, opts, *prices);
      if (!report.ok()) return Fail(report.status());
      if (f->showback.empty()) AddQueueWhatIf(**store, &*report);
      std::string text;
      if (!f->showback.empty()) {
        if (format == "json") {
          text = JsonText(RenderShowbackJson(*report), 2) + "\n";
        } else if (format == "csv") {
          text = RenderShowbackCsv(*report);
        } else if (format == "html") {
          text = RenderShowbackHtml(*report);
        } else {
          text = RenderShowbackText(*report);
        }
      } else if (format == "json") {
        text = JsonText(RenderJson(*report), 2) + "\n";
      } else if (format == "html") {
        text = RenderHtml(*report);
      } else {
        text = RenderText(*report);
      }
      Status st = WriteRendered(f->output, text);
      if (!st.ok()) return Fail(st);
      if (!f->output.empty() && f->output != "-") {
        fmt::print(stderr, "rightsize: wrote {}\n", f->output);
      }
      return kExitOk;
    };
  });
}

}  // namespace rightsize::cli
