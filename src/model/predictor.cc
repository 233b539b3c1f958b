#include "model/predictor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <utility>

namespace rightsize {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kBlendWeights[] = {1.0f, 0.75f, 0.5f, 0.25f, 0.0f};
// Held-out jobs needed to price a kill, to hold a history group to its own kill budget and to
// choose a baseline's margin over the model's quantile for a group.
constexpr size_t kMinTuningJobs = 100;
// Held-out jobs with a baseline needed to test whether the trees lose to it (the blend).
constexpr size_t kMinPairedJobs = 20;

float LogOf(double v, Target t) {
  return static_cast<float>(std::log(std::max(v, InfoOf(t).floor)));
}

void Gather(const Dataset& d, const std::vector<size_t>& rows, size_t begin, size_t end,
            const std::vector<int>& columns, std::vector<float>* x) {
  x->clear();
  x->reserve((end - begin) * columns.size());
  for (size_t k = begin; k < end; ++k) {
    const float* r = d.row(rows[k]);
    for (int c : columns) x->push_back(r[c]);
  }
}

// The log offset the trees' output is added to (TargetModel::default_offset).
float Offset(float anchor, Target t, float fallback) {
  return std::isfinite(anchor) && anchor > 0 ? LogOf(anchor, t) : fallback;
}

double Cap(double v, float req) {
  return std::isnan(req) ? v : std::min(v, static_cast<double>(req));
}

// The blend of the trees' log prediction `lp` with baseline value `bv` at trees' weight `w`
// (TargetModel::blend_weight): the trees alone where the baseline has no value.
double Blend(double lp, float w, float bv, Target t) {
  return w < 1 && std::isfinite(bv) && bv > 0 ? w * lp + (1 - w) * LogOf(bv, t) : lp;
}

// Predictions of rows [0, n_tr) of `rows` where `want`, by trees that never saw the row's user:
// the users fall into kUserFolds folds, and each fold's rows are predicted by trees trained
// on the other folds' rows (`labels`, as TrainTarget's). NaN where not wanted, and for a fold
// whose trees could not be trained (these errors only add evidence; the model stands without).
constexpr uint32_t kUserFolds = 5;
void UnseenUserPredictions(const Dataset& d, const std::vector<size_t>& rows, size_t n_tr,
                           const std::vector<int>& columns, const std::vector<float>& labels,
                           const BoosterParams& params, const std::vector<bool>& want,
                           std::vector<float>* out) {
  out->assign(n_tr, kNaN);
  std::vector<size_t> fit, ask;
  std::vector<float> x, fy, pred;
  for (uint32_t f = 0; f < kUserFolds; ++f) {
    fit.clear();
    ask.clear();
    fy.clear();
    for (size_t k = 0; k < n_tr; ++k) {
      if (d.user[rows[k]] % kUserFolds != f) {
        fit.push_back(rows[k]);
        fy.push_back(labels[k]);
      } else if (want[k]) {
        ask.push_back(k);
      }
    }
    if (ask.empty() || fit.empty()) continue;
    Gather(d, fit, 0, fit.size(), columns, &x);
    auto b = Booster::Train(x, columns.size(), fy, params);
    if (!b.ok()) continue;
    std::vector<size_t> ask_rows;
    ask_rows.reserve(ask.size());
    for (size_t k : ask) ask_rows.push_back(rows[k]);
    Gather(d, ask_rows, 0, ask_rows.size(), columns, &x);
    if (!b->Predict(x.data(), ask.size(), columns.size(), &pred).ok()) continue;
    for (size_t i = 0; i < ask.size(); ++i) (*out)[ask[i]] = pred[i];
  }
}

}  // namespace

QuantileGrid QuantileGrid::From(std::vector<float> values, size_t points) {
  QuantileGrid g;
  std::erase_if(values, [](float v) { return !std::isfinite(v); });
  g.n = static_cast<int64_t>(values.size());
  if (values.empty()) return g;
  std::sort(values.begin(), values.end());
  if (values.size() <= points) {
    g.q = std::move(values);
    return g;
  }
  g.q.resize(points);
  for (size_t i = 0; i < points; ++i) {
    double pos = static_cast<double>(i) * static_cast<double>(values.size() - 1) /
                 static_cast<double>(points - 1);
    auto lo = static_cast<size_t>(pos);
    size_t hi = std::min(lo + 1, values.size() - 1);
    double f = pos - static_cast<double>(lo);
    g.q[i] = static_cast<float>(values[lo] * (1 - f) + values[hi] * f);
  }
  return g;
}

QuantileGrid QuantileGrid::FromWeighted(std::vector<std::pair<float, double>> values, int64_t n,
                                        size_t points) {
  std::erase_if(values, [](const auto& v) { return !std::isfinite(v.first) || !(v.second > 0); });
  QuantileGrid g;
  if (values.empty()) return g;
  g.n = n;
  std::sort(values.begin(), values.end());
  if (values.size() == 1) {
    g.q = {values[0].first};
    return g;
  }
  // Value j sits at the middle of its weight, rescaled so that the smallest is at level 0 and
  // the largest at 1: with equal weights, the (j - 1) / (m - 1) of From().
  size_t m = values.size();
  double total = 0;
  for (const auto& v : values) total += v.second;
  double span = total - values.front().second / 2 - values.back().second / 2;
  std::vector<double> level(m);
  double before = 0;
  for (size_t j = 0; j < m; ++j) {
    double mid = before + values[j].second / 2 - values.front().second / 2;
    level[j] = span > 0 ? mid / span : 0;
    before += values[j].second;
  }
  g.q.resize(points);
  size_t j = 0;
  for (size_t i = 0; i < points; ++i) {
    double at = static_cast<double>(i) / static_cast<double>(points - 1);
    while (j + 2 < m && level[j + 1] < at) ++j;
    double width = level[j + 1] - level[j];
    double f = width > 0 ? std::clamp((at - level[j]) / width, 0.0, 1.0) : 1.0;
    g.q[i] = static_cast<float>(values[j].first * (1 - f) + values[j + 1].first * f);
  }
  return g;
}

