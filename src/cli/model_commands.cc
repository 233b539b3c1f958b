// `rightsize train`, `rightsize predict` and `rightsize eval`: the submission-time predictor.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/app.h"
#include "cli/terminal.h"
#include "core/json_text.h"
#include "ingest/clustercockpit.h"
#include "ingest/ingest.h"
#include "ingest/job_script.h"
#include "ingest/sacct.h"
#include "ingest/sinfo.h"
#include "ingest/swf.h"
#include "model/predictor.h"
#include "model/replay.h"
#include "report/prices.h"
#include "report/render.h"

namespace rightsize::cli {

StatusOr<PriceTable> PricesFor(const std::string& path);
// advise_command.cc: the GPU memory the job's code needs (p10/p50/p90 per job, "per_gpu",
// "lines", "text"); nullopt when the code cannot be read or sized.
std::optional<nlohmann::json> GpuMemoryFromCode(const JobScript& script,
                                                const std::string& script_path,
                                                const std::string& code_dir);

namespace {

constexpr double kRisks[] = {0.005, 0.01, 0.02, 0.05};
// How many of the user's (and the program's) newest finished jobs `predict` reads.
constexpr int64_t kMaxPastJobs = 2500;

ClusterContext ContextFor(Store& store, const std::string& cluster) {
  ClusterContext c;
  auto meta = store.GetClusterMeta(cluster);
  if (meta.ok()) {
    for (const char* key : {"swf.MaxProcs", "cpus"}) {
      auto it = meta->find(key);
      if (it == meta->end()) continue;
      if (auto v = ParseDouble(it->second); v && *v > 0) c.total_cpus = *v;
    }
    for (const PartitionShape& p : PartitionsFromMeta(*meta)) {
      c.partitions[p.name] = NodeShape{p.cpus_per_node, static_cast<double>(p.memory_per_node),
                                       static_cast<double>(p.gpus_per_node), p.gpu_type};
      if (p.is_default) c.default_partition = p.name;
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

// The cluster to work on: the one given (which must have jobs), else the store's only one.
StatusOr<std::string> PickCluster(Store& store, const std::string& given) {
  RS_ASSIGN_OR_RETURN(auto clusters, store.Clusters());
  if (!given.empty()) {
    if (std::find(clusters.begin(), clusters.end(), given) != clusters.end()) return given;
    return Status::NotFound(
        fmt::format("no jobs of cluster {} (clusters with jobs: {})", given,
                    clusters.empty() ? "none" : fmt::format("{}", fmt::join(clusters, ", "))));
  }
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
                                                                      std::string format,
                                                                      const std::string& cluster) {
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
  IngestOptions options;  // records that name their cluster keep it (--cluster picks one)
  IngestStats stats;
  RS_RETURN_IF_ERROR(IngestFile(path, *parser, *store, "trace", options, &stats));
  if (stats.skipped > 0) {
    fmt::print(stderr, "{}: {} malformed lines skipped (first: {})\n", path, stats.skipped,
               stats.errors.empty() ? "" : stats.errors[0].ToString());
  }
  RS_ASSIGN_OR_RETURN(std::string picked, PickCluster(*store, cluster));
  RS_ASSIGN_OR_RETURN(auto jobs, LoadJobs(*store, picked));
  return std::make_pair(std::move(jobs), ContextFor(*store, picked));
}

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

// ---- train ----

// The risk correction of a model, per risk: what a request at that risk is really made at.
nlohmann::json RiskFactorsJson(const TargetModel& m) {
  nlohmann::json j = nlohmann::json::object();
  for (size_t i = 0; i < kSuggestRisks.size(); ++i) {
    j[fmt::format("{:g}", kSuggestRisks[i])] = std::exp(static_cast<double>(m.risk_log_factor[i]));
  }
  return j;
}

// How the shipped point is made, where the trees alone lost to a baseline on the held-out jobs.
std::string BlendText(const TargetModel& m) {
  if (m.blend_weight >= 1) return "";
  if (m.blend_weight <= 0) {
    return fmt::format(", point = {} (the trees lost to it)", NameOf(m.blend_baseline));
  }
  return fmt::format(", point {:.0f}% trees and {:.0f}% {}", 100 * m.blend_weight,
                     100 * (1 - m.blend_weight), NameOf(m.blend_baseline));
}

// What `train` says about one cluster: JSON and text.
using TrainSummary = std::pair<nlohmann::json, std::string>;

StatusOr<TrainSummary> TrainCluster(Store& store, const std::string& cluster) {
  auto started = std::chrono::steady_clock::now();
  RS_ASSIGN_OR_RETURN(auto jobs, LoadJobs(store, cluster));
  ModelSet set;
  set.cluster = cluster;
  set.trained_at = static_cast<int64_t>(std::time(nullptr));
  set.context = ContextFor(store, cluster);
  History history;
  Dataset d = BuildDataset(jobs, set.context, &history);
  jobs.clear();
  jobs.shrink_to_fit();
  set.jobs = static_cast<int64_t>(d.rows());
  for (Target t : kAllTargets) set.global_median[static_cast<int>(t)] = history.GlobalMedian(t);
  std::vector<size_t> rows;
  for (size_t r = 0; r < d.rows(); ++r) {
    if (d.end[r] != std::numeric_limits<int64_t>::max()) {
      rows.push_back(r);
      set.trained_through = std::max(set.trained_through, d.end[r]);
    }
  }
  TrainOptions options;
  // The previous version, whose suggestions on the jobs that ended since carry the risk
  // correction forward (CorrectRisks); a model of other features starts it afresh.
  std::optional<ModelSet> prev;
  if (auto stored = store.GetModel(cluster, 0); stored.ok()) {
    if (auto parsed = ModelSet::Deserialize(stored->blob); parsed.ok()) prev = std::move(*parsed);
  } else if (stored.status().code() != Status::Code::kNotFound) {
    return stored.status();
  }
  nlohmann::json targets = nlohmann::json::object();
  std::string text;
  for (Target t : kAllTargets) {
    auto m = TrainTarget(d, t, rows, options);
    if (m.ok() && prev && prev->targets.count(t) > 0) {
      int ti = static_cast<int>(t);
      std::vector<size_t> ended;
      for (size_t r : rows) {
        if (d.end[r] > prev->trained_through && !std::isnan(d.y[ti][r]) &&
            !std::isnan(d.req[ti][r])) {
          ended.push_back(r);
        }
      }
      m->risk_log_factor = CorrectRisks(prev->targets.at(t), d, ended);
    }
    nlohmann::json tj;
    if (!m.ok()) {
      if (d.CountWithValue(t) == 0) continue;  // the data never measures it: nothing to say
      Baseline fallback = FallbackBaseline(d, t, rows);
      set.fallback[t] = fallback;
      tj = {{"trained", false},
            {"reason", m.status().message()},
            {"fallback_baseline", NameOf(fallback)}};
      text += fmt::format("  {:<12} not trained: {}; predict answers with the {} baseline\n",
                          NameOf(t), m.status().message(), NameOf(fallback));
    } else {
      tj = {{"trained", true},
            {"jobs", m->trained_rows},
            {"calibration_jobs", m->calibration_rows},
            {"calibration_mae", m->calibration_mae},
            {"calibration_best_baseline_mae", m->calibration_baseline_mae},
            {"blend_weight", m->blend_weight},
            {"blend_baseline", NameOf(m->blend_baseline)},
            {"risk_factors", RiskFactorsJson(*m)},
            // What the intervals are calibrated on: users for groups none and some, whose jobs
            // miss together; held-out jobs for the users the cluster knows well (every
            // group's, "pooled", where too few were their own), whose requests are also cut
            // on older jobs' errors ("request_jobs": TargetModel::request_scores).
            {"interval_evidence",
             {{"none", {{"users", m->group_scores[0].n}}},
              {"some", {{"users", m->group_scores[1].n}}},
              {"much",
               {{"jobs", GroupGrid(*m, 2).n},
                {"pooled", &GroupGrid(*m, 2) == &m->scores},
                {"request_jobs", m->request_scores.n}}}}}};
      text += fmt::format(
          "  {:<12} {:>9} jobs, held-out MAE {} (best baseline {}){}\n", NameOf(t),
          FormatThousands(static_cast<double>(m->trained_rows + m->calibration_rows), 0),
          FormatTargetValue(t, m->calibration_mae),
          FormatTargetValue(t, m->calibration_baseline_mae), BlendText(*m));
      set.targets.emplace(t, std::move(*m));
    }
    targets[std::string(NameOf(t))] = std::move(tj);
  }
  if (set.targets.empty()) {
    return Status::BadInput(fmt::format(
        "cluster {}: no target has enough finished jobs with a measured value to train on ({} "
        "jobs)",
        cluster, d.rows()));
  }
  std::string blob = set.Serialize();
  RS_ASSIGN_OR_RETURN(int64_t version, store.PutModel(cluster, set.trained_at, set.jobs, blob));
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  TrainSummary s;
  s.first = {{"cluster", cluster},   {"version", version}, {"jobs", set.jobs},
             {"bytes", blob.size()}, {"seconds", seconds}, {"targets", targets}};
  s.second = fmt::format("cluster {}: model version {} from {} jobs ({:.1f} s, {} KiB)\n{}",
                         cluster, version, FormatThousands(static_cast<double>(set.jobs), 0),
                         seconds, blob.size() / 1024, text);
  return s;
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
          out.push_back(s->first);
        } else {
          fmt::print("{}", s->second);
        }
      }
      if (f->json) fmt::print("{}\n", JsonText(nlohmann::json{{"models", out}}, 2));
      return code;
    };
  });
}

