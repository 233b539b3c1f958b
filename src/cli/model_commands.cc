// `rightsize train`, `rightsize predict` and `rightsize eval`: the submission-time predictor;
// `rightsize eval pods`: the long-running pods' recommenders replayed on a usage series.
#include <fmt/format.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "cli/terminal.h"
#include "core/json_text.h"
#include "ingest/line_reader.h"
#include "model/pod_replay.h"
#include "model/predictor.h"
#include "model/replay.h"
#include "model/target.h"
#include "predict/eval.h"
#include "predict/predict.h"
#include "predict/train.h"
#include "report/render.h"

namespace rightsize::cli {

namespace {

// The eval_pods/v1 document as tables: one per half, then the saving curves.
std::string EvalPodsText(const nlohmann::ordered_json& doc) {
  std::string out;
  const auto& data = doc["data"];
  out += fmt::format(
      "{} pods, {} samples over {:.1f} h; scored each hour from {} past samples on, against the "
      "pod's peak so far\n",
      data["pods"].get<int64_t>(), data["samples"].get<int64_t>(), data["hours"].get<double>(),
      doc["method"]["min_past_samples"].get<int>());
  for (const char* half : {"dev", "blind", "all"}) {
    const auto& h = doc[half];
    out += fmt::format("\n{} ({} pods, {} pod-hours scored){}\n", half, h["pods"].get<int>(),
                       h["pod_hours"].get<int64_t>(),
                       std::string_view(half) == "dev" ? ", rightsize tuned here" : "");
    out += fmt::format("  {:<10} {:>16} {:>20}  {}\n", "method", "under-provisioned",
                       "freed GiB-h (share)", "setting");
    for (const auto& m : h["methods"]) {
      out += fmt::format("  {:<10} {:>8} ({:>5.1f}%) {:>11.1f} ({:>5.1f}%)  {}\n",
                         m["method"].get<std::string>(), m["under_hours"].get<int64_t>(),
                         100 * m["under_share"].get<double>(), m["freed_gib_hours"].get<double>(),
                         100 * m["freed_share"].get<double>(), m["setting"].get<std::string>());
    }
    out += fmt::format(
        "  rightsize frees more at no more under-provisioned hours: vs vpa {}, vs "
        "krr {}\n",
        h["checks"]["beats_vpa"].get<bool>() ? "yes" : "no",
        h["checks"]["beats_krr"].get<bool>() ? "yes" : "no");
    out += "  saving curve (under-provisioned share / freed share):\n";
    for (const auto& [name, param] : {std::pair{"rightsize", "fresh"}, std::pair{"vpa", "margin"},
                                      std::pair{"krr", "margin"}}) {
      out += fmt::format("    {:<10}", name);
      for (const auto& p : h["curves"][name]) {
        out +=
            fmt::format(" {}={:g}: {:.1f}%/{:.1f}%", param, p[param].get<double>(),
                        100 * p["under_share"].get<double>(), 100 * p["freed_share"].get<double>());
      }
      out += "\n";
    }
  }
  return out;
}

// `rightsize eval pods --gpu-memory FILE`: the pod recommenders replayed hour by hour.
void AddEvalPods(CLI::App& eval, Action* action) {
  auto* cmd = eval.add_subcommand(
      "pods",
      "Replay long-running pods' memory series hour by hour: rightsize's recommender beside "
      "VPA's and KRR's, memory freed against under-provisioned hours");
  struct Flags {
    std::string gpu_memory;
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  cmd->add_option("--gpu-memory", f->gpu_memory,
                  "Per-pod GPU memory samples, CSV (gzip or plain) with a timestamp, a value in "
                  "bytes and a pod key column, as the Alibaba GenAI trace's "
                  "pod_gpu_memory_used_bytes_anon.csv.gz")
      ->required()
      ->type_name("FILE");
  cmd->add_flag("--json", f->json, "Print the rightsize.eval_pods/v1 document");
  cmd->callback([action, f] {
    *action = [f]() -> int {
      auto reader = LineReader::Open(f->gpu_memory);
      if (!reader.ok()) return Fail(reader.status());
      PodSeriesReader series((*reader)->name());
      std::string_view line;
      while (true) {
        auto more = (*reader)->Next(&line);
        if (!more.ok()) return Fail(more.status());
        if (!*more) break;
        Status s = series.AddLine(line, (*reader)->line_number());
        if (!s.ok()) return Fail(s);
      }
      auto pods = series.Finish();
      if (!pods.ok()) return Fail(pods.status());
      auto doc = ReplayPods(*pods, PodReplayOptions{});
      if (f->json) {
        fmt::print("{}\n", doc.dump(2));
      } else {
        fmt::print("{}", EvalPodsText(doc));
      }
      return kExitOk;
    };
  });
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
  auto* pods = cmd;  // set below; `eval pods` has its own action
  AddEvalPods(*cmd, action);
  pods = cmd->get_subcommand("pods");
  cmd->callback([&ctx, action, f, pods] {
    if (pods->parsed()) return;
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
      EvalRequest request;
      request.trace = f->trace;
      request.format = f->format;
      request.cluster = f->cluster;
      request.jobs_path = f->jobs;
      request.options.retrain_every_s = -*every;
      request.options.correct_every_s = correct_every;
      request.options.test_fraction = f->test_fraction;
      Store* store = nullptr;  // a trace is replayed without opening the store
      if (f->trace.empty()) {
        auto opened = ctx.OpenedStore();
        if (!opened.ok()) return Fail(opened.status());
        store = *opened;
      }
      ProgressBar bar("eval");
      request.options.progress = [&bar](int done, int total) { bar.Update(done, total); };
      auto result = EvalHistory(store, std::move(request));
      bar.Done();
      if (!result.ok()) return Fail(result.status());
      if (!result->skipped_note.empty()) fmt::print(stderr, "{}\n", result->skipped_note);
      if (f->json) {
        fmt::print("{}\n", JsonText(result->doc, 2));
      } else {
        fmt::print("{}", EvalText(result->what, result->doc));
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
      auto clusters = ClustersToTrain(**store, f->cluster);
      if (!clusters.ok()) return Fail(clusters.status());
      nlohmann::json out = nlohmann::json::array();
      int code = kExitOk;
      for (const auto& c : *clusters) {
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
  PredictRequest request = f.request;
  // The job's environment is this shell's (sbatch --export=ALL), unless the job is another
  // user's and --python does not name its interpreter: theirs is not read.
  const std::string python = request.environment.python;
  request.environment = code::JobEnvironment::OfThisProcess();
  request.environment.python = python;
  if (!request.user.empty() && python.empty()) {
    const passwd* pw = getpwuid(geteuid());
    if (pw == nullptr || request.user != pw->pw_name) request.environment = {};
  }
  auto out = PredictJob(**store, request);
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
  cmd->add_option("--python", f->request.environment.python,
                  "The Python the job runs, whose torch decides what its attention keeps "
                  "(default: the one the script names, found on PATH or in the virtualenv it "
                  "activates, when the job is yours (--user); none: read no environment)")
      ->type_name("PATH");
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