float QuantileGrid::Quantile(double p) const {
  // Split conformal prediction's finite-sample correction: with n scores, the ceil((n+1)p)-th
  // smallest covers a new job with probability >= p (mirrored for the lower tail). When that
  // rank is beyond the n scores, n jobs are too few to bound the tail: the bound is infinite
  // (with no scores at all, every bound).
  double n = static_cast<double>(this->n);
  double k = p >= 0.5 ? std::ceil((n + 1) * p) : std::floor((n + 1) * p);
  if (k > n) return std::numeric_limits<float>::infinity();
  if (k < 1) return -std::numeric_limits<float>::infinity();
  if (q.empty()) return kNaN;
  // The k-th smallest of n sits at (k - 1) / (n - 1) of the way along the grid.
  double pos = n > 1 ? (k - 1) / (n - 1) * static_cast<double>(q.size() - 1) : 0.0;
  auto lo = static_cast<size_t>(pos);
  size_t hi = std::min(lo + 1, q.size() - 1);
  double f = pos - static_cast<double>(lo);
  return static_cast<float>(q[lo] * (1 - f) + q[hi] * f);
}

int64_t QuantileGrid::CountToBound(double p) {
  int64_t n = 1;
  while (std::ceil(static_cast<double>(n + 1) * p) > static_cast<double>(n)) ++n;
  return n;
}

double QuantileGrid::ShareAtLeast(float x) const {
  if (q.empty()) return 0;
  auto it = std::lower_bound(q.begin(), q.end(), x);
  return static_cast<double>(q.end() - it) / static_cast<double>(q.size());
}

double QuantileGrid::ShareAbove(float x) const {
  if (q.empty()) return 0;
  auto it = std::upper_bound(q.begin(), q.end(), x);
  return static_cast<double>(q.end() - it) / static_cast<double>(q.size());
}

namespace {
constexpr int64_t kMinGroupScores = 100;
}  // namespace

int HistoryGroup(const float* features, Target t) {
  static const std::array<size_t, kNumTargets + 1> columns = [] {
    const auto& names = Layout().names;
    auto find = [&](const std::string& name) {
      return static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
    };
    std::array<size_t, kNumTargets + 1> c{};
    for (Target x : kAllTargets) {
      c[static_cast<int>(x)] = find(fmt::format("{}.user_last", NameOf(x)));
    }
    c[kNumTargets] = find("user_jobs");
    return c;
  }();
  // No earlier value of this target for the user: group 0.
  if (std::isnan(features[columns[static_cast<int>(t)]])) return 0;
  return std::expm1(features[columns[kNumTargets]]) < 10 ? 1 : 2;
}

const char* HistoryGroupName(int group) {
  static constexpr std::array<const char*, 3> kNames = {"none", "some", "much"};
  return kNames.at(static_cast<size_t>(group));
}

const QuantileGrid& GroupGrid(const TargetModel& m, int group) {
  const QuantileGrid& g = m.group_scores[group];
  // Groups 0 and 1 count users (see TrainTarget): a few users are few, and their tails are
  // unbounded (no user at all: every quantile) rather than borrowed from the users the model
  // knows well.
  return group < 2 || g.n >= kMinGroupScores ? g : m.scores;
}

const QuantileGrid& TargetPrediction::Grid() const {
  return own_errors ? *own_errors : GroupGrid(*model, group);
}

namespace {
// The errors requests of history `group` are cut on (TargetPrediction::RequestGrid).
const QuantileGrid& RequestGroupGrid(const TargetModel& m, int group) {
  return group == 2 && m.request_scores.n >= kMinGroupScores ? m.request_scores
                                                             : GroupGrid(m, group);
}
}  // namespace

const QuantileGrid& TargetPrediction::RequestGrid() const {
  return own_errors ? *own_errors : RequestGroupGrid(*model, group);
}

double TargetPrediction::Quantile(double q) const {
  return std::exp(log_point + Grid().Quantile(q));
}

double TargetPrediction::RequestQuantile(double q) const {
  return std::exp(log_point + RequestGrid().Quantile(q));
}

size_t SuggestRiskIndex(double risk) {
  size_t i = 0;
  // A relative tolerance: a risk read back from JSON or a flag as 0.02 is the entry 0.02.
  while (i + 1 < kSuggestRisks.size() && kSuggestRisks[i + 1] <= risk * (1 + 1e-9)) ++i;
  return i;
}

double TargetPrediction::EffectiveRisk(double risk) const {
  return risk * std::exp(static_cast<double>(model->risk_log_factor[SuggestRiskIndex(risk)]));
}

namespace {
template <size_t N>
std::array<double, N> LogSpaced(double from, double to) {
  std::array<double, N> a{};
  for (size_t i = 0; i < N; ++i) {
    a[i] = from * std::pow(to / from, static_cast<double>(i) / static_cast<double>(N - 1));
  }
  return a;
}
const std::array<double, kPriceRisks> kPriceRiskTable = LogSpaced<kPriceRisks>(0.0002, 0.3);
const std::array<double, kJobRisks> kJobRiskTable = LogSpaced<kJobRisks>(0.0001, 0.5);
}  // namespace

double PriceRisk(size_t i) { return kPriceRiskTable[i]; }
double JobRisk(size_t i) { return kJobRiskTable[i]; }

