// Predictor: per-target models that give a whole distribution, not just a number.
//
// For each target a TargetModel holds
//   - a point model: gradient-boosted trees on log(value), starting from the user's last job of
//     the same kind,
//     with an objective that rewards predictions within a factor of the truth (docs/model.md);
//   - conformal calibration: the errors log(actual) - log(point) of the most recent jobs, which
//     were held out of training, kept apart by how much history the user has (none, a little,
//     a lot). Quantile q of a job is point × exp(the q-th error of its group), so intervals
//     cover what they claim on recent data whatever the trees got wrong (split conformal
//     prediction), and are wider for a user the cluster has not seen. Where the first two
//     groups have few users among the recent jobs, they take in the older jobs of the training
//     window too, each predicted by trees trained without its user: new users of the past
//     months stand for the next one;
//   - a blend: the point is exp(w·log(model) + (1-w)·log(baseline)) with w and the baseline
//     chosen on the held-out jobs, so the shipped predictor is never worse than its best
//     baseline there (w = 1 when the trees win outright).
//   - the price of a kill per risk: a request at risk r is cut where it frees the most
//     resource-time net of that price, so a share r of jobs is killed in all and the large
//     requests, whose cuts free the most, take more of it than the small ones.
// docs/model.md explains the choices. A trained TargetModel is immutable and thread-compatible.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/booster.h"
#include "model/dataset.h"
#include "model/history.h"
#include "model/target.h"