// ---- predict ----

// Rounds a suggestion up to what a request is written in.
double RoundUp(Target t, double v) {
  switch (t) {
    case Target::kRuntime:
      return std::ceil(v / 60) * 60;
    case Target::kPeakMemory:
    case Target::kGpuMemory: {
      double step = v > 4.0 * kGiB ? static_cast<double>(kGiB) : 256.0 * kMiB;
      return std::ceil(v / step) * step;
    }
    case Target::kCpuCores:
      return std::ceil(v);
    case Target::kGpuUtil:
      return v;
  }
  return v;
}

struct PredictFlags {
  std::string script, cluster, user, account, partition, prices;
  std::string code;  // --code: the job's code folder ("" = the script's)
  std::vector<std::string> sbatch_args;
  double risk = 0.01;
  bool per_job_risk = false;  // --per-job-risk: RiskScope::kJob
  int64_t now = 0;
  bool json = false;
};

struct PredictionOutput {  // NOLINT(bugprone-exception-escape): json's move may throw
  nlohmann::json doc;      // rightsize.predict/v1
  std::string text;        // what `predict` prints
  std::string warnings;    // the script's warnings, one per line
};

// The prediction of one job script as the rightsize.predict/v1 document and as the text
// `predict` prints. `script_text` is the script itself when it did not come from a file (the
// HTTP API); f.script then only names it.
StatusOr<PredictionOutput> PredictScript(Store& store, const PredictFlags& f,
                                         const std::optional<std::string>& script_text,
                                         ModelCache* models = nullptr) {
  auto script = script_text ? ParseJobScript(*script_text, f.sbatch_args)
                            : ParseJobScriptFile(f.script, f.sbatch_args);
  if (!script.ok()) return script.status();
  PredictionOutput result;
  std::string& text = result.text;
  nlohmann::json warnings = nlohmann::json::array();
  for (const auto& w : script->warnings) {
    warnings.push_back({{"line", w.line}, {"message", w.message}});
    result.warnings += fmt::format("{}: {}\n", f.script, w.ToString());
  }
  // The code's own reading of GPU memory: the prediction on a cold start, else shown beside.
  std::optional<nlohmann::json> from_code;
  if (!script_text || !f.code.empty()) from_code = GpuMemoryFromCode(*script, f.script, f.code);
  auto cluster = PickCluster(store, f.cluster);
  std::string no_history;
  if (!cluster.ok() && cluster.status().code() == Status::Code::kNotFound) {
    // A cluster the store has never seen (a new install, a new cluster): still answer, from
    // the script and the code alone, and say so.
    cluster = f.cluster.empty() ? std::string("default") : f.cluster;
    no_history = fmt::format(
        "the store has no jobs of cluster {}: no history to learn from, only "
        "what the script{} says",
        *cluster, from_code ? " and its code" : "");
  }
  if (!cluster.ok()) return cluster.status();
  JobRecord job;
  job.cluster = *cluster;
  job.request = script->request;
  if (!f.user.empty()) job.request.user = f.user;
  if (job.request.user.empty()) {
    const char* u = std::getenv("USER");
    job.request.user = u != nullptr ? u : "";
  }
  if (!f.account.empty()) job.request.account = f.account;
  if (!f.partition.empty()) job.request.partition = f.partition;
  if (job.request.job_name.empty()) {
    // sbatch names a job after its script when -J is not given.
    job.request.job_name = std::filesystem::path(f.script).filename().string();
  }
  int64_t now = f.now > 0 ? f.now : static_cast<int64_t>(std::time(nullptr));
  job.submit_time = now;

  nlohmann::json notes = nlohmann::json::array();
  if (!no_history.empty()) notes.push_back(no_history);
  auto load = [&]() -> StatusOr<ModelSet> {
    RS_ASSIGN_OR_RETURN(auto stored, store.GetModel(*cluster, 0));
    RS_ASSIGN_OR_RETURN(auto parsed, ModelSet::Deserialize(stored.blob));
    parsed.version = stored.version;
    return parsed;
  };
  // The model: from the cache when the caller keeps one (the server), else read now.
  std::shared_ptr<const ModelSet> held;
  std::unique_lock<std::mutex> predicting;
  auto version = store.LatestModelVersion(*cluster);
  if (version.ok()) {
    if (models != nullptr) {
      RS_ASSIGN_OR_RETURN(auto entry, models->Get(*cluster, *version, load));
      held = entry.set;
      predicting = std::unique_lock<std::mutex>(*entry.mu);
    } else {
      RS_ASSIGN_OR_RETURN(auto parsed, load());
      held = std::make_shared<const ModelSet>(std::move(parsed));
    }
  } else if (version.status().code() == Status::Code::kNotFound) {
    notes.push_back(
        fmt::format("no model for cluster {} yet (run `rightsize train`): the "
                    "answers below are the last-two baseline, without intervals",
                    *cluster));
  } else {
    return version.status();
  }
  const ModelSet* set = held.get();

  // The past this job's features come from: the user's newest finished jobs and the
  // program's, at most kMaxPastJobs of each. The features read the last few runs of each view
  // and its counts and means; beyond a few thousand jobs only those counts and means differ
  // (over the newest kMaxPastJobs instead of all), and reading a user's 50,000 jobs took 0.4 s.
  std::vector<JobRecord> past;
  std::set<std::string> seen;
  for (int pass = 0; pass < 2; ++pass) {
    JobFilter filter;
    filter.cluster = *cluster;
    filter.ended_until = now + 1;
    if (pass == 0) {
      if (job.request.user.empty()) continue;
      filter.user = job.request.user;
    } else {
      filter.job_name = job.request.job_name;
    }
    filter.newest = kMaxPastJobs + 1;  // one more: to know there are more
    int64_t read = 0;
    Status st = store.ScanJobs(filter, [&](const JobRecord& j) {
      if (++read > kMaxPastJobs) return false;
      if (j.end_time && *j.end_time <= now && seen.insert(j.job_id).second) past.push_back(j);
      return true;
    });
    if (!st.ok()) return st;
    if (read > kMaxPastJobs) {
      notes.push_back(fmt::format(
          "{} has more than {} finished jobs: the counts and means of its history are read "
          "from the newest {}",
          pass == 0 ? fmt::format("user {}", job.request.user)
                    : fmt::format("job name {}", job.request.job_name),
          FormatThousands(static_cast<double>(kMaxPastJobs), 0),
          FormatThousands(static_cast<double>(kMaxPastJobs), 0)));
    }
  }
  std::sort(past.begin(), past.end(),
            [](const JobRecord& a, const JobRecord& b) { return *a.end_time < *b.end_time; });
  History history;
  for (const auto& j : past) history.AddFinished(j);
  if (set) {
    for (Target t : kAllTargets) {
      history.SetGlobalMedian(t, set->global_median[static_cast<int>(t)]);
    }
  }
  // The cluster as `rightsize ingest slurm` last saw it (sinfo), not as the model was trained.
  ClusterContext context = ContextFor(store, *cluster);
  if (context.partitions.empty() && set) context = set->context;
  const NodeShape* nodes = context.NodesOf(job.request.partition);
  if (job.request.partition.empty() && nodes != nullptr) {
    notes.push_back(
        fmt::format("no partition given: the cluster's default, {}", context.default_partition));
  }
  std::vector<float> row(Layout().cols());
  history.Features(job, now, context, row.data());

  std::optional<double> gpu_capacity;
  if (job.AllocatedGpus().value_or(0) > 0) {
    auto prices = PricesFor(f.prices);
    if (prices.ok()) {
      // A request without a GPU type gets the partition's.
      std::string type = job.GpuType();
      if (type.empty() && nodes != nullptr) type = nodes->gpu_type;
      double bytes = prices->GpuMemoryBytes(type, 1);  // one GPU's, as the request
      if (bytes > 0) gpu_capacity = bytes;
    }
  }
  nlohmann::json targets = nlohmann::json::object();
  std::string table;
  std::vector<std::string> why_lines;
  std::vector<std::string> unmeasured;  // targets the user's finished jobs never measured
  for (Target t : kAllTargets) {
    bool gpu_target = t == Target::kGpuMemory || t == Target::kGpuUtil;
    if (gpu_target && job.AllocatedGpus().value_or(0) == 0) continue;
    auto request = TargetRequest(job, t, gpu_capacity);
    auto baselines = history.Baselines(job, now, t);
    nlohmann::json tj;
    tj["unit"] = InfoOf(t).unit;
    tj["request"] = request ? nlohmann::json(*request) : nlohmann::json(nullptr);
    auto it = set ? set->targets.find(t) : decltype(set->targets.end()){};
    if ((!set || it == set->targets.end()) && t == Target::kGpuMemory && from_code) {
      for (const char* q : {"p10", "p50", "p90"}) tj[q] = (*from_code)[q];
      tj["source"] = "code";
      tj["code"] = *from_code;
      table += fmt::format("  {:<12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}\n", NameOf(t),
                           FormatTargetValue(t, (*from_code)["p10"].get<double>()),
                           FormatTargetValue(t, (*from_code)["p50"].get<double>()),
                           FormatTargetValue(t, (*from_code)["p90"].get<double>()),
                           request ? FormatTargetValue(t, *request) : "-", "", "");
      targets[std::string(NameOf(t))] = std::move(tj);
      continue;
    }
    if (!set || it == set->targets.end()) {
      // Without a model: the baseline closest on this cluster's jobs so far, as `train` chose
      // it (last-two before any training).
      Baseline fb = Baseline::kLast2;
      if (set) {
        if (auto f = set->fallback.find(t); f != set->fallback.end()) fb = f->second;
      }
      float b = baselines[static_cast<int>(fb)];
      // Without a model, say only what this cluster's jobs have measured.
      if (!std::isfinite(b) || std::isnan(history.GlobalMedian(t))) continue;
      tj["source"] = fmt::format("baseline:{}", NameOf(fb));
      if (set) {
        notes.push_back(fmt::format(
            "{}: too few finished jobs for a model yet; p50 is the {} baseline (the closest on "
            "this cluster's finished jobs; last-two under {} of them), without an interval",
            NameOf(t), NameOf(fb), kMinFallbackJobs));
      }
      tj["p50"] = b;
      table += fmt::format("  {:<12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}\n", NameOf(t), "",
                           FormatTargetValue(t, b), "",
                           request ? FormatTargetValue(t, *request) : "-", "", "");
      targets[std::string(NameOf(t))] = std::move(tj);
      continue;
    }
    const TargetModel& m = it->second;
    std::string anchor_from;
    float anchor = history.Anchor(job, t, baselines, &anchor_from);
    auto p = PredictTarget(m, row.data(), baselines, anchor, request, SubmitWeight(t, job));
    if (!p.ok()) return p.status();
    // Above the request the history holds only jobs stopped there (time limit, OOM kill), so
    // the upper tail is not known beyond it: never suggest more than twice the request, and
    // never more cores than asked for (too few cores slow a job down, they do not kill it).
    std::optional<double> too_small;
    if (request) too_small = p->ProbTooSmall(*request);
    double suggested = p->RequestQuantile(1 - f.risk);
    double used = p->EffectiveRisk(f.risk);
    if (request && *too_small <= f.risk) {
      suggested = p->Suggest(f.risk, f.per_job_risk ? RiskScope::kJob : RiskScope::kCluster, &used);
      if (used < f.risk / 1.1) {  // the correction never raises the risk (kRiskFactorMax)
        notes.push_back(fmt::format(
            "{}: recent jobs outgrew their suggested requests more often than the risk said, so "
            "this one is made at a {:.2g}% risk for your {:.2g}%",
            NameOf(t), 100 * used, 100 * f.risk));
      }
    } else if (request && *too_small < 0.1) {
      suggested = *request;  // a small but real chance of needing more: keep the request
    } else if (request) {
      suggested = std::min(suggested, (t == Target::kCpuCores ? 1 : 2) * *request);
    }
    suggested = RoundUp(t, suggested);
    double job_risk = p->ProbTooSmall(suggested);
    if (request && suggested < *request && job_risk > 1.5 * f.risk && !f.per_job_risk) {
      notes.push_back(fmt::format(
          "{}: this job would outgrow the suggested request with a {:.2g}% chance: the {:.2g}% "
          "asked for is a share of all jobs, and a large request, whose cut frees the most, "
          "takes more of it than a small one (--per-job-risk bounds this job's own)",
          NameOf(t), 100 * job_risk, 100 * f.risk));
    }
    if (request && suggested > *request) {
      notes.push_back(fmt::format("{}: the request ({}) is probably too small; ask for {}",
                                  NameOf(t), FormatTargetValue(t, *request),
                                  FormatTargetValue(t, suggested)));
    }
    tj["source"] = "model";
    // An unbounded quantile (too few jobs or users to bound it) is null in JSON.
    auto bound = [](double v) {
      return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
    };
    tj["p10"] = bound(std::max(0.0, p->Quantile(0.1)));
    tj["p50"] = p->point;
    tj["p90"] = bound(p->Quantile(0.9));
    tj["suggested_request"] = bound(suggested);
    tj["risk_used"] = used;
    tj["job_risk"] = job_risk;
    tj["history"] = HistoryGroupName(p->group);
    if (p->group == 0) unmeasured.emplace_back(NameOf(t));
    if (!std::isfinite(p->Quantile(0.9))) {
      // Groups 0 and 1 count users (TrainTarget, GroupGrid).
      bool users = p->group < 2;
      std::string who = !users          ? "held-out jobs"
                        : p->group == 0 ? "users the cluster had not seen before"
                                        : "users with a few past jobs";
      notes.push_back(fmt::format(
          "{}: p90 is unbounded: too few {} to check the model on ({}; {} are needed to bound "
          "it)",
          NameOf(t), who, p->Grid().n, QuantileGrid::CountToBound(0.9)));
    }
    tj["prob_request_too_small"] = too_small ? nlohmann::json(*too_small) : nlohmann::json(nullptr);
    if (t == Target::kGpuMemory && from_code) {
      tj["code"] = *from_code;
      if (p->group == 0) {  // no history for this job: the code's reading is the prediction
        for (const char* q : {"p10", "p50", "p90"}) tj[q] = (*from_code)[q];
        tj["source"] = "code";
      }
    }
    // The features that moved this prediction most (SHAP values of the trees).
    std::vector<float> gathered;
    for (int c : m.columns) gathered.push_back(row[c]);
    std::vector<float> contrib;
    nlohmann::json why = nlohmann::json::array();
    if (m.median.Contributions(gathered.data(), 1, gathered.size(), &contrib).ok()) {
      std::vector<size_t> order(m.columns.size());
      for (size_t k = 0; k < order.size(); ++k) order[k] = k;
      std::sort(order.begin(), order.end(),
                [&](size_t a, size_t b) { return std::abs(contrib[a]) > std::abs(contrib[b]); });
      std::string line;
      for (size_t k = 0; k < std::min<size_t>(3, order.size()); ++k) {
        size_t c = order[k];
        if (contrib[c] == 0) break;
        const std::string& name = Layout().names[m.columns[c]];
        std::string words = DescribeFeature(name);
        why.push_back({{"feature", name},
                       {"description", words},
                       {"value", std::isnan(gathered[c]) ? nlohmann::json(nullptr)
                                                         : nlohmann::json(gathered[c])},
                       {"factor", std::exp(contrib[c])}});
        // A missing value moves the trees too: the job has no such past.
        line += fmt::format("{}{}{} ×{:.2f}", line.empty() ? "" : "; ", words,
                            std::isnan(gathered[c]) ? ": none" : "", std::exp(contrib[c]));
      }
      if (!line.empty()) {
        std::string start = std::isfinite(anchor) && anchor > 0
                                ? fmt::format("{} ({})", anchor_from, FormatTargetValue(t, anchor))
                                : "the cluster's typical job";
        why_lines.push_back(fmt::format("  {}: from {}, {}", NameOf(t), start, line));
      }
    }
    tj["why"] = std::move(why);
    table += fmt::format("  {:<12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}\n", NameOf(t),
                         FormatTargetValue(t, p->Quantile(0.1)), FormatTargetValue(t, p->point),
                         FormatTargetValue(t, p->Quantile(0.9)),
                         request ? FormatTargetValue(t, *request) : "-",
                         too_small ? fmt::format("{:.1f}%", 100 * *too_small) : "-",
                         t == Target::kGpuUtil ? "-" : FormatTargetValue(t, suggested));
    targets[std::string(NameOf(t))] = std::move(tj);
  }
  if (!unmeasured.empty()) {
    // A user with finished jobs that did not measure a target (CPU cores of jobs under a
    // minute) is told which, not that they have no jobs at all.
    bool has_jobs = std::any_of(past.begin(), past.end(), [&](const JobRecord& j) {
      return j.request.user == job.request.user;
    });
    std::string user = job.request.user.empty() ? "(unknown)" : job.request.user;
    notes.push_back(
        has_jobs ? fmt::format("the finished jobs of user {} in cluster {} never measured {}: "
                               "{} intervals are those of users the cluster had not seen "
                               "before, and wider",
                               user, *cluster, fmt::join(unmeasured, " or "),
                               unmeasured.size() == 1 ? "its" : "their")
                 : fmt::format("user {} has no finished jobs in cluster {}: the intervals are "
                               "those of users the cluster had not seen before, and wider",
                               user, *cluster));
  }

  // The most similar past jobs: same user and name, then same user and request, then the
  // user's, then the program's; the newest first.
  std::vector<std::pair<int, const JobRecord*>> ranked;
  std::string sig = RequestSignature(job);
  for (const auto& j : past) {
    bool same_user = j.request.user == job.request.user;
    int score = (same_user && j.request.job_name == job.request.job_name) ? 3
                : (same_user && RequestSignature(j) == sig)               ? 2
                : same_user                                               ? 1
                                                                          : 0;
    ranked.emplace_back(score, &j);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first > b.first;
    return *a.second->end_time > *b.second->end_time;
  });
  nlohmann::json similar = nlohmann::json::array();
  std::string similar_text;
  for (size_t k = 0; k < std::min<size_t>(3, ranked.size()); ++k) {
    const JobRecord& j = *ranked[k].second;
    nlohmann::json sj = {{"job_id", j.job_id},
                         {"user", j.request.user},
                         {"job_name", j.request.job_name},
                         {"end_time", *j.end_time},
                         {"state", j.outcome.state}};
    std::string used;
    for (Target t : kAllTargets) {
      auto v = TargetValue(j, t);
      if (!v) continue;
      sj[std::string(NameOf(t))] = *v;
      used += fmt::format(" {} {}", NameOf(t), FormatTargetValue(t, *v));
    }
    similar_text += fmt::format("  {} {} ({}, ended {}):{}\n", j.job_id, j.request.job_name,
                                j.request.user, FormatTimestamp(*j.end_time), used);
    similar.push_back(std::move(sj));
  }

  {
    nlohmann::json out = {{"schema", "rightsize.predict/v1"},
                          {"script", f.script},
                          {"cluster", *cluster},
                          {"user", job.request.user},
                          {"job_name", job.request.job_name},
                          {"risk", f.risk},
                          {"per_job_risk", f.per_job_risk},
                          {"model", set ? nlohmann::json{{"version", set->version},
                                                         {"trained_at", set->trained_at},
                                                         {"jobs", set->jobs}}
                                        : nlohmann::json(nullptr)},
                          {"targets", targets},
                          {"similar_jobs", similar},
                          {"warnings", warnings},
                          {"notes", notes}};
    result.doc = std::move(out);
  }
  text += fmt::format("{}: user {}, cluster {}, {}\n", f.script,
                      job.request.user.empty() ? "(unknown)" : job.request.user, *cluster,
                      set ? fmt::format("model version {} ({} jobs)", set->version,
                                        FormatThousands(static_cast<double>(set->jobs), 0))
                          : std::string("no model"));
  text += fmt::format("  {:<12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}\n", "", "p10", "p50",
                      "p90", "request", "too small", fmt::format("at {:.1f}%", 100 * f.risk));
  text += table;
  if (from_code) text += (*from_code)["text"].get<std::string>();
  if (!why_lines.empty()) {
    text += "why:\n";
    for (const auto& l : why_lines) text += l + "\n";
  }
  if (!similar_text.empty()) text += "similar past jobs:\n" + similar_text;
  for (const auto& n : notes) text += fmt::format("note: {}\n", n.get<std::string>());
  return result;
}