namespace {

// A job's possible requests: its (1 - q) quantile at each of its own risks q = JobRisk(k), NaN
// where that is unbounded or not below the request (no cut).
using JobOptions = std::array<double, kJobRisks>;
JobOptions OptionsOf(const TargetPrediction& p) {
  JobOptions o;
  const QuantileGrid& g = p.RequestGrid();
  for (size_t k = 0; k < kJobRisks; ++k) {
    float e = g.Quantile(1 - JobRisk(k));
    double s = std::exp(p.log_point + e);
    o[k] = std::isfinite(e) && s < *p.request ? s : std::numeric_limits<double>::quiet_NaN();
  }
  return o;
}

// The request that frees the most resource-time in expectation, net of `price` per unit of
// kill probability: over the job's own risks q, weight·((1 - q)·request - s_q) - price·q, where
// s_q is its (1 - q) quantile (a job that fits frees request - s_q, one that is killed loses
// the s_q it held). The request itself (no cut) is worth 0.
double PricedRequest(const JobOptions& o, double weight, double req, double price,
                     double max_risk) {
  double best = req, best_value = 0;
  for (size_t k = 0; k < kJobRisks && JobRisk(k) <= max_risk; ++k) {
    if (std::isnan(o[k])) continue;
    double q = JobRisk(k);
    double value = weight * ((1 - q) * req - o[k]) - price * q;
    if (value > best_value) {
      best_value = value;
      best = o[k];
    }
  }
  return best;
}

// Whether the job's quantiles come from enough of its own history group's held-out errors
// (kMinGroupScores jobs, or users for groups 0 and 1) for its request to be cut at more than
// the cluster-wide risk. The older jobs' errors of group 2 (RequestGrid) do not count here:
// KillPrices holds a group to its share of the risk only from kMinTuningJobs held-out jobs.
bool OwnGrid(const TargetPrediction& p) {
  if (p.own_errors) return p.own_errors->n >= kMinGroupScores;
  return p.model->group_scores[p.group].n >= kMinGroupScores;
}
// The highest risk one job's request may be made at, for a cluster-wide `risk`. A job whose
// group had too few held-out jobs borrows every group's errors, which understate its spread
// (or, for groups 0 and 1, has a coarse grid of a few users' errors):
// it may be made safer than asked, never riskier (on wagap-2013, such jobs' priced requests
// killed 98 of 169 in one week).
double MaxJobRisk(bool own_grid, double risk) { return own_grid ? 1.0 : risk; }

// TargetModel::kill_price at a cluster-wide risk, interpolated between kPriceRisks entries.
double PriceAt(const std::vector<float>& prices, double risk) {
  double pos = std::log(risk / PriceRisk(0)) / std::log(PriceRisk(1) / PriceRisk(0));
  pos = std::clamp(pos, 0.0, static_cast<double>(prices.size() - 1));
  auto lo = static_cast<size_t>(pos);
  size_t hi = std::min(lo + 1, prices.size() - 1);
  double f = pos - static_cast<double>(lo);
  return prices[lo] * (1 - f) + prices[hi] * f;
}

// The request `p` makes at risk `r` with the strategy chosen for its history group at r's
// kSuggestRisks entry (SuggestRiskIndex) and that entry's correction, never above the request.
// A baseline's margin is one for all jobs, so it does not bound one job's risk. `options`
// caches the job's quantiles at kJobRisks across calls.
double SuggestAtEntry(const TargetPrediction& p, double r, RiskScope scope,
                      std::optional<JobOptions>* options) {
  size_t i = SuggestRiskIndex(r) + static_cast<size_t>(p.group) * kSuggestRisks.size();
  r = p.EffectiveRisk(r);
  if (!p.request) return p.RequestQuantile(1 - r);
  const TargetModel& m = *p.model;
  const auto& with = m.suggest_with;
  double s;
  if (scope == RiskScope::kCluster && i < with.size() && with[i] >= 0) {
    float bv = p.baselines[with[i]];
    float q = m.baseline_log_ratio[with[i]].Quantile(1 - r);
    s = std::isfinite(bv) && bv > 0 && std::isfinite(q) ? bv * std::exp(q) : *p.request;
  } else if (!m.kill_price.empty()) {
    if (!*options) *options = OptionsOf(p);
    s = PricedRequest(**options, p.weight, *p.request, PriceAt(m.kill_price, r),
                      scope == RiskScope::kJob ? r : MaxJobRisk(OwnGrid(p), r));
  } else {
    s = p.RequestQuantile(1 - r);
  }
  return std::isfinite(s) ? std::min(*p.request, s) : *p.request;
}

}  // namespace

// Never less than what a higher entry asks for: each entry's strategy and correction are
// chosen apart, and a user who allows more risk must not be told to ask for more (on HPC2N's
// replay 8 % of jobs were, up to 875 times more). Between entries the request falls with the
// risk (one strategy, one correction, kill prices falling with the risk), so this makes it
// monotone everywhere, and taking the larger request keeps each risk's kills within what its
// own strategy killed.
double TargetPrediction::Suggest(double risk, RiskScope scope, double* used) const {
  std::optional<JobOptions> options;
  double s = SuggestAtEntry(*this, risk, scope, &options);
  if (used != nullptr) *used = EffectiveRisk(risk);
  for (double r : kSuggestRisks) {
    if (r <= risk) continue;
    double higher = SuggestAtEntry(*this, r, scope, &options);
    if (higher > s) {
      s = higher;
      if (used != nullptr) *used = std::min(*used, EffectiveRisk(r));
    }
  }
  return s;
}

std::array<float, kSuggestRisks.size()> CorrectRisks(const TargetModel& prev, const Dataset& d,
                                                     const std::vector<size_t>& rows) {
  std::array<float, kSuggestRisks.size()> f = prev.risk_log_factor;
  std::vector<TargetPrediction> preds;
  if (rows.empty() || !PredictTargetRows(prev, d, rows, &preds).ok()) return f;
  int ti = static_cast<int>(prev.target);
  std::array<double, kSuggestRisks.size()> sum{};
  std::array<double, kSuggestRisks.size()> jobs{};
  for (size_t k = 0; k < rows.size(); ++k) {
    const TargetPrediction& p = preds[k];
    if (!p.request) continue;
    double y = d.y[ti][rows[k]];
    // Suggest at each entry: the entries' own requests, each at least the next higher one's.
    std::optional<JobOptions> options;
    std::array<double, kSuggestRisks.size()> at{};
    for (size_t i = kSuggestRisks.size(); i-- > 0;) {
      at[i] = SuggestAtEntry(p, kSuggestRisks[i], RiskScope::kCluster, &options);
      if (i + 1 < kSuggestRisks.size()) at[i] = std::max(at[i], at[i + 1]);
    }
    for (size_t i = 0; i < kSuggestRisks.size(); ++i) {
      double s = at[i];
      bool killed = y > s && s < *p.request;
      sum[i] += kSuggestRisks[i] - (killed ? 1 : 0);
      ++jobs[i];
    }
  }
  for (size_t i = 0; i < f.size(); ++i) {
    // The jobs of one batch were judged by one model's suggestions: together they count as at
    // most kRiskBatchKills expected kills, or one busy hour would swing the factor on noise.
    double expected = kSuggestRisks[i] * jobs[i];
    double weight = expected > kRiskBatchKills ? kRiskBatchKills / expected : 1.0;
    double v = static_cast<double>(f[i]) + kRiskStep * weight * sum[i];
    f[i] = static_cast<float>(std::clamp(v, std::log(kRiskFactorMin), std::log(kRiskFactorMax)));
  }
  return f;
}

