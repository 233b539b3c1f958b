// `rightsize train`, `rightsize predict` and `rightsize eval`: the submission-time predictor.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/app.h"
#include "cli/terminal.h"
#include "ingest/clustercockpit.h"
#include "ingest/ingest.h"
#include "ingest/job_script.h"
#include "ingest/sacct.h"
#include "ingest/swf.h"
#include "model/predictor.h"
#include "model/replay.h"
#include "report/render.h"

namespace rightsize::cli {
namespace {

constexpr double kRisks[] = {0.005, 0.01, 0.02, 0.05};

ClusterContext ContextFor(Store& store, const std::string& cluster) {
  ClusterContext c;
  auto meta = store.GetClusterMeta(cluster);
  if (meta.ok()) {
    for (const char* key : {"swf.MaxProcs", "cpus"}) {
      auto it = meta->find(key);
      if (it == meta->end()) continue;
      if (auto v = ParseDouble(it->second); v && *v > 0) c.total_cpus = *v;
    }
  }
  return c;
}

StatusOr<std::vector<JobRecord>> LoadJobs(Store& store, const std::string& cluster) {
  std::vector<JobRecord> jobs;
  JobFilter f;
  f.cluster = cluster;
  RS_RETURN_IF_ERROR(store.ScanJobs(f, [&](const JobRecord& j) {
    jobs.push_back(j);
    return true;
  }));
  return jobs;
}

// The cluster to work on: the one given, else the store's only one.
StatusOr<std::string> PickCluster(Store& store, const std::string& given) {
  if (!given.empty()) return given;
  RS_ASSIGN_OR_RETURN(auto clusters, store.Clusters());
  if (clusters.size() == 1) return clusters[0];
  if (clusters.empty()) {
    return Status::NotFound("the store has no jobs: ingest accounting first (rightsize ingest)");
  }
  return Status::InvalidArgument(
      fmt::format("the store holds {} clusters ({}): pick one with --cluster", clusters.size(),
                  fmt::join(clusters, ", ")));
}

// A trace file read into a private in-memory store, for `eval --trace`.
StatusOr<std::pair<std::vector<JobRecord>, ClusterContext>> LoadTrace(const std::string& path,
                                                                      std::string format) {
  if (format.empty() || format == "auto") {
    if (path.find(".swf") != std::string::npos) {
      format = "swf";
    } else if (path.find(".csv") != std::string::npos) {
      format = "clustercockpit";
    } else {
      format = "sacct";
    }
  }
  std::unique_ptr<RecordParser> parser;
  if (format == "swf") {
    parser = std::make_unique<SwfParser>();
  } else if (format == "sacct") {
    parser = std::make_unique<SacctParser>(SacctOptions{});
  } else if (format == "clustercockpit") {
    parser = std::make_unique<ClusterCockpitParser>();
  } else {
    return Status::InvalidArgument(
        fmt::format("--format: expected swf, sacct or clustercockpit, got {}", Quote(format)));
  }
  RS_ASSIGN_OR_RETURN(auto store, OpenStore(":memory:"));
  IngestOptions options;
  options.override_cluster = true;
  IngestStats stats;
  RS_RETURN_IF_ERROR(IngestFile(path, *parser, *store, "trace", options, &stats));
  if (stats.skipped > 0) {
    fmt::print(stderr, "{}: {} malformed lines skipped (first: {})\n", path, stats.skipped,
               stats.errors.empty() ? "" : stats.errors[0].ToString());
  }
  RS_ASSIGN_OR_RETURN(auto jobs, LoadJobs(*store, "trace"));
  return std::make_pair(std::move(jobs), ContextFor(*store, "trace"));
}

std::string Pct(double v) { return fmt::format("{:.1f}%", 100 * v); }

void PrintEvalText(const std::string& what, const nlohmann::json& r) {
  fmt::print(
      "Replay of {}: {} jobs, scored on the later {:.0f}%, retrained every {} ({} "
      "retrains, {:.1f} s)\n",
      what, r["jobs"].get<int64_t>(), 100 * r["test_fraction"].get<double>(),
      FormatDuration(r["retrain_every_s"].get<double>()), r["retrains"].get<int>(),
      r["seconds"].get<double>());
  for (const auto& [name, t] : r["targets"].items()) {
    auto target = TargetFromName(name);
    auto fmt_v = [&](double v) {
      return target && std::string_view(t["unit"].get<std::string>()) != "%"
                 ? FormatTargetValue(*target, v)
                 : fmt::format("{:.1f}", v);
    };
    fmt::print("\n{} ({} jobs scored)\n", name, t["n"].get<int64_t>());
    fmt::print("  {:<12} {:>14} {:>7} {:>9}\n", "predictor", "MAE", "AEA", "under");
    auto row = [&](const std::string& label, const nlohmann::json& m) {
      fmt::print("  {:<12} {:>14} {:>7.3f} {:>9}\n", label, fmt_v(m["mae"].get<double>()),
                 m["aea"].get<double>(), Pct(m["underestimation"].get<double>()));
    };
    row("rightsize", t["model"]);
    row("  trees only", t["learned"]);
    for (const auto& [b, m] : t["baselines"].items()) row(b, m);
    fmt::print("  interval coverage: 80% -> {}, 95% -> {}; pinball loss {}\n",
               Pct(t["model"]["coverage80"].get<double>()),
               Pct(t["model"]["coverage95"].get<double>()),
               fmt_v(t["model"]["pinball"].get<double>()));
    if (!t["saving_curve"].empty()) {
      fmt::print("  saving curve (net share of requested resource-time freed / jobs killed):\n");
      fmt::print("  {:>6} {:>20} {:>20}\n", "risk", "rightsize", "last2");
      for (const auto& c : t["saving_curve"]) {
        fmt::print("  {:>6} {:>20} {:>20}\n", Pct(c["risk"].get<double>()),
                   fmt::format("{} / {}", Pct(c["model_saved"].get<double>()),
                               Pct(c["model_killed"].get<double>())),
                   fmt::format("{} / {}", Pct(c["last2_saved"].get<double>()),
                               Pct(c["last2_killed"].get<double>())));
      }
    }
  }
}

void AddEval(CLI::App& app, Context& ctx, Action* action) {
  auto* cmd = app.add_subcommand(
      "eval",
      "Chronological replay: the model and the baselines side by side, trained only on "
      "the past");
  struct Flags {
    std::string trace, format, cluster, every = "7d";
    bool store = false, json = false;
    double test_fraction = 0.5;
  };
  auto f = std::make_shared<Flags>();
  auto* trace = cmd->add_option("--trace", f->trace,
                                "Replay this accounting file (SWF, sacct -P or ClusterCockpit CSV) "
                                "without storing it");
  auto* st = cmd->add_flag("--store", f->store, "Replay the jobs in the store (see --cluster)");
  trace->excludes(st);
  cmd->add_option("--format", f->format,
                  "Format of --trace: swf, sacct, clustercockpit (default: "
                  "from the file name)");
  cmd->add_option("--cluster", f->cluster, "With --store: the cluster (default: the only one)");
  cmd->add_option("--retrain-every", f->every, "Retrain on this schedule of trace time (7d, 12h)");
  cmd->add_option("--test-fraction", f->test_fraction,
                  "Score the latest share of jobs; the earlier ones only train (default 0.5)")
      ->check(CLI::Range(0.05, 0.95));
  cmd->add_flag("--json", f->json, "Print the rightsize.eval/v1 document");
  cmd->callback([&ctx, action, f] {
    *action = [&ctx, f]() -> int {
      if (f->trace.empty() && !f->store) {
        return Fail(Status::InvalidArgument("eval: give --trace FILE or --store"));
      }
      auto every = ParseTimeSpec(f->every, 0);
      if (!every.ok() || *every >= 0) {
        return Fail(Status::InvalidArgument(fmt::format(
            "--retrain-every: expected a duration like 7d or 12h, got {}", Quote(f->every))));
      }
      std::vector<JobRecord> jobs;
      ClusterContext context;
      std::string what;
      if (!f->trace.empty()) {
        auto loaded = LoadTrace(f->trace, f->format);
        if (!loaded.ok()) return Fail(loaded.status());
        jobs = std::move(loaded->first);
        context = loaded->second;
        what = f->trace;
      } else {
        auto store = ctx.OpenedStore();
        if (!store.ok()) return Fail(store.status());
        auto cluster = PickCluster(**store, f->cluster);
        if (!cluster.ok()) return Fail(cluster.status());
        auto loaded = LoadJobs(**store, *cluster);
        if (!loaded.ok()) return Fail(loaded.status());
        jobs = std::move(*loaded);
        context = ContextFor(**store, *cluster);
        what = fmt::format("cluster {}", *cluster);
      }
      EvalOptions options;
      options.retrain_every_s = -*every;
      options.test_fraction = f->test_fraction;
      ProgressBar bar("eval");
      options.progress = [&bar](int done, int total) { bar.Update(done, total); };
      auto result = Replay(std::move(jobs), context, options);
      bar.Done();
      if (!result.ok()) return Fail(result.status());
      (*result)["input"] = what;
      if (f->json) {
        fmt::print("{}\n", result->dump(2));
      } else {
        PrintEvalText(what, *result);
      }
      return kExitOk;
    };
  });
}

}  // namespace

void AddModelCommands(CLI::App& app, Context& ctx, Action* action) { AddEval(app, ctx, action); }

}  // namespace rightsize::cli