int RunPredict(Context& ctx, const PredictFlags& f) {
  auto store = ctx.OpenedStore();
  if (!store.ok()) return Fail(store.status());
  auto out = PredictScript(**store, f, std::nullopt);
  if (!out.ok()) return Fail(out.status());
  if (f.json) {
    fmt::print("{}\n", JsonText(out->doc, 2));
  } else {
    fmt::print(stderr, "{}", out->warnings);
    fmt::print("{}", out->text);
  }
  return kExitOk;
}

}  // namespace

StatusOr<nlohmann::json> PredictForServer(Store& store, const PredictInput& in,
                                          ModelCache* models) {
  PredictFlags f;
  f.script = in.name.empty() ? "script" : in.name;  // sbatch's job name without -J
  f.cluster = in.cluster;
  f.user = in.user;
  f.account = in.account;
  f.partition = in.partition;
  f.sbatch_args = in.args;
  f.risk = in.risk;
  f.per_job_risk = in.per_job_risk;
  f.now = in.now;
  f.json = true;
  RS_ASSIGN_OR_RETURN(auto out, PredictScript(store, f, in.script, models));
  return std::move(out.doc);
}

namespace {

void AddPredict(CLI::App& app, Context& ctx, Action* action) {
  auto* cmd = app.add_subcommand(
      "predict",
      "What a job script will really use: p10/p50/p90 per resource, the risk that "
      "its request is too small, and the request to make instead");
  auto f = std::make_shared<PredictFlags>();
  cmd->add_option("script", f->script, "The batch script")->required();
  cmd->add_option("sbatch_args", f->sbatch_args,
                  "sbatch options after --, which override the script's #SBATCH lines");
  cmd->add_option("--cluster", f->cluster, "The cluster (default: the store's only one)");
  cmd->add_option("--user", f->user, "Whose job it is (default: the script's, else $USER)");
  cmd->add_option("--account", f->account, "Account (overrides the script's)");
  cmd->add_option("--partition", f->partition, "Partition (overrides the script's)");
  cmd->add_option("--risk", f->risk,
                  "Accepted share of jobs whose suggested request is too small, spent where "
                  "a cut frees the most (default 0.01; this job's own: job_risk)")
      ->check(CLI::Range(0.0001, 0.5));
  cmd->add_flag("--per-job-risk", f->per_job_risk,
                "Bound this job's own chance to outgrow the suggested request by --risk instead "
                "(a smaller cut for a large request)");
  cmd->add_option("--now", f->now, "Predict as of this Unix time (default: now)");
  cmd->add_option("--prices", f->prices, "Price table, for GPU memory sizes (default: built in)");
  cmd->add_option("--code", f->code,
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