double TargetPrediction::ProbTooSmall(double amount) const {
  if (target == Target::kCpuCores && request && amount >= *request) {
    // No job keeps more cores busy than it holds, so the errors' tail above the request is the
    // model's doubt, not a need: what says a job needed more is how many recent jobs kept
    // busier than their request, beyond the few percent CPU time is counted above the wall
    // clock (HPC2N: 13 % of jobs up to 1 % above, 0.5 % beyond 5 %).
    constexpr double kCpuTimeNoise = 1.05;
    const QuantileGrid& g = model->baseline_log_ratio[static_cast<int>(Baseline::kRequest)];
    return g.ShareAbove(static_cast<float>(std::log(kCpuTimeNoise * amount / *request)));
  }
  auto s = static_cast<float>(std::log(std::max(amount, InfoOf(target).floor)) - log_point);
  return RequestGrid().ShareAtLeast(s);
}

namespace {

// A held-out job, for KillPrices.
struct PricedJob {
  JobOptions options;
  double weight, request, y;
  int group;
  bool own_grid;
  size_t held_out;  // its index among the held-out jobs
};

// TargetModel::kill_price from held-out jobs: at each kPriceRisks entry r, the lowest price at
// which the priced requests killed at most r·(n + 1) - 1 of all n (split conformal prediction's
// finite-sample count, as QuantileGrid::Quantile keeps for a quantile: on HPC2N's replay the
// requests at 0.5 % killed 0.9 % without it, 0 with it), and no more than a share r of each
// history group with enough jobs to tell (a group whose errors the shared quantiles understate
// must not take the whole budget; the finite-sample count there would let a group's one or two
// expected kills forbid every cut: CTC-SP2 at 0.5 % freed 3.7 % instead of 8.2 %). Empty when
// there are too few jobs.
std::vector<float> KillPrices(const std::vector<PricedJob>& jobs) {
  std::vector<float> prices;
  if (jobs.size() < kMinTuningJobs) return prices;
  std::vector<double> sizes;
  for (const PricedJob& h : jobs) sizes.push_back(h.weight * h.request);
  auto mid = sizes.begin() + static_cast<std::ptrdiff_t>(sizes.size() / 2);
  std::nth_element(sizes.begin(), mid, sizes.end());
  double scale = std::max(*mid, 1e-9);
  // From 0 up through 10 decades around the median job's requested resource-time; the kills
  // fall as the price rises, so the lowest price within a risk is found by bisection.
  constexpr int kPrices = 128;
  auto price = [&](int j) {
    return j == 0 ? 0.0 : scale * std::pow(10.0, -4.0 + 10.0 * (j - 1) / (kPrices - 1));
  };
  for (size_t i = 0; i < kPriceRisks; ++i) {
    double risk = PriceRisk(i);
    auto within = [&](int j) {
      std::array<size_t, 3> kills{}, n{};
      double pj = price(j);
      for (const PricedJob& h : jobs) {
        double s = PricedRequest(h.options, h.weight, h.request, pj, MaxJobRisk(h.own_grid, risk));
        kills[h.group] += h.y > s && s < h.request ? 1 : 0;
        ++n[h.group];
      }
      for (int g = 0; g < 3; ++g) {
        if (n[g] >= kMinTuningJobs &&
            static_cast<double>(kills[g]) > risk * static_cast<double>(n[g])) {
          return false;
        }
      }
      double all = static_cast<double>(kills[0] + kills[1] + kills[2]);
      return all <= risk * (static_cast<double>(jobs.size()) + 1) - 1;
    };
    int lo = 0, hi = kPrices;  // the answer is in [lo, hi]; kPrices: the highest price tried
    while (lo < hi) {
      int j = (lo + hi) / 2;
      if (within(j)) {
        hi = j;
      } else {
        lo = j + 1;
      }
    }
    // A higher risk never prices a kill higher (Suggest's requests fall with the risk between
    // two tuned entries): the bisections are separate, so say it rather than rely on it.
    double p = price(lo);
    if (!prices.empty()) p = std::min(p, static_cast<double>(prices.back()));
    prices.push_back(static_cast<float>(p));
  }
  return prices;
}

}  // namespace

std::optional<BaselineScore> BestBaseline(const Dataset& d, Target t,
                                          const std::vector<size_t>& rows) {
  int ti = static_cast<int>(t);
  std::optional<BaselineScore> best;
  for (Baseline b : kAllBaselines) {
    if (!IsBaselineOf(b, t)) continue;
    BaselineScore s{b, {}};
    size_t missing = 0;
    for (size_t r : rows) {
      float bv = d.baseline[ti][r][static_cast<int>(b)];
      if (!std::isfinite(bv)) {
        ++missing;
        continue;
      }
      s.errors.Add(bv, d.y[ti][r]);
    }
    if (missing * 10 > rows.size() || s.errors.n == 0) continue;
    if (!best || s.errors.mae() < best->errors.mae()) best = s;
  }
  return best;
}

Baseline FallbackBaseline(const Dataset& d, Target t, const std::vector<size_t>& rows) {
  int ti = static_cast<int>(t);
  std::vector<size_t> measured;
  for (size_t r : rows) {
    if (!std::isnan(d.y[ti][r])) measured.push_back(r);
  }
  if (measured.size() < kMinFallbackJobs) return Baseline::kLast2;
  auto best = BestBaseline(d, t, measured);
  return best ? best->baseline : Baseline::kLast2;
}

namespace {

// One target's training, phase by phase (TrainTarget). `rows` are the training window's rows
// with a value, oldest first; the newest `n_cal` are held out for calibration.
class TargetTrainer {
 public:
  TargetTrainer(const Dataset& d, Target t, std::vector<size_t> rows, const TrainOptions& options)
      : d_(d),
        t_(t),
        ti_(static_cast<int>(t)),
        y_(d.y[ti_]),
        req_(d.req[ti_]),
        base_(d.baseline[ti_]),
        rows_(std::move(rows)),
        options_(options) {}

  StatusOr<TargetModel> Train();

 private:
  Status FitMedian();
  // The shipped point of held-out job k: the trees blended with baseline `b` at weight `w`.
  double Point(size_t k, float w, int b) const {
    size_t r = rows_[n_tr_ + k];
    return Cap(std::exp(Blend(med_cal_[k], w, base_[r][b], t_)), req_[r]);
  }
  double ShippedPoint(size_t k) const {
    return Point(k, m_.blend_weight, static_cast<int>(m_.blend_baseline));
  }
  bool TreesWin(int best_b) const;
  void ChooseBlend();
  // The shipped point's log error on training row r, given the residual `med` that trees which
  // never saw the row predicted there (the borrowed new users' errors and request_scores).
  float UnseenError(size_t r, float med) const {
    double lp = Blend(med + Offset(d_.anchor[ti_][r], t_, m_.default_offset), m_.blend_weight,
                      base_[r][static_cast<int>(m_.blend_baseline)], t_);
    return static_cast<float>(LogOf(y_[r], t_) - LogOf(Cap(std::exp(lp), req_[r]), t_));
  }
  void BorrowUnseenUsers();
  std::vector<float> RequestErrors() const;
  void Intervals();
  void BaselineRatios();
  std::vector<PricedJob> PriceHeldOut() const;
  void ChooseSuggestions(const std::vector<PricedJob>& priced);

