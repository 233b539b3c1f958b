#include "predict/train.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <limits>
#include <optional>
#include <unordered_map>

#include "model/code_change.h"
#include "model/dataset.h"
#include "model/history.h"
#include "model/predictor.h"
#include "model/target.h"
#include "predict/cluster.h"
#include "report/render.h"

namespace rightsize {

namespace {

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

}  // namespace

StatusOr<TrainSummary> TrainCluster(Store& store, const std::string& cluster) {
  auto started = std::chrono::steady_clock::now();
  RS_ASSIGN_OR_RETURN(auto jobs, LoadJobs(store, cluster));
  ModelSet set;
  set.cluster = cluster;
  set.trained_at = static_cast<int64_t>(std::time(nullptr));
  set.context = ContextFor(store, cluster);
  // How the code's ratios and estimates bore out on this cluster (model/code_change.h), for
  // predict's change-aware move; nothing is stored where no job has its code.
  {
    std::unordered_map<std::string, CodeReading> code;
    RS_RETURN_IF_ERROR(store.ScanJobCode(cluster, [&](const StoredJobCode& c) {
      code.emplace(c.job_id, ReadCode(c.facts, c.estimate, c.program, c.code_hash));
      return true;
    }));
    if (!code.empty()) {
      RS_RETURN_IF_ERROR(store.PutClusterMeta(
          cluster, {{kCodeCalibrationMeta, CalibrateOnJobs(jobs, code).ToJson().dump()}}));
    }
  }
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
  s.doc = {{"cluster", cluster},   {"version", version}, {"jobs", set.jobs},
           {"bytes", blob.size()}, {"seconds", seconds}, {"targets", targets}};
  s.text = fmt::format("cluster {}: model version {} from {} jobs ({:.1f} s, {} KiB)\n{}", cluster,
                       version, FormatThousands(static_cast<double>(set.jobs), 0), seconds,
                       blob.size() / 1024, text);
  return s;
}

StatusOr<std::vector<std::string>> ClustersToTrain(Store& store, const std::string& cluster) {
  std::vector<std::string> clusters;
  if (!cluster.empty()) {
    clusters.push_back(cluster);
  } else {
    RS_ASSIGN_OR_RETURN(clusters, store.Clusters());
  }
  if (clusters.empty()) return Status::NotFound("the store has no jobs: ingest accounting first");
  return clusters;
}

}  // namespace rightsize