namespace rightsize {

struct TrainOptions {
  BoosterParams median = [] {
    BoosterParams p;
    p.objective = "rightsize:aea";
    p.aea_tau = 1.0;
    p.rounds = 60;
    p.max_depth = 3;
    p.eta = 0.1;
    return p;
  }();
  double calibration_fraction = 0.2;  // the newest jobs, held out to calibrate
  size_t min_rows = 60;               // fewer jobs with a value: no model, baselines only
  size_t max_rows = 100000;           // the newest jobs only: old behaviour fades
  // Blocks of the training window whose jobs of users with many past jobs, each predicted by
  // trees trained on the blocks before it, add to TargetModel::request_scores (1: none).
  size_t request_blocks = 4;
};

// An empirical distribution stored as evenly spaced quantiles.
struct QuantileGrid {
  std::vector<float> q;  // sorted; q[i] is the (i / (size-1))-th quantile
  static QuantileGrid From(std::vector<float> values, size_t points = 2001);
  // The same from (value, weight) pairs, counted as `n` values by Quantile's finite-sample
  // correction: each user's errors weighing 1 in all, n the number of users.
  static QuantileGrid FromWeighted(std::vector<std::pair<float, double>> values, int64_t n,
                                   size_t points = 2001);
  // The conformal quantile: the ceil((n+1)·p)-th of n values, interpolated on the grid;
  // +infinity (-infinity) when n is too small to bound that upper (lower) tail.
  float Quantile(double p) const;
  // The fewest values that bound the p-th quantile (p >= 0.5): 9 for 0.9, 39 for 0.975.
  static int64_t CountToBound(double p);
  // The share of values >= x, and of values > x.
  double ShareAtLeast(float x) const;
  double ShareAbove(float x) const;
  int64_t n = 0;  // how many values the grid summarises
};

// Point accuracy as `eval` reports it: mean absolute error, AEA (mean of min(p, y)/max(p, y),
// 1 when equal), underestimation rate and mean absolute log error. Non-finite p is skipped.
inline double AgreementRatio(double p, double y) {
  return p == y ? 1.0 : std::min(p, y) / std::max(p, y);
}
struct PointErrors {
  double abs_sum = 0, aea_sum = 0, log_abs_sum = 0;
  int64_t n = 0, under = 0;
  void Add(double p, double y) {
    if (!std::isfinite(p)) return;
    abs_sum += std::abs(p - y);
    aea_sum += AgreementRatio(p, y);
    log_abs_sum += std::abs(std::log(std::max(p, 1e-9)) - std::log(std::max(y, 1e-9)));
    if (p < y) ++under;
    ++n;
  }
  double share(double sum) const { return n > 0 ? sum / static_cast<double>(n) : 0; }
  double mae() const { return share(abs_sum); }
  double aea() const { return share(aea_sum); }
};

// The kill risks at which TargetModel::suggest_with is chosen and the risk correction kept.
inline constexpr std::array<double, 6> kSuggestRisks = {0.0025, 0.005, 0.01, 0.02, 0.05, 0.1};
// The index of the kSuggestRisks entry whose strategy and correction a request at `risk` is made
// with: the highest at or below it (the lowest for a risk below them all), so that between two
// entries the request falls as the risk rises.
size_t SuggestRiskIndex(double risk);
// The cluster-wide risks at which TargetModel::kill_price is learned (log-spaced), and the
// risks one job's request may be made at.
inline constexpr size_t kPriceRisks = 24;
double PriceRisk(size_t i);  // 0.0002 ... 0.3
inline constexpr size_t kJobRisks = 28;
double JobRisk(size_t i);  // 0.0001 ... 0.5

struct TargetModel {
  Target target = Target::kRuntime;
  std::vector<int> columns;  // the feature columns the boosters read
  Booster median;
  // The trees learn log(value) - log(anchor), the anchor being the user's last job of the
  // same kind (History::Anchor): where a user repeats the same work the residual is 0, and
  // the near-miss objective leaves such predictions exact.
  float default_offset = 0;  // log value for rows without a baseline
  // Calibrated log errors per history group (HistoryGroup), and all together for a group
  // with too few held-out jobs of its own.
  std::array<QuantileGrid, 3> group_scores;
  QuantileGrid scores;
  // The requests' errors for group 2 (users with many past jobs): its held-out errors and those
  // of its older jobs, each predicted by trees trained on the jobs before it (forward
  // chaining). A request at 0.5 % reads a tail that a few hundred held-out jobs cannot bound;
  // the intervals keep to the held-out errors, which describe the newest jobs.
  QuantileGrid request_scores;
  float blend_weight = 1.0f;  // of the trees; the rest goes to blend_baseline
  Baseline blend_baseline = Baseline::kLast2;
  // Per baseline: log(actual / baseline) over the training window, to turn a baseline into a
  // request at a given risk (a single global margin, tuned on the past only).
  std::array<QuantileGrid, kNumBaselines> baseline_log_ratio;
  // Per history group (HistoryGroup) and kSuggestRisks entry, group-major, how a request at
  // that risk is made: -1 = the model's quantile, else the baseline (a Baseline) times its
  // margin, whichever freed the most resource-time on the group's held-out jobs without
  // killing more of them than the risk.
  std::vector<int> suggest_with;
  // Adaptive conformal inference (Gibbs & Candès 2021): per kSuggestRisks entry, the log of the
  // factor the nominal risk is multiplied by when a request is made. The held-out jobs are the
  // recent past, and where the cluster drifts the next jobs outgrow their quantiles more often
  // than the risk; each training moves the factor by the kills the previous model's suggestions
  // would have made among the jobs that ended since (CorrectRisks), so the realised kill rate
  // is steered back to the risk from past outcomes only.
  std::array<float, kSuggestRisks.size()> risk_log_factor{};
  // Per kPriceRisks entry, the price of a kill in resource-time (the target's unit × the
  // SubmitWeight's): the lowest at which the priced requests (TargetPrediction::Suggest) killed
  // no more than that share of the held-out jobs, in all and in each history group. Empty: too
  // few held-out jobs with a request, every request at the risk asked for.
  std::vector<float> kill_price;
  int64_t trained_rows = 0, calibration_rows = 0;
  double calibration_mae = 0, calibration_baseline_mae = 0;
};

// What `risk` bounds in a suggested request: the share of all jobs killed (the default, as
// `eval` counts kills), or each job's own chance to be killed.
enum class RiskScope { kCluster, kJob };

// One job's prediction of one target.
struct TargetPrediction {
  Target target = Target::kRuntime;
  double learned = 0;  // the trees' median alone
  double point = 0;    // the shipped point (after the blend), = p50
  double log_point = 0;
  int group = 0;
  std::optional<double> request;
  double weight = 1;  // SubmitWeight: what the request is multiplied by to make resource-time
  std::array<float, kNumBaselines> baselines{};
  const TargetModel* model = nullptr;
  // Where set, the errors its quantiles and requests are drawn from instead of its history
  // group's: a repeat of its program's last code takes the cluster's past repeats' errors
  // (model/code_change.h).
  std::shared_ptr<const QuantileGrid> own_errors;
  // The value not exceeded with probability q. Not capped at the request: where a cluster
  // lets jobs overrun their limits, the held-out errors say so and the quantiles follow.
  double Quantile(double q) const;
  // The calibrated errors this prediction draws its quantiles from.
  const QuantileGrid& Grid() const;
  // Those its requests at a risk are cut on: TargetModel::request_scores for group 2 where
  // they are enough, else Grid().
  const QuantileGrid& RequestGrid() const;
  // Quantile() on RequestGrid(): what a request at risk 1 - q asks for.
  double RequestQuantile(double q) const;
  // The request to make at kill risk `risk`, never above the request (the request when no
  // cut is safe enough); without a request, RequestQuantile(1 - risk). The risk is a share of
  // all jobs, as `eval` counts kills: with a kill price the job's own risk q is the one that
  // maximises weight·((1 - q)·request - its (1 - q) quantile) - price·q, so a large request
  // may be cut at more than `risk` and a small one at less (ProbTooSmall of the result says).
  // RiskScope::kJob never cuts a job at more than `risk`: safer for it, less freed in all.
  // A risk is made with the strategy and correction of the kSuggestRisks entry at or below it
  // (SuggestRiskIndex), and never asks for less than a higher entry does: a higher risk never
  // suggests a larger request. `used`, if given, receives the corrected risk it was made at:
  // EffectiveRisk(risk), or a higher entry's corrected risk where that entry's larger request
  // was taken and its risk is lower.
  double Suggest(double risk, RiskScope scope = RiskScope::kCluster, double* used = nullptr) const;
  // `risk` times the model's correction (risk_log_factor) of its kSuggestRisks entry.
  double EffectiveRisk(double risk) const;
  // The probability that `amount` is too small for the job: that it needs at least that much
  // (a job stopped at its time or memory limit reached it). For CPU cores at or above the
  // request: the share of recent jobs that kept more than that share of their request busy,
  // beyond CPU time's accounting noise (a job that keeps all its cores busy fits them).
  double ProbTooSmall(double amount) const;
};

// The calibrated errors a prediction of history `group` draws its quantiles from: the group's
// own (groups 0 and 1 always, counted in users; group 2 from 100 held-out jobs), else those of
// every group's held-out jobs.
const QuantileGrid& GroupGrid(const TargetModel& m, int group);

// How much of the user's own history a job has for `t`: 0 none, 1 a few jobs, 2 many. The
// intervals are calibrated per group.
int HistoryGroup(const float* features, Target t);
// The group's name in JSON: "none", "some", "much".
const char* HistoryGroupName(int group);

// A baseline's point errors on some jobs.
struct BaselineScore {
  Baseline baseline = Baseline::kLast2;
  PointErrors errors;
};
// The baseline with the lowest MAE on `rows` of `d` (jobs with a value of `t`), among those
// that predicted at least 90 % of them (VPA: not for run time); nullopt when none did.
std::optional<BaselineScore> BestBaseline(const Dataset& d, Target t,
                                          const std::vector<size_t>& rows);
// What a target without a model answers with: the best baseline (BestBaseline) on the jobs
// with a value among `rows` — each judged, as always, at its own submit time — once there are
// kMinFallbackJobs of them; last-two before that.
inline constexpr size_t kMinFallbackJobs = 10;
Baseline FallbackBaseline(const Dataset& d, Target t, const std::vector<size_t>& rows);

// Trains the model of `t` on `rows` of `d` (indexes in submit order, all with a value of t,
// all ended before the moment the model is for). NotFound when there are too few rows.
StatusOr<TargetModel> TrainTarget(const Dataset& d, Target t, std::vector<size_t> rows,
                                  const TrainOptions& options);

// Predicts row `features` (Layout().cols() values) with `m`; `baselines` and `anchor` are
// that job's baseline predictions and History::Anchor of the target, `weight` its
// SubmitWeight.
StatusOr<TargetPrediction> PredictTarget(const TargetModel& m, const float* features,
                                         const std::array<float, kNumBaselines>& baselines,
                                         float anchor, std::optional<double> request,
                                         double weight);
// Many rows at once (the replay).
Status PredictTargetRows(const TargetModel& m, const Dataset& d, const std::vector<size_t>& rows,
                         std::vector<TargetPrediction>* out);

// How far the risk correction moves for one job: log(factor) += kRiskStep · (risk - killed), so
// about 7 kills beyond what the risk expects halve the factor. The jobs of one batch (those
// that ended between two corrections — two `train` runs, or an hour of a replay — judged by
// one model) count together as at most
// kRiskBatchKills expected kills: their outcomes are not independent, and a busy hour must not
// swing the factor on noise. The factor stays between a tenth and 1: the correction makes
// suggestions safer where they killed too often, never riskier than what the user asked for.
// (Chosen on synthetic clusters, test/model: allowed to rise above 1, the factor overshot on
// stationary jobs and killed 6 % at a 5 % risk.)
inline constexpr double kRiskStep = 0.1;
inline constexpr double kRiskBatchKills = 10;
inline constexpr double kRiskFactorMin = 0.1, kRiskFactorMax = 1.0;

// `prev`'s risk correction carried over `rows` of `d` (jobs with a value and a request that
// ended since `prev`'s correction last moved, in any order: one batch): for each, whether the
// request `prev` suggested (Suggest) at each kSuggestRisks entry would have killed it, each such
// outcome moving the factor by kRiskStep. The next correction of the target starts from the
// result.
std::array<float, kSuggestRisks.size()> CorrectRisks(const TargetModel& prev, const Dataset& d,
                                                     const std::vector<size_t>& rows);

// Every model of one cluster, as stored.
struct ModelSet {
  std::string cluster;
  int64_t version = 0;     // increases with each `train`
  int64_t trained_at = 0;  // Unix seconds
  int64_t jobs = 0;        // jobs the training saw
  // The newest end among the jobs it learned from: the next `train` judges this model's
  // suggestions on the jobs that ended after it (CorrectRisks).
  int64_t trained_through = 0;
  ClusterContext context;
  std::array<float, kNumTargets> global_median{};
  std::map<Target, TargetModel> targets;
  // Targets measured but with too few jobs for a model: the baseline `predict` answers with
  // (FallbackBaseline).
  std::map<Target, Baseline> fallback;
  std::string Serialize() const;  // CBOR
  static StatusOr<ModelSet> Deserialize(const std::string& bytes);
};

}  // namespace rightsize