  const Dataset& d_;
  const Target t_;
  const int ti_;
  const std::vector<float>& y_;
  const std::vector<float>& req_;
  const decltype(Dataset::baseline)::value_type& base_;
  std::vector<size_t> rows_;
  const TrainOptions& options_;
  size_t n_ = 0, n_cal_ = 0, n_tr_ = 0;
  TargetModel m_;
  std::vector<float> x_, labels_, med_cal_;
  // Calibration errors: all held-out jobs', those of users with many past jobs, and per user
  // those of users with none or a few (groups 0 and 1).
  std::vector<float> scores_, many_;
  std::array<std::vector<std::pair<float, uint32_t>>, 2> few_;  // (error, user)
};

StatusOr<TargetModel> TargetTrainer::Train() {
  std::erase_if(rows_, [&](size_t r) { return std::isnan(y_[r]); });
  if (rows_.size() > options_.max_rows) {
    rows_.erase(rows_.begin(), rows_.end() - static_cast<std::ptrdiff_t>(options_.max_rows));
  }
  if (rows_.size() < options_.min_rows) {
    return Status::NotFound(fmt::format("{}: {} jobs with a value, {} needed to train", NameOf(t_),
                                        rows_.size(), options_.min_rows));
  }
  m_.target = t_;
  m_.columns = Layout().ColumnsFor(t_);
  n_ = rows_.size();
  n_cal_ = std::max<size_t>(20, static_cast<size_t>(std::llround(static_cast<double>(n_) *
                                                                 options_.calibration_fraction)));
  n_tr_ = n_ - n_cal_;
  RS_RETURN_IF_ERROR(FitMedian());
  ChooseBlend();
  Intervals();
  BaselineRatios();
  // The held-out jobs with a request as predicted: for the price of a kill (KillPrices) and
  // the choice of how to turn the distribution into a request.
  std::vector<PricedJob> priced = PriceHeldOut();
  m_.kill_price = KillPrices(priced);
  ChooseSuggestions(priced);
  m_.trained_rows = static_cast<int64_t>(n_tr_);
  m_.calibration_rows = static_cast<int64_t>(n_cal_);
  return std::move(m_);
}

// The median trees on the training rows' log residuals from their anchors, and their
// predictions on the held-out newest jobs.
Status TargetTrainer::FitMedian() {
  labels_.resize(n_tr_);
  Gather(d_, rows_, 0, n_tr_, m_.columns, &x_);
  {
    std::vector<float> logs(n_tr_);
    for (size_t k = 0; k < n_tr_; ++k) logs[k] = LogOf(y_[rows_[k]], t_);
    std::nth_element(logs.begin(), logs.begin() + static_cast<std::ptrdiff_t>(n_tr_ / 2),
                     logs.end());
    m_.default_offset = logs[n_tr_ / 2];
  }
  for (size_t k = 0; k < n_tr_; ++k) {
    labels_[k] = LogOf(y_[rows_[k]], t_) - Offset(d_.anchor[ti_][rows_[k]], t_, m_.default_offset);
  }
  RS_ASSIGN_OR_RETURN(m_.median, Booster::Train(x_, m_.columns.size(), labels_, options_.median));
  // Calibration on the held-out newest jobs.
  Gather(d_, rows_, n_tr_, n_, m_.columns, &x_);
  RS_RETURN_IF_ERROR(m_.median.Predict(x_.data(), n_cal_, m_.columns.size(), &med_cal_));
  for (size_t k = 0; k < n_cal_; ++k) {
    med_cal_[k] += Offset(d_.anchor[ti_][rows_[n_tr_ + k]], t_, m_.default_offset);
  }
  return Status::Ok();
}

// Blend only where the trees alone lose to a baseline on the held-out jobs by more than
// chance: the paired difference in absolute error (or in AEA) must exceed two standard errors.
// A blend chosen on noise made a 3,000-job trace worse, not better.
bool TargetTrainer::TreesWin(int best_b) const {
  if (best_b < 0) return true;
  bool trees_win = true;
  for (Baseline b : kAllBaselines) {
    if (!IsBaselineOf(b, t_)) continue;
    double sum_abs = 0, sq_abs = 0, sum_aea = 0, sq_aea = 0;
    int64_t n_b = 0;
    for (size_t k = 0; k < n_cal_; ++k) {
      size_t r = rows_[n_tr_ + k];
      float bv = base_[r][static_cast<int>(b)];
      if (!std::isfinite(bv)) continue;
      double p = Point(k, 1, 0), yy = y_[r];
      double da = std::abs(p - yy) - std::abs(bv - yy);
      double de = AgreementRatio(bv, yy) - AgreementRatio(p, yy);
      sum_abs += da;
      sq_abs += da * da;
      sum_aea += de;
      sq_aea += de * de;
      ++n_b;
    }
    if (n_b < static_cast<int64_t>(kMinPairedJobs)) continue;
    auto worse = [n_b](double sum, double sq) {
      double nn = static_cast<double>(n_b), mean = sum / nn;
      double var = std::max(0.0, sq / nn - mean * mean);
      return mean > 2 * std::sqrt(var / nn);
    };
    if (worse(sum_abs, sq_abs) || worse(sum_aea, sq_aea)) trees_win = false;
  }
  return trees_win;
}

// The best baseline on the held-out jobs, then the blend weight.
void TargetTrainer::ChooseBlend() {
  std::vector<size_t> held_out(rows_.begin() + static_cast<std::ptrdiff_t>(n_tr_), rows_.end());
  auto best = BestBaseline(d_, t_, held_out);
  int best_b = best ? static_cast<int>(best->baseline) : -1;
  double best_b_mae = best ? best->errors.mae() : std::numeric_limits<double>::infinity();
  double best_b_aea = best ? best->errors.aea() : 0;
  m_.calibration_baseline_mae = best_b < 0 ? 0 : best_b_mae;
  bool trees_win = TreesWin(best_b);
  double best_score = std::numeric_limits<double>::infinity();
  for (float w : kBlendWeights) {
    if (trees_win && w < 1) break;
    if (best_b < 0 && w < 1) continue;
    PointErrors e;
    for (size_t k = 0; k < n_cal_; ++k) {
      e.Add(Point(k, w, std::max(best_b, 0)), y_[rows_[n_tr_ + k]]);
    }
    // MAE and AEA weigh equally, each relative to the best baseline.
    double score =
        best_b < 0 ? e.mae()
                   : e.mae() / std::max(best_b_mae, 1e-9) + best_b_aea / std::max(e.aea(), 1e-9);
    if (score < best_score - 1e-9) {
      best_score = score;
      m_.blend_weight = w;
      m_.blend_baseline = static_cast<Baseline>(std::max(best_b, 0));
      m_.calibration_mae = e.mae();
    }
  }
}

// A group whose held-out jobs come from fewer users than bound a 95 % interval (39) takes in
// the group's older jobs too, each predicted by trees that never saw its user: otherwise a
// cluster with few new users in its newest jobs gives every new user unbounded intervals.
void TargetTrainer::BorrowUnseenUsers() {
  std::array<bool, 2> borrow{};
  for (int g = 0; g < 2; ++g) {
    std::unordered_map<uint32_t, int> users;
    for (const auto& [e, u] : few_[g]) ++users[u];
    borrow[g] = static_cast<int64_t>(users.size()) < QuantileGrid::CountToBound(0.975);
  }
  if (!borrow[0] && !borrow[1]) return;
  std::vector<bool> want(n_tr_);
  std::vector<int> group(n_tr_);
  for (size_t k = 0; k < n_tr_; ++k) {
    group[k] = HistoryGroup(d_.row(rows_[k]), t_);
    want[k] = group[k] < 2 && borrow[group[k]];
  }
  std::vector<float> med;
  UnseenUserPredictions(d_, rows_, n_tr_, m_.columns, labels_, options_.median, want, &med);
  for (size_t k = 0; k < n_tr_; ++k) {
    if (!want[k] || std::isnan(med[k])) continue;
    size_t r = rows_[k];
    float e = UnseenError(r, med[k]);
    if (std::isfinite(e)) few_[group[k]].emplace_back(e, d_.user[r]);
  }
}

// The requests' errors of users with many past jobs (TargetModel::request_scores): the held-out
// ones, and the training window's in `request_blocks` blocks, each block's jobs predicted by
// trees trained on the blocks before it, so that each error is one of trees that had not seen
// the job, as the next job's will be. The first block has no past.
std::vector<float> TargetTrainer::RequestErrors() const {
  std::vector<float> request_errors = many_;
  const size_t blocks = options_.request_blocks;
  std::vector<float> fit_x, fit_pred;
  for (size_t b = 1; b < blocks; ++b) {
    size_t lo = n_tr_ * b / blocks, hi = n_tr_ * (b + 1) / blocks;
    if (lo < options_.min_rows || hi <= lo) continue;
    Gather(d_, rows_, 0, lo, m_.columns, &fit_x);
    auto trees = Booster::Train(
        fit_x, m_.columns.size(),
        std::vector<float>(labels_.begin(), labels_.begin() + static_cast<std::ptrdiff_t>(lo)),
        options_.median);
    if (!trees.ok()) continue;
    Gather(d_, rows_, lo, hi, m_.columns, &fit_x);
    if (!trees->Predict(fit_x.data(), hi - lo, m_.columns.size(), &fit_pred).ok()) continue;
    for (size_t k = lo; k < hi; ++k) {
      size_t r = rows_[k];
      if (HistoryGroup(d_.row(r), t_) != 2) continue;
      float e = UnseenError(r, fit_pred[k - lo]);
      if (std::isfinite(e)) request_errors.push_back(e);
    }
  }
  return request_errors;
}

// The errors of users with no or few past jobs (groups 0 and 1) are weighed per user, each user
// 1 in all, and counted as one each: a new user's burst of 200 jobs misses together, and what
// the next job asks is how wrong the model is on a new user, not on a new job (conformal
// prediction for two-layer hierarchical data: Dunn, Wasserman and Ramdas 2022). Counted per
// job, the woody replay's new users' 80 % intervals held 2 % of their jobs.
void TargetTrainer::Intervals() {
  scores_.resize(n_cal_);
  for (size_t k = 0; k < n_cal_; ++k) {
    size_t r = rows_[n_tr_ + k];
    scores_[k] = LogOf(y_[r], t_) - LogOf(ShippedPoint(k), t_);
    int g = HistoryGroup(d_.row(r), t_);
    if (g == 2) {
      many_.push_back(scores_[k]);
    } else if (std::isfinite(scores_[k])) {
      few_[g].emplace_back(scores_[k], d_.user[r]);
    }
  }
  BorrowUnseenUsers();
  m_.request_scores = QuantileGrid::From(RequestErrors());
  for (int g = 0; g < 2; ++g) {
    std::unordered_map<uint32_t, int> per_user;
    for (const auto& [e, u] : few_[g]) ++per_user[u];
    std::vector<std::pair<float, double>> weighted;
    weighted.reserve(few_[g].size());
    for (const auto& [e, u] : few_[g]) weighted.emplace_back(e, 1.0 / per_user[u]);
    m_.group_scores[g] =
        QuantileGrid::FromWeighted(std::move(weighted), static_cast<int64_t>(per_user.size()));
  }
  m_.scores = QuantileGrid::From(std::move(scores_));
  m_.group_scores[2] = QuantileGrid::From(std::move(many_));
}

void TargetTrainer::BaselineRatios() {
  for (Baseline b : kAllBaselines) {
    std::vector<float> ratios;
    ratios.reserve(n_);
    for (size_t r : rows_) {
      float bv = base_[r][static_cast<int>(b)];
      if (std::isfinite(bv) && bv > 0) ratios.push_back(LogOf(y_[r], t_) - LogOf(bv, t_));
    }
    m_.baseline_log_ratio[static_cast<int>(b)] = QuantileGrid::From(std::move(ratios));
  }
}

std::vector<PricedJob> TargetTrainer::PriceHeldOut() const {
  std::vector<PricedJob> priced;
  for (size_t k = 0; k < n_cal_; ++k) {
    size_t r = rows_[n_tr_ + k];
    if (std::isnan(req_[r])) continue;
    TargetPrediction p;
    p.model = &m_;
    p.request = req_[r];
    p.group = HistoryGroup(d_.row(r), t_);
    p.log_point = LogOf(ShippedPoint(k), t_);
    priced.push_back(
        {OptionsOf(p), d_.SubmitWeight(r, t_), req_[r], y_[r], p.group, OwnGrid(p), k});
  }
  return priced;
}

// How to turn the distribution into a request at each kill risk, per history group (as the
// intervals are): the model's own quantile, or a baseline times its margin, whichever freed the
// most resource-time (net of the jobs it would have killed) on the group's held-out jobs —
// among those that killed no more than the risk there. The margins are global, so a baseline
// chosen on every group at once served users with few past jobs badly: on CTC-SP2 it killed
// 11 % of them at a 5 % risk.
void TargetTrainer::ChooseSuggestions(const std::vector<PricedJob>& priced) {
  for (int grp = 0; grp < 3; ++grp) {
    std::vector<const PricedJob*> mine;
    for (const PricedJob& h : priced) {
      if (h.group == grp) mine.push_back(&h);
    }
    const QuantileGrid& g = RequestGroupGrid(m_, grp);
    for (double risk : kSuggestRisks) {
      std::array<double, kNumBaselines + 1> freed{};
      std::array<size_t, kNumBaselines + 1> killed{};
      for (const PricedJob* h : mine) {
        size_t r = rows_[n_tr_ + h->held_out];
        double p = ShippedPoint(h->held_out);
        for (int c = 0; c <= kNumBaselines; ++c) {
          double sug = req_[r];
          if (c == 0 && !m_.kill_price.empty()) {
            sug = PricedRequest(h->options, h->weight, h->request, PriceAt(m_.kill_price, risk),
                                MaxJobRisk(h->own_grid, risk));
          } else if (c == 0) {
            float q = g.Quantile(1 - risk);
            if (std::isfinite(q)) sug = p * std::exp(q);
          } else {
            float bv = base_[r][c - 1];
            float q = m_.baseline_log_ratio[c - 1].Quantile(1 - risk);
            if (std::isfinite(bv) && bv > 0 && std::isfinite(q)) sug = bv * std::exp(q);
          }
          sug = std::min<double>(sug, req_[r]);
          double w = d_.Weight(r, t_);
          bool kill = y_[r] > sug && sug < req_[r];
          freed[c] += kill ? -sug * w : (req_[r] - sug) * w;
          killed[c] += kill ? 1 : 0;
        }
      }
      int best = 0;
      for (int c = 1; c <= kNumBaselines && mine.size() >= kMinTuningJobs; ++c) {
        bool within = static_cast<double>(killed[c]) <= risk * static_cast<double>(mine.size());
        if (within && freed[c] > freed[best]) best = c;
      }
      m_.suggest_with.push_back(best - 1);
    }
  }
}

}  // namespace

