// `rightsize train`, `rightsize predict` and `rightsize eval`: the submission-time predictor.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "cli/terminal.h"
#include "core/json_text.h"
#include "model/predictor.h"
#include "model/replay.h"
#include "model/target.h"
#include "predict/cluster.h"
#include "predict/predict.h"
#include "predict/train.h"
#include "report/render.h"

namespace rightsize::cli {

namespace {

std::string Pct(double v) { return fmt::format("{:.1f}%", 100 * v); }

void PrintEvalText(const std::string& what, const nlohmann::json& r) {
  fmt::print(
      "Replay of {}: {} jobs, scored on the later {:.0f}%, retrained every {} ({} "
      "retrains, risk correction {}, {:.1f} s)\n",
      what, r["jobs"].get<int64_t>(), 100 * r["test_fraction"].get<double>(),
      FormatDuration(r["retrain_every_s"].get<double>()), r["retrains"].get<int>(),
      r["correct_every_s"].get<double>() > 0
          ? "every " + FormatDuration(r["correct_every_s"].get<double>())
          : std::string("at retrains"),
      r["seconds"].get<double>());
  for (const auto& item : r["targets"].items()) {
    const std::string& name = item.key();
    const nlohmann::json& t = item.value();
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
    if (!t["model"]["coverage80"].is_null()) {
      const auto& m = t["model"];
      std::string pinball = "none (no job had a bounded 80% interval)";
      if (!m["pinball"].is_null()) {
        pinball = fmt_v(m["pinball"].get<double>());
        int64_t with_interval = 0;
        for (const auto& g : m["by_history"]) with_interval += g["n"].get<int64_t>();
        if (m["pinball_n"].get<int64_t>() < with_interval) {
          pinball += fmt::format(" (over the {} jobs whose 80% interval was bounded)",
                                 m["pinball_n"].get<int64_t>());
        }
      }
      fmt::print("  interval coverage: 80% -> {}, 95% -> {}; pinball loss {}\n",
                 Pct(m["coverage80"].get<double>()), Pct(m["coverage95"].get<double>()), pinball);
      std::string groups;
      for (const auto& g : t["model"]["by_history"]) {
        groups += fmt::format("{}{} {} / {} ({} jobs)", groups.empty() ? "" : "; ",
                              g["history"].get<std::string>(), Pct(g["coverage80"].get<double>()),
                              Pct(g["coverage95"].get<double>()), g["n"].get<int64_t>());
      }
      fmt::print("  by the user's past jobs of this target: {}\n", groups);
    }
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
    std::string trace, format, cluster, every = "7d", correct_every = "1h", jobs;
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
  cmd->add_option("--cluster", f->cluster,
                  "The cluster to replay when the store or the trace holds several (default: "
                  "the only one)");
  cmd->add_option("--retrain-every", f->every, "Retrain on this schedule of trace time (7d, 12h)");
  cmd->add_option("--correct-every", f->correct_every,
                  "Between retrains, move the risk correction on the jobs that ended since, on "
                  "this schedule of trace time, as an hourly `train` does (default 1h; 0: only "
                  "at retrains)");
  cmd->add_option("--test-fraction", f->test_fraction,
                  "Score the latest share of jobs; the earlier ones only train (default 0.5)")
      ->check(CLI::Range(0.05, 0.95));
  cmd->add_flag("--json", f->json, "Print the rightsize.eval/v1 document");
  cmd->add_option("--jobs", f->jobs,
                  "Also write every scored job's prediction (point, trees, interval, suggested "
                  "requests) beside the baselines and what it used to this file, one JSON "
                  "object a line, to study where the model misses");
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
      int64_t correct_every = 0;
      if (f->correct_every != "0") {
        auto spec = ParseTimeSpec(f->correct_every, 0);
        if (!spec.ok() || *spec > 0) {
          return Fail(Status::InvalidArgument(
              fmt::format("--correct-every: expected a duration like 1h or 1d, or 0, got {}",
                          Quote(f->correct_every))));
        }
        correct_every = -*spec;
      }
      std::vector<JobRecord> jobs;
      ClusterContext context;
      std::string what;
      if (!f->trace.empty()) {
        auto loaded = LoadTrace(f->trace, f->format, f->cluster);
        if (!loaded.ok()) return Fail(loaded.status());
        if (!loaded->skipped_note.empty()) fmt::print(stderr, "{}\n", loaded->skipped_note);
        jobs = std::move(loaded->jobs);
        context = loaded->context;
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
      // --jobs is written beside its path and renamed into place once the replay is done, so a
      // replay that fails leaves an earlier file as it was.
      std::ofstream jobs_out;
      std::string jobs_tmp = f->jobs + ".partial";
      if (!f->jobs.empty()) {
        jobs_out.open(jobs_tmp, std::ios::trunc);
        if (!jobs_out) {
          return Fail(Status::IoError(
              fmt::format("--jobs {}: cannot write: {}", f->jobs, std::strerror(errno))));
        }
      }
      struct RemoveOnExit {
        const std::string* path;
        ~RemoveOnExit() {
          std::error_code ec;
          if (path != nullptr) std::filesystem::remove(*path, ec);
        }
      } remove_partial{jobs_out.is_open() ? &jobs_tmp : nullptr};
      EvalOptions options;
      if (jobs_out.is_open()) {
        options.on_scored_job = [&jobs_out](const nlohmann::ordered_json& j) {
          // A user or job name that is not UTF-8 must not end the replay.
          jobs_out << JsonText(j) << '\n';
        };
      }
      options.retrain_every_s = -*every;
      options.correct_every_s = correct_every;
      options.test_fraction = f->test_fraction;
      ProgressBar bar("eval");
      options.progress = [&bar](int done, int total) { bar.Update(done, total); };
      auto result = Replay(std::move(jobs), context, options);
      bar.Done();
      if (!result.ok()) return Fail(result.status());
      if (jobs_out.is_open()) {
        jobs_out.close();
        std::error_code ec;
        if (!jobs_out) {
          return Fail(Status::IoError(fmt::format("--jobs {}: write failed", f->jobs)));
        }
        std::filesystem::rename(jobs_tmp, f->jobs, ec);
        if (ec) {
          return Fail(Status::IoError(fmt::format("--jobs {}: {}", f->jobs, ec.message())));
        }
        remove_partial.path = nullptr;
      }
      (*result)["input"] = what;
      if (f->json) {
        fmt::print("{}\n", JsonText(*result, 2));
      } else {
        PrintEvalText(what, *result);
      }
      return kExitOk;
    };
  });
}

void AddTrain(CLI::App& app, Context& ctx, Action* action) {
  auto* cmd = app.add_subcommand(
      "train",
      "Build each cluster's prediction models from the jobs in the store (cheap enough "
      "to rerun every hour)");
  struct Flags {
    std::string cluster;
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  cmd->add_option("--cluster", f->cluster, "Train this cluster only (default: every cluster)");
  cmd->add_flag("--json", f->json, "Print the summary as JSON");
  cmd->callback([&ctx, action, f] {
    *action = [&ctx, f]() -> int {
      auto store = ctx.OpenedStore();
      if (!store.ok()) return Fail(store.status());
      std::vector<std::string> clusters;
      if (!f->cluster.empty()) {
        clusters.push_back(f->cluster);
      } else {
        auto all = (*store)->Clusters();
        if (!all.ok()) return Fail(all.status());
        clusters = *all;
      }
      if (clusters.empty()) {
        return Fail(Status::NotFound("the store has no jobs: ingest accounting first"));
      }
      nlohmann::json out = nlohmann::json::array();
      int code = kExitOk;
      for (const auto& c : clusters) {
        auto s = TrainCluster(**store, c);
        if (!s.ok()) {
          if (f->json) {
            out.push_back({{"cluster", c}, {"error", s.status().message()}});
          } else {
            fmt::print(stderr, "rightsize: {}\n", s.status().message());
          }
          code = std::max(code, ExitCodeFor(s.status()));
          continue;
        }
        if (f->json) {
          out.push_back(s->doc);
        } else {
          fmt::print("{}", s->text);
        }
      }
      if (f->json) fmt::print("{}\n", JsonText(nlohmann::json{{"models", out}}, 2));
      return code;
    };
  });
}

// ---- predict ----

struct PredictFlags {
  PredictRequest request;
  bool json = false;
};

int RunPredict(Context& ctx, const PredictFlags& f) {
  auto store = ctx.OpenedStore();
  if (!store.ok()) return Fail(store.status());
  auto out = PredictJob(**store, f.request);
  if (!out.ok()) return Fail(out.status());
  if (f.json) {
    fmt::print("{}\n", JsonText(out->doc, 2));
  } else {
    fmt::print(stderr, "{}", out->warnings);
    fmt::print("{}", out->text);
  }
  return kExitOk;
}

void AddPredict(CLI::App& app, Context& ctx, Action* action) {
  auto* cmd = app.add_subcommand(
      "predict",
      "What a job script will really use: p10/p50/p90 per resource, the risk that "
      "its request is too small, and the request to make instead");
  auto f = std::make_shared<PredictFlags>();
  cmd->add_option("script", f->request.script, "The batch script")->required();
  cmd->add_option("sbatch_args", f->request.sbatch_args,
                  "sbatch options after --, which override the script's #SBATCH lines");
  cmd->add_option("--cluster", f->request.cluster, "The cluster (default: the store's only one)");
  cmd->add_option("--user", f->request.user, "Whose job it is (default: the script's, else $USER)");
  cmd->add_option("--account", f->request.account, "Account (overrides the script's)");
  cmd->add_option("--partition", f->request.partition, "Partition (overrides the script's)");
  cmd->add_option("--risk", f->request.risk,
                  "Accepted share of jobs whose suggested request is too small, spent where "
                  "a cut frees the most (default 0.01; this job's own: job_risk)")
      ->check(CLI::Range(0.0001, 0.5));
  cmd->add_flag("--per-job-risk", f->request.per_job_risk,
                "Bound this job's own chance to outgrow the suggested request by --risk instead "
                "(a smaller cut for a large request)");
  cmd->add_option("--now", f->request.now, "Predict as of this Unix time (default: now)");
  cmd->add_option("--prices", f->request.prices,
                  "Price table, for GPU memory sizes (default: built in)");
  cmd->add_option("--code", f->request.code,
                  "Folder of the job's Python code, read for its GPU memory (default: the "
                  "script's folder)")
      ->type_name("DIR");
  cmd->add_flag("--json", f->json, "Print the rightsize.predict/v1 document");
  cmd->callback(
      [&ctx, action, f] { *action = [&ctx, f]() -> int { return RunPredict(ctx, *f); }; });
}

}  // namespace

void AddModelCommands(CLI::App& app, Context& ctx, Action* action) {
  AddTrain(app, ctx, action);
  AddPredict(app, ctx, action);
  AddEval(app, ctx, action);
}

}  // namespace rightsize::cli