StatusOr<TargetModel> TrainTarget(const Dataset& d, Target t, std::vector<size_t> rows,
                                  const TrainOptions& options) {
  return TargetTrainer(d, t, std::move(rows), options).Train();
}

namespace {

TargetPrediction Finish(const TargetModel& m, float med, int group,
                        const std::array<float, kNumBaselines>& baselines, float anchor,
                        std::optional<double> request, double weight) {
  TargetPrediction p;
  p.target = m.target;
  p.model = &m;
  p.request = request;
  p.weight = weight;
  p.baselines = baselines;
  med += Offset(anchor, m.target, m.default_offset);
  p.learned = std::exp(static_cast<double>(med));
  p.point =
      std::exp(Blend(med, m.blend_weight, baselines[static_cast<int>(m.blend_baseline)], m.target));
  if (request) {
    p.point = std::min(p.point, *request);
    p.learned = std::min(p.learned, *request);
  }
  p.log_point = LogOf(p.point, m.target);
  p.group = group;
  return p;
}

}  // namespace

StatusOr<TargetPrediction> PredictTarget(const TargetModel& m, const float* features,
                                         const std::array<float, kNumBaselines>& baselines,
                                         float anchor, std::optional<double> request,
                                         double weight) {
  float row[512];
  if (m.columns.size() > 512) return Status::Internal("too many feature columns");
  for (size_t k = 0; k < m.columns.size(); ++k) row[k] = features[m.columns[k]];
  RS_ASSIGN_OR_RETURN(float med, m.median.PredictOne(row, m.columns.size()));
  return Finish(m, med, HistoryGroup(features, m.target), baselines, anchor, request, weight);
}

Status PredictTargetRows(const TargetModel& m, const Dataset& d, const std::vector<size_t>& rows,
                         std::vector<TargetPrediction>* out) {
  out->clear();
  if (rows.empty()) return Status::Ok();
  std::vector<float> x, med;
  Gather(d, rows, 0, rows.size(), m.columns, &x);
  RS_RETURN_IF_ERROR(m.median.Predict(x.data(), rows.size(), m.columns.size(), &med));
  int ti = static_cast<int>(m.target);
  out->reserve(rows.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    float r = d.req[ti][rows[k]];
    out->push_back(Finish(m, med[k], HistoryGroup(d.row(rows[k]), m.target),
                          d.baseline[ti][rows[k]], d.anchor[ti][rows[k]],
                          std::isnan(r) ? std::nullopt : std::optional<double>(r),
                          d.SubmitWeight(rows[k], m.target)));
  }
  return Status::Ok();
}

namespace {

nlohmann::json GridJson(const QuantileGrid& g) { return {{"n", g.n}, {"q", g.q}}; }
QuantileGrid GridFrom(const nlohmann::json& j) {
  QuantileGrid g;
  g.n = j.at("n").get<int64_t>();
  g.q = j.at("q").get<std::vector<float>>();
  return g;
}

constexpr int kFormatVersion = 1;

}  // namespace

std::string ModelSet::Serialize() const {
  nlohmann::json j;
  j["format"] = kFormatVersion;
  j["cluster"] = cluster;
  j["version"] = version;
  j["trained_at"] = trained_at;
  j["jobs"] = jobs;
  j["trained_through"] = trained_through;
  j["total_cpus"] = context.total_cpus;
  j["default_partition"] = context.default_partition;
  nlohmann::json parts = nlohmann::json::object();
  for (const auto& [name, n] : context.partitions) {
    parts[name] = {{"cpus", n.cpus},
                   {"memory_bytes", n.memory_bytes},
                   {"gpus", n.gpus},
                   {"gpu_type", n.gpu_type}};
  }
  j["partitions"] = std::move(parts);
  j["global_median"] = global_median;
  j["features"] = Layout().names;
  nlohmann::json targets = nlohmann::json::array();
  for (const auto& [t, m] : this->targets) {
    nlohmann::json tj;
    tj["target"] = NameOf(t);
    tj["columns"] = m.columns;
    auto median = m.median.Serialize();
    if (!median.ok()) continue;
    tj["median"] = nlohmann::json::binary_t(std::vector<uint8_t>(median->begin(), median->end()));
    tj["scores"] = GridJson(m.scores);
    tj["group_scores"] = {GridJson(m.group_scores[0]), GridJson(m.group_scores[1]),
                          GridJson(m.group_scores[2])};
    tj["default_offset"] = m.default_offset;
    tj["suggest_with"] = m.suggest_with;
    tj["risk_log_factor"] = m.risk_log_factor;
    tj["kill_price"] = m.kill_price;
    tj["request_scores"] = GridJson(m.request_scores);
    tj["blend_weight"] = m.blend_weight;
    tj["blend_baseline"] = NameOf(m.blend_baseline);
    nlohmann::json ratios = nlohmann::json::object();
    for (Baseline b : kAllBaselines) {
      ratios[std::string(NameOf(b))] = GridJson(m.baseline_log_ratio[static_cast<int>(b)]);
    }
    tj["baseline_log_ratio"] = ratios;
    tj["trained_rows"] = m.trained_rows;
    tj["calibration_rows"] = m.calibration_rows;
    tj["calibration_mae"] = m.calibration_mae;
    tj["calibration_baseline_mae"] = m.calibration_baseline_mae;
    targets.push_back(std::move(tj));
  }
  j["targets"] = std::move(targets);
  nlohmann::json fallback = nlohmann::json::object();
  for (const auto& [t, b] : this->fallback) fallback[std::string(NameOf(t))] = NameOf(b);
  j["fallback"] = std::move(fallback);
  auto bytes = nlohmann::json::to_cbor(j);
  return {bytes.begin(), bytes.end()};
}

StatusOr<ModelSet> ModelSet::Deserialize(const std::string& bytes) {
  nlohmann::json j = nlohmann::json::from_cbor(bytes, true, false);
  if (j.is_discarded() || !j.is_object()) return Status::BadInput("model: not a rightsize model");
  try {
    if (j.at("format").get<int>() != kFormatVersion) {
      return Status::BadInput(
          fmt::format("model: format {} is not {}: retrain with `rightsize train`",
                      j.at("format").get<int>(), kFormatVersion));
    }
    if (j.at("features").get<std::vector<std::string>>() != Layout().names) {
      return Status::BadInput(
          "model: built for other features (an older rightsize): retrain with `rightsize train`");
    }
    ModelSet s;
    s.cluster = j.at("cluster").get<std::string>();
    s.version = j.at("version").get<int64_t>();
    s.trained_at = j.at("trained_at").get<int64_t>();
    s.jobs = j.at("jobs").get<int64_t>();
    s.trained_through = j.value("trained_through", s.trained_at);
    s.context.total_cpus = j.at("total_cpus").get<double>();
    s.context.default_partition = j.value("default_partition", std::string());
    if (auto it = j.find("partitions"); it != j.end() && it->is_object()) {
      for (const auto& [name, pj] : it->items()) {
        NodeShape& n = s.context.partitions[name];
        n.cpus = pj.value("cpus", 0.0);
        n.memory_bytes = pj.value("memory_bytes", 0.0);
        n.gpus = pj.value("gpus", 0.0);
        n.gpu_type = pj.value("gpu_type", std::string());
      }
    }
    s.global_median = j.at("global_median").get<std::array<float, kNumTargets>>();
    for (const auto& tj : j.at("targets")) {
      auto t = TargetFromName(tj.at("target").get<std::string>());
      if (!t) continue;
      TargetModel m;
      m.target = *t;
      m.columns = tj.at("columns").get<std::vector<int>>();
      const auto& med = tj.at("median").get_binary();
      RS_ASSIGN_OR_RETURN(m.median, Booster::Deserialize(std::string_view(
                                        reinterpret_cast<const char*>(med.data()), med.size())));
      m.scores = GridFrom(tj.at("scores"));
      for (int g = 0; g < 3; ++g) m.group_scores[g] = GridFrom(tj.at("group_scores").at(g));
      m.default_offset = tj.at("default_offset").get<float>();
      m.suggest_with = tj.at("suggest_with").get<std::vector<int>>();
      // Models stored before the risk correction existed have none.
      if (auto it = tj.find("risk_log_factor"); it != tj.end()) {
        m.risk_log_factor = it->get<std::array<float, kSuggestRisks.size()>>();
      }
      // Nor a price of a kill: each of their requests is made at the risk asked for.
      if (auto it = tj.find("kill_price"); it != tj.end()) {
        m.kill_price = it->get<std::vector<float>>();
        if (m.kill_price.size() != kPriceRisks) m.kill_price.clear();
      }
      // Nor requests' errors of their own: theirs are cut on the intervals' errors.
      if (auto it = tj.find("request_scores"); it != tj.end()) m.request_scores = GridFrom(*it);
      m.blend_weight = tj.at("blend_weight").get<float>();
      std::string bb = tj.at("blend_baseline").get<std::string>();
      for (Baseline b : kAllBaselines) {
        if (NameOf(b) == bb) m.blend_baseline = b;
        m.baseline_log_ratio[static_cast<int>(b)] =
            GridFrom(tj.at("baseline_log_ratio").at(std::string(NameOf(b))));
      }
      m.trained_rows = tj.at("trained_rows").get<int64_t>();
      m.calibration_rows = tj.at("calibration_rows").get<int64_t>();
      m.calibration_mae = tj.at("calibration_mae").get<double>();
      m.calibration_baseline_mae = tj.at("calibration_baseline_mae").get<double>();
      s.targets.emplace(*t, std::move(m));
    }
    // Models stored before the fallback was chosen have none: last-two, as they answered.
    if (auto it = j.find("fallback"); it != j.end() && it->is_object()) {
      for (const auto& [name, bj] : it->items()) {
        auto t = TargetFromName(name);
        if (!t) continue;
        std::string bn = bj.get<std::string>();
        for (Baseline b : kAllBaselines) {
          if (NameOf(b) == bn) s.fallback[*t] = b;
        }
      }
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    return Status::BadInput(fmt::format("model: {}", e.what()));
  }
}

}  // namespace rightsize
