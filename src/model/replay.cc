#include "model/replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "core/mutex.h"

namespace rightsize {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

nlohmann::json Json(const PointErrors& e) {
  return {{"n", e.n},
          {"mae", e.mae()},
          {"aea", e.aea()},
          {"underestimation", e.share(static_cast<double>(e.under))},
          {"log_mae", e.share(e.log_abs_sum)}};
}

// Net resource-time a set of suggested requests frees, as a share of what was requested: a
// job that fits keeps (request - suggestion) free; a job that would have been killed loses
// what it held until then (suggestion), since it must run again.
struct SavingStats {
  double requested = 0, freed = 0, lost = 0;
  int64_t n = 0, killed = 0;
  void Add(double req, double suggestion, double y, double weight) {
    if (!std::isfinite(suggestion)) suggestion = req;
    suggestion = std::min(suggestion, req);
    requested += req * weight;
    ++n;
    if (y > suggestion && suggestion < req) {
      ++killed;
      lost += suggestion * weight;
    } else {
      freed += (req - suggestion) * weight;
    }
  }
  double saved() const { return requested > 0 ? (freed - lost) / requested : 0; }
  double killed_share() const {
    return n > 0 ? static_cast<double>(killed) / static_cast<double>(n) : 0;
  }
};

double Pinball(double y, double pred, double q) {
  return y >= pred ? q * (y - pred) : (1 - q) * (pred - y);
}

// The risks of the model's whole saving curve (saved against killed), denser than the
// document's risks so that it can be read at any baseline's killed share.
constexpr std::array<double, 12> kCurveRisks = {0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015,
                                                0.02,  0.03,   0.05,  0.075,  0.1,  0.15};

struct TargetEval {
  Target t;
  std::vector<size_t> rows;  // scored rows of this target
  PointErrors model, learned;
  std::array<PointErrors, kNumBaselines> baseline;
  double pinball = 0;
  int64_t pinball_n = 0;  // jobs with bounded p10 and p90 (an unbounded one has no finite loss)
  // Scored jobs answered before a model existed, per baseline that answered them.
  std::array<int64_t, kNumBaselines> fallback_by{};
  // Per history group (HistoryGroup), the jobs with an interval and those it covered: a new
  // user's intervals must hold too.
  std::array<int64_t, 3> group_n{}, group80{}, group95{};
  std::vector<SavingStats> model_saving;
  std::vector<SavingStats> model_curve;  // at kCurveRisks
  std::vector<std::array<SavingStats, kNumBaselines>> baseline_saving;
  int models_trained = 0;
  std::vector<nlohmann::json> blends;
  // The risk correction (TargetModel::risk_log_factor), carried from period to period as
  // `train` carries it from version to version: the model that scored the previous period
  // (holding the correction then in force), the end up to which its correction has counted the
  // jobs, and every row with a value and a request in the order they ended.
  std::optional<TargetModel> last;
  int64_t last_cut = 0;
  std::vector<size_t> by_end;
};

// One scored job of target `t` as `eval --jobs` writes it: what it used and asked for, the
// model's answer (`p`; null: `fallback` answered, no model yet) beside the baselines, and the
// requests the saving curve counted at `risks`.
nlohmann::ordered_json ScoredJobJson(const Dataset& d, size_t r, Target t,
                                     const std::string& job_id, const std::string& user,
                                     const TargetPrediction* p, Baseline fallback,
                                     const std::vector<double>& risks,
                                     const std::vector<double>& suggested) {
  int ti = static_cast<int>(t);
  float req = d.req[ti][r];
  const auto& base = d.baseline[ti][r];
  // An unbounded end of an interval (a quantile of 0 or infinity) is written as null.
  auto bound = [](double v) {
    return v > 0 && std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
  };
  nlohmann::ordered_json job = {{"target", NameOf(t)},    {"job_id", job_id},
                                {"user", user},           {"submit", d.submit[r]},
                                {"unit", InfoOf(t).unit}, {"actual", d.y[ti][r]},
                                {"request", req},         {"weight", d.Weight(r, t)}};
  if (p == nullptr) {
    job["fallback"] = NameOf(fallback);
    job["point"] = base[static_cast<int>(fallback)];
  } else {
    job["history"] = HistoryGroupName(p->group);
    job["point"] = p->point;
    job["trees"] = p->learned;
    job["p2_5"] = bound(p->Quantile(0.025));
    job["p10"] = bound(p->Quantile(0.1));
    job["p90"] = bound(p->Quantile(0.9));
    job["p97_5"] = bound(p->Quantile(0.975));
  }
  if (!std::isnan(req)) {
    nlohmann::ordered_json s = nlohmann::ordered_json::array();
    for (size_t i = 0; i < risks.size(); ++i) {
      s.push_back({{"risk", risks[i]}, {"request", suggested[i]}});
    }
    job["suggested"] = std::move(s);
  }
  nlohmann::ordered_json b = nlohmann::ordered_json::object();
  for (Baseline bl : kAllBaselines) {
    if (IsBaselineOf(bl, t)) b[std::string(NameOf(bl))] = base[static_cast<int>(bl)];
  }
  job["baselines"] = std::move(b);
  return job;
}

// One target's part of the eval document.
nlohmann::json TargetJson(const TargetEval& e, const EvalOptions& options) {
  size_t nrisks = options.risks.size();
  nlohmann::json tj;
  tj["unit"] = InfoOf(e.t).unit;
  tj["n"] = e.rows.size();
  tj["models_trained"] = e.models_trained;
  tj["fallback_jobs"] = std::accumulate(e.fallback_by.begin(), e.fallback_by.end(), int64_t{0});
  nlohmann::json by = nlohmann::json::object();
  for (Baseline b : kAllBaselines) {
    if (e.fallback_by[static_cast<int>(b)] > 0) {
      by[std::string(NameOf(b))] = e.fallback_by[static_cast<int>(b)];
    }
  }
  tj["fallback_baselines"] = std::move(by);
  nlohmann::json m = Json(e.model);
  auto sum = [](const std::array<int64_t, 3>& a) {
    return static_cast<double>(a[0] + a[1] + a[2]);
  };
  double in = sum(e.group_n);
  // No scored job had a model: there were no intervals to measure.
  auto share = [&](double v) { return in > 0 ? nlohmann::json(v / in) : nlohmann::json(nullptr); };
  m["pinball"] = e.pinball_n > 0 ? nlohmann::json(e.pinball / static_cast<double>(e.pinball_n))
                                 : nlohmann::json(nullptr);
  m["pinball_n"] = e.pinball_n;
  m["coverage80"] = share(sum(e.group80));
  m["coverage95"] = share(sum(e.group95));
  nlohmann::json groups = nlohmann::json::array();
  for (int g = 0; g < 3; ++g) {
    if (e.group_n[g] == 0) continue;
    auto gn = static_cast<double>(e.group_n[g]);
    groups.push_back({{"history", HistoryGroupName(g)},
                      {"n", e.group_n[g]},
                      {"coverage80", static_cast<double>(e.group80[g]) / gn},
                      {"coverage95", static_cast<double>(e.group95[g]) / gn}});
  }
  m["by_history"] = std::move(groups);
  tj["model"] = std::move(m);
  tj["learned"] = Json(e.learned);
  nlohmann::json bj = nlohmann::json::object();
  for (Baseline b : kAllBaselines) {
    if (!IsBaselineOf(b, e.t)) continue;
    if (e.baseline[static_cast<int>(b)].n == 0) continue;
    bj[std::string(NameOf(b))] = Json(e.baseline[static_cast<int>(b)]);
  }
  tj["baselines"] = std::move(bj);
  nlohmann::json curve = nlohmann::json::array();
  if (e.t != Target::kGpuUtil) {
    for (size_t i = 0; i < nrisks; ++i) {
      if (e.model_saving[i].n == 0) continue;
      nlohmann::json c = {{"risk", options.risks[i]},
                          {"jobs", e.model_saving[i].n},
                          {"model_saved", e.model_saving[i].saved()},
                          {"model_killed", e.model_saving[i].killed_share()}};
      for (Baseline b : kAllBaselines) {
        if (!IsBaselineOf(b, e.t)) continue;
        const SavingStats& s = e.baseline_saving[i][static_cast<int>(b)];
        c[fmt::format("{}_saved", NameOf(b))] = s.saved();
        c[fmt::format("{}_killed", NameOf(b))] = s.killed_share();
      }
      curve.push_back(std::move(c));
    }
  }
  tj["saving_curve"] = std::move(curve);
  // The model's curve alone, at more risks: what it frees at any share of jobs killed.
  nlohmann::json model_curve = nlohmann::json::array();
  if (e.t != Target::kGpuUtil && !e.model_curve.empty() && e.model_curve[0].n > 0) {
    for (size_t i = 0; i < kCurveRisks.size(); ++i) {
      model_curve.push_back({{"risk", kCurveRisks[i]},
                             {"saved", e.model_curve[i].saved()},
                             {"killed", e.model_curve[i].killed_share()}});
    }
  }
  tj["model_curve"] = std::move(model_curve);
  tj["blends"] = e.blends;
  return tj;
}

// One target and retrain period: the rows it scores and the model trained at its start.
struct Task {
  size_t eval = 0;
  int64_t cut = 0;
  std::vector<size_t> batch;
  StatusOr<TargetModel> model = Status::NotFound("not trained yet");
  Baseline fallback = Baseline::kLast2;  // the answer without a model (FallbackBaseline)
  std::vector<TargetPrediction> preds;
  Status predicted;
  bool done = false;  // guarded by ReplayRun::mu_
};

// One chronological replay. The models are independent (each reads the shared dataset only), so
// they train on a pool of threads, one thread each as in `train`; the scores are summed in task
// order, so the document is the same whatever the number of threads.
class ReplayRun {
 public:
  // What the change-aware prediction knows of a row: its code and its program's previous run
  // (the newest earlier row of the same user and job name that had ended by its submission;
  // -1 none), and whether the program was submitted at all before it.
  struct RowCode {
    const CodeReading* reading = nullptr;
    int64_t prev = -1;
    bool seen_before = false;
    std::string kind;  // ChangeKind from prev's reading to this one's
  };

  ReplayRun(const Dataset& d, const EvalOptions& options, std::vector<std::string> job_ids,
            std::vector<std::string> users, std::vector<RowCode> code)
      : d_(d),
        options_(options),
        n_(d.rows()),
        nrisks_(options.risks.size()),
        job_ids_(std::move(job_ids)),
        users_(std::move(users)),
        code_(std::move(code)) {}

  // The targets to score and their tasks; BadInput when there is too little to replay.
  Status Prepare();
  // Trains every task's model on the pool and scores its jobs, in order.
  Status Run();
  nlohmann::json Document() const;

 private:
  void MakeTasks();
  bool SomeModelAt(int64_t cut) const;
  void Train(Task& task) const;
  // The first of `e`'s rows (in end order) that ended after `t`.
  std::vector<size_t>::const_iterator ByEndAfter(const TargetEval& e, int64_t t) const {
    return std::upper_bound(e.by_end.begin(), e.by_end.end(), t,
                            [this](int64_t v, size_t r) { return v < d_.end[r]; });
  }
  Status Score(Task& task);
  void ScoreJob(TargetEval& e, Task& task, size_t k2, std::vector<double>& suggested);
  // The change-aware move of row r's prediction of `t` (a log shift and the spread it adds),
  // calibrated on what had ended by r's submission; `group` is the prediction's history group
  // (-1: no model). Zero where the code says nothing.
  struct CodeMove {
    double shift = 0, spread = 0;
    const char* why = nullptr;                   // "change", "new program", "repeat"
    bool absolute = false;                       // shift is the log point itself, not a move of it
    std::shared_ptr<const QuantileGrid> errors;  // a repeat's: replace the history's interval
  };
  CodeMove MoveOf(Target t, size_t r, int group);
  // The measured `t` of row `from` (which ran `code`) and of the program's runs before it,
  // newest first, that ran exactly `code` too (SameCode), at most kRepeatRuns of them and none
  // past the first that differs.
  std::vector<double> SameCodeRuns(Target t, int64_t from, const CodeReading& code) const;
  // The cluster's code evidence of `t` as of `now`: the changes and estimates of the rows that
  // were submitted before and had ended by then. Built incrementally as `now` grows (rows are
  // scored in submit order per target); rebuilt when it goes back.
  const CodeCalibration& EvidenceAt(Target t, int64_t now);

  const Dataset& d_;
  const EvalOptions& options_;
  const size_t n_;
  const size_t nrisks_;
  std::vector<std::string> job_ids_, users_;  // per row, to name the scored jobs
  std::vector<RowCode> code_;                 // per row; empty without code
  // The rows with code by the time they count as evidence, max(end, submit + 1), and per target
  // the calibration of those up to `next` as of `now`.
  std::vector<std::pair<int64_t, size_t>> evidence_order_;
  struct Evidence {
    CodeCalibration cal;
    int64_t now = INT64_MIN;
    size_t next = 0;
  };
  std::array<Evidence, kNumTargets> evidence_{};
  size_t test_begin_ = 0;
  int64_t first_ = 0, every_ = 0;
  std::vector<TargetEval> evals_;
  std::vector<Task> tasks_;
  // Per target, the end times of the jobs with a value: `train` stores a model set, and with
  // it the fallbacks of the targets without a model, only once some target has enough of them.
  std::array<std::vector<int64_t>, kNumTargets> measured_ends_;
  Mutex mu_;  // guards each task's `done`
  CondVar cv_;
  int retrains_ = 0;
};

Status ReplayRun::Prepare() {
  if (n_ < 100) {
    return Status::BadInput(
        fmt::format("{} jobs with a submit time: too few to replay (100 needed)", n_));
  }
  test_begin_ = static_cast<size_t>(static_cast<double>(n_) * (1 - options_.test_fraction));
  test_begin_ = std::clamp<size_t>(test_begin_, 1, n_ - 1);
  for (Target t : kAllTargets) {
    int ti = static_cast<int>(t);
    TargetEval e{t};
    size_t before = 0;
    for (size_t r = 0; r < n_; ++r) {
      if (std::isnan(d_.y[ti][r])) continue;
      if (t == Target::kRuntime && std::isnan(d_.req[ti][r])) continue;  // only jobs with a limit
      if (r >= test_begin_) {
        e.rows.push_back(r);
      } else {
        ++before;
      }
    }
    if (e.rows.empty() || before + e.rows.size() < options_.train.min_rows) continue;
    for (size_t r = 0; r < n_; ++r) {
      if (!std::isnan(d_.y[ti][r]) && !std::isnan(d_.req[ti][r]) &&
          d_.end[r] != std::numeric_limits<int64_t>::max()) {
        e.by_end.push_back(r);
      }
    }
    std::stable_sort(e.by_end.begin(), e.by_end.end(),
                     [&](size_t a, size_t b) { return d_.end[a] < d_.end[b]; });
    e.model_saving.resize(nrisks_);
    e.model_curve.resize(kCurveRisks.size());
    e.baseline_saving.resize(nrisks_);
    evals_.push_back(std::move(e));
  }
  if (evals_.empty()) {
    return Status::BadInput(
        "no target has enough measured jobs to replay (run time with a time "
        "limit, peak memory, CPU time or GPU usage)");
  }
  MakeTasks();
  return Status::Ok();
}

void ReplayRun::MakeTasks() {
  first_ = d_.submit[test_begin_];
  int64_t last = d_.submit[n_ - 1];
  every_ = std::max<int64_t>(options_.retrain_every_s, 3600);
  int epochs = static_cast<int>((last - first_) / every_) + 1;
  for (size_t ei = 0; ei < evals_.size(); ++ei) {
    const TargetEval& e = evals_[ei];
    size_t next = 0;  // into e.rows
    for (int k = 0; k < epochs; ++k) {
      Task task;
      task.eval = ei;
      task.cut = first_ + k * every_;
      while (next < e.rows.size() && d_.submit[e.rows[next]] < task.cut + every_) {
        task.batch.push_back(e.rows[next++]);
      }
      if (!task.batch.empty()) tasks_.push_back(std::move(task));
    }
  }
  for (Target t : kAllTargets) {
    int ti = static_cast<int>(t);
    for (size_t r = 0; r < n_; ++r) {
      if (!std::isnan(d_.y[ti][r])) measured_ends_[ti].push_back(d_.end[r]);
    }
    std::sort(measured_ends_[ti].begin(), measured_ends_[ti].end());
  }
}

bool ReplayRun::SomeModelAt(int64_t cut) const {
  for (const auto& ends : measured_ends_) {
    auto ended = std::upper_bound(ends.begin(), ends.end(), cut) - ends.begin();
    if (static_cast<size_t>(ended) >= options_.train.min_rows) return true;
  }
  return false;
}

void ReplayRun::Train(Task& task) const {
  const TargetEval& e = evals_[task.eval];
  int ti = static_cast<int>(e.t);
  std::vector<size_t> train_rows;
  for (size_t r = 0; r < n_ && d_.submit[r] < task.cut; ++r) {
    if (d_.end[r] <= task.cut && !std::isnan(d_.y[ti][r])) train_rows.push_back(r);
  }
  if (SomeModelAt(task.cut)) task.fallback = FallbackBaseline(d_, e.t, train_rows);
  task.model = TrainTarget(d_, e.t, std::move(train_rows), options_.train);
  if (task.model.ok()) {
    task.predicted = PredictTargetRows(*task.model, d_, task.batch, &task.preds);
  }
}

Status ReplayRun::Run() {
  std::atomic<size_t> claimed{0};
  std::vector<std::thread> pool;
  int threads = options_.threads > 0 ? options_.threads
                                     : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::clamp(threads, 1, std::max(1, static_cast<int>(tasks_.size())));
  std::atomic<bool> stop{false};
  for (int w = 0; w < threads; ++w) {
    pool.emplace_back([&] {
      while (!stop) {
        size_t i = claimed.fetch_add(1);
        if (i >= tasks_.size()) return;
        Train(tasks_[i]);
        MutexLock lock(mu_);
        tasks_[i].done = true;
        cv_.NotifyAll();
      }
    });
  }
  struct JoinPool {
    std::vector<std::thread>& pool;
    std::atomic<bool>& stop;
    ~JoinPool() {
      stop = true;
      for (auto& t : pool) t.join();
    }
  } join{pool, stop};
  for (Task& task : tasks_) {
    {
      MutexLock lock(mu_);
      while (!task.done) cv_.Wait(lock);
    }
    RS_RETURN_IF_ERROR(Score(task));
  }
  return Status::Ok();
}

Status ReplayRun::Score(Task& task) {
  TargetEval& e = evals_[task.eval];
  const auto& model = task.model;
  ++retrains_;
  if (options_.progress) options_.progress(retrains_, static_cast<int>(tasks_.size()));
  std::array<float, kSuggestRisks.size()> factors{};
  if (e.last && options_.correct_risks) {
    // The jobs that ended since the last period's model last moved its correction, judged
    // by its suggestions.
    std::vector<size_t> ended(ByEndAfter(e, e.last_cut), ByEndAfter(e, task.cut));
    factors = CorrectRisks(*e.last, d_, ended);
  }
  if (task.model.ok()) task.model->risk_log_factor = factors;
  int64_t corrected = task.cut;  // jobs that ended by then have moved the correction
  // Within the period, as an hourly `train` would: before each job, the jobs that ended since
  // the last step (at most every correct_every_s) move the correction of the model in force.
  auto correct_until = [&](int64_t t) {
    if (!options_.correct_risks || options_.correct_every_s <= 0 || !task.model.ok()) return;
    t = corrected + (t - corrected) / options_.correct_every_s * options_.correct_every_s;
    if (t <= corrected) return;
    std::vector<size_t> ended(ByEndAfter(e, corrected), ByEndAfter(e, t));
    task.model->risk_log_factor = CorrectRisks(*task.model, d_, ended);
    corrected = t;
  };
  if (model.ok()) {
    ++e.models_trained;
    RS_RETURN_IF_ERROR(task.predicted);
    if (e.blends.size() < 200) {
      std::vector<double> shown;
      for (float f : factors) shown.push_back(std::exp(static_cast<double>(f)));
      e.blends.push_back({{"at", task.cut},
                          {"weight", model->blend_weight},
                          {"baseline", NameOf(model->blend_baseline)},
                          {"risk_factors", shown}});
    }
  }
  std::vector<double> suggested(nrisks_);
  for (size_t k2 = 0; k2 < task.batch.size(); ++k2) {
    correct_until(d_.submit[task.batch[k2]]);
    ScoreJob(e, task, k2, suggested);
  }
  // Scored: the model is kept for the next period's risk correction, its predictions are no
  // longer needed.
  if (task.model.ok()) {
    e.last = std::move(*task.model);
    e.last_cut = corrected;
  } else if (e.last) {
    e.last->risk_log_factor = factors;  // no model this period: the correction moves on
    e.last_cut = task.cut;
  }
  task.model = Status::NotFound("scored");
  task.preds = {};
  task.batch = {};
  return Status::Ok();
}

void ReplayRun::ScoreJob(TargetEval& e, Task& task, size_t k2, std::vector<double>& suggested) {
  const auto& model = task.model;
  int ti = static_cast<int>(e.t);
  size_t r = task.batch[k2];
  double y = d_.y[ti][r];
  float req = d_.req[ti][r];
  const auto& base = d_.baseline[ti][r];
  for (Baseline b : kAllBaselines) {
    e.baseline[static_cast<int>(b)].Add(base[static_cast<int>(b)], y);
  }
  double w = d_.Weight(r, e.t);
  // The requests the saving curve counts at options.risks: the request itself before any
  // model (nothing cut), else the model's suggestion.
  if (!std::isnan(req)) {
    for (size_t i = 0; i < nrisks_; ++i) {
      suggested[i] = model.ok() ? task.preds[k2].Suggest(options_.risks[i]) : req;
    }
  }
  // The change-aware move: the model's prediction (or the fallback) moved by what the code
  // says changed, its interval widened by the code's doubt.
  std::optional<TargetPrediction> moved;
  CodeMove move;
  double fallback_point = base[static_cast<int>(task.fallback)];
  if (model.ok()) {
    move = MoveOf(e.t, r, task.preds[k2].group);
    if (move.why != nullptr) {
      moved = task.preds[k2];
      double shift = move.absolute ? move.shift - moved->log_point : move.shift;
      moved->log_point += shift;
      moved->point *= std::exp(shift);
      moved->own_errors = move.errors;
      move.shift = shift;
    }
  } else {
    move = MoveOf(e.t, r, -1);
    if (move.why != nullptr && std::isfinite(fallback_point)) {
      fallback_point = move.absolute ? std::exp(move.shift) : fallback_point * std::exp(move.shift);
    }
  }
  const TargetPrediction* shipped = moved ? &*moved : (model.ok() ? &task.preds[k2] : nullptr);
  auto quantile = [&](double q) {
    if (move.spread <= 0) return shipped->Quantile(q);  // exactly the history's interval
    double g = std::log(shipped->Quantile(q)) - shipped->log_point;
    return std::exp(shipped->log_point + WidenLogOffset(g, q, move.spread));
  };
  if (moved && !std::isnan(req)) {
    for (size_t i = 0; i < nrisks_; ++i) suggested[i] = moved->Suggest(options_.risks[i]);
  }
  if (options_.on_scored_job) {
    auto job = ScoredJobJson(d_, r, e.t, job_ids_[r], users_[r], shipped, task.fallback,
                             options_.risks, suggested);
    if (move.why != nullptr) {
      job["code"] = {{"why", move.why}, {"log_shift", move.shift}, {"spread", move.spread}};
      if (shipped == nullptr) job["point"] = fallback_point;
      auto bound = [](double v) {
        return v > 0 && std::isfinite(v) ? nlohmann::ordered_json(v)
                                         : nlohmann::ordered_json(nullptr);
      };
      if (shipped != nullptr) {
        job["p2_5"] = bound(quantile(0.025));
        job["p10"] = bound(quantile(0.1));
        job["p90"] = bound(quantile(0.9));
        job["p97_5"] = bound(quantile(0.975));
      }
    }
    options_.on_scored_job(job);
  }
  if (!model.ok()) {
    // No model yet: the shipped answer is the fallback baseline, at the request.
    ++e.fallback_by[static_cast<int>(task.fallback)];
    e.model.Add(fallback_point, y);
    e.learned.Add(base[static_cast<int>(task.fallback)], y);
    if (!std::isnan(req)) {
      for (auto& c : e.model_curve) c.Add(req, req, y, w);
      for (size_t i = 0; i < nrisks_; ++i) {
        e.model_saving[i].Add(req, suggested[i], y, w);
        for (int b = 0; b < kNumBaselines; ++b) e.baseline_saving[i][b].Add(req, req, y, w);
      }
    }
    return;
  }
  const TargetPrediction& p = *shipped;
  e.model.Add(p.point, y);
  e.learned.Add(p.learned, y);
  double q10 = quantile(0.1), q90 = quantile(0.9);
  if (std::isfinite(q10) && std::isfinite(q90)) {
    e.pinball += (Pinball(y, q10, 0.1) + Pinball(y, p.point, 0.5) + Pinball(y, q90, 0.9)) / 3;
    ++e.pinball_n;
  }
  ++e.group_n[p.group];
  e.group80[p.group] += y >= q10 && y <= q90 ? 1 : 0;
  e.group95[p.group] += y >= quantile(0.025) && y <= quantile(0.975) ? 1 : 0;
  if (std::isnan(req)) return;
  for (size_t i = 0; i < kCurveRisks.size(); ++i) {
    e.model_curve[i].Add(req, p.Suggest(kCurveRisks[i]), y, w);
  }
  for (size_t i = 0; i < nrisks_; ++i) {
    double risk = options_.risks[i];
    e.model_saving[i].Add(req, suggested[i], y, w);
    for (Baseline b : kAllBaselines) {
      int bi = static_cast<int>(b);
      float bv = base[bi];
      const QuantileGrid& g = model->baseline_log_ratio[bi];
      double s = (std::isfinite(bv) && !g.q.empty())
                     ? bv * std::exp(static_cast<double>(g.Quantile(1 - risk)))
                     : req;
      e.baseline_saving[i][bi].Add(req, s, y, w);
    }
  }
}

const CodeCalibration& ReplayRun::EvidenceAt(Target t, int64_t now) {
  int ti = static_cast<int>(t);
  if (evidence_order_.empty()) {
    for (size_t k = 0; k < code_.size(); ++k) {
      if (code_[k].reading == nullptr || d_.end[k] == INT64_MAX) continue;
      evidence_order_.emplace_back(std::max(d_.end[k], d_.submit[k] + 1), k);
    }
    std::sort(evidence_order_.begin(), evidence_order_.end());
  }
  Evidence& ev = evidence_[ti];
  if (now < ev.now) ev = Evidence{};
  ev.now = now;
  auto measured = [&](size_t k) -> std::optional<double> {
    double v = d_.y[ti][k];
    return std::isnan(v) || v <= 0 ? std::nullopt : std::optional<double>(v);
  };
  for (; ev.next < evidence_order_.size() && evidence_order_[ev.next].first <= now; ++ev.next) {
    size_t k = evidence_order_[ev.next].second;
    const RowCode& c = code_[k];
    auto y = measured(k);
    if (!y) continue;
    if (auto f = CodeFigure(t, *c.reading)) ev.cal.AddEstimate(t, *y, *f);
    if (c.prev < 0) continue;
    auto p = static_cast<size_t>(c.prev);
    if (code_[p].reading == nullptr) continue;
    auto before = SameCodeMean(SameCodeRuns(t, c.prev, *code_[p].reading));
    if (!before) continue;
    if (SameCode(*code_[p].reading, *c.reading)) {
      ev.cal.AddRepeat(t, *y, *before);
    } else if (auto x = CodeLogRatio(t, *code_[p].reading, *c.reading, before)) {
      ev.cal.AddChange(t, *x, std::log(*y / *before), *before, c.kind);
    }
  }
  return ev.cal;
}

ReplayRun::CodeMove ReplayRun::MoveOf(Target t, size_t r, int group) {
  CodeMove move;
  if (code_.empty() || code_[r].reading == nullptr) return move;
  const CodeCalibration& cal = EvidenceAt(t, d_.submit[r]);
  const RowCode& c = code_[r];
  if (c.prev >= 0) {
    auto p = static_cast<size_t>(c.prev);
    if (code_[p].reading == nullptr) return move;
    // The previous code's newest runs: what a repeat is predicted by, and what a change moves.
    auto before = SameCodeMean(SameCodeRuns(t, c.prev, *code_[p].reading));
    if (!before) return move;
    if (SameCode(*code_[p].reading, *c.reading)) {
      move.shift = std::log(*before);
      move.absolute = true;
      move.errors = cal.RepeatErrors(t);
      move.why = "repeat";
      return move;
    }
    auto x = CodeLogRatio(t, *code_[p].reading, *c.reading, before);
    // The code says nothing of this target, or it is not known to have changed (no hash, the
    // same facts): the history's prediction stands. A change the code cannot size (x = 0)
    // still moves from the last runs.
    if (!x || (std::abs(*x) < 1e-9 && !CodeChanged(*code_[p].reading, *c.reading))) return move;
    ChangeFit fit = cal.Fit(t, c.kind);
    move.shift = std::log(*before) + fit.Applied(*x, *before);
    move.absolute = true;
    move.spread = fit.Spread(*x, *before);
    move.why = "change";
    return move;
  }
  if (!c.seen_before && group == 0) {
    auto f = CodeFigure(t, *c.reading);
    auto corr = cal.EstimateCorrection(t);
    if (!f || !corr) return move;
    move.shift = std::log(*f) + corr->first;  // the absolute log figure; the caller subtracts
    move.spread = corr->second;
    move.why = "new program";
    move.absolute = true;
  }
  return move;
}

std::vector<double> ReplayRun::SameCodeRuns(Target t, int64_t from, const CodeReading& now) const {
  std::vector<double> out;
  int ti = static_cast<int>(t);
  for (int64_t k = from; k >= 0 && out.size() < kRepeatRuns;) {
    auto p = static_cast<size_t>(k);
    if (code_[p].reading == nullptr || (k != from && !SameCode(*code_[p].reading, now))) break;
    double v = d_.y[ti][p];
    if (!std::isnan(v) && v > 0) out.push_back(v);
    k = code_[p].prev;
  }
  return out;
}

nlohmann::json ReplayRun::Document() const {
  nlohmann::json out;
  out["schema"] = "rightsize.eval/v1";
  out["jobs"] = n_;
  out["scored_from"] = first_;
  out["retrain_every_s"] = every_;
  out["correct_every_s"] = options_.correct_risks ? options_.correct_every_s : 0;
  out["test_fraction"] = options_.test_fraction;
  nlohmann::json targets = nlohmann::json::object();
  for (const TargetEval& e : evals_) targets[std::string(NameOf(e.t))] = TargetJson(e, options_);
  out["targets"] = std::move(targets);
  out["retrains"] = retrains_;
  return out;
}

}  // namespace

StatusOr<nlohmann::json> Replay(std::vector<JobRecord> jobs, const ClusterContext& cluster,
                                const EvalOptions& options) {
  auto started = std::chrono::steady_clock::now();
  Dataset d = BuildDataset(jobs, cluster);
  // Row r is jobs[r] now; the ids and users are kept only to name the scored jobs.
  std::vector<std::string> job_ids, users;
  if (options.on_scored_job) {
    for (const JobRecord& j : jobs) {
      job_ids.push_back(j.job_id);
      users.push_back(j.request.user);
    }
  }
  std::vector<ReplayRun::RowCode> code;
  if (!options.code.empty()) {
    code.resize(jobs.size());
    // Per program, its rows so far (in submit order).
    std::unordered_map<std::string, std::vector<size_t>> runs;
    for (size_t r = 0; r < jobs.size(); ++r) {
      const JobRecord& j = jobs[r];
      if (auto it = options.code.find(j.job_id); it != options.code.end()) {
        code[r].reading = &it->second;
      }
      std::string program = ProgramKey(j);
      auto& earlier = runs[program];
      code[r].seen_before = !earlier.empty();
      for (auto k = earlier.rbegin(); k != earlier.rend(); ++k) {
        if (d.end[*k] <= d.submit[r] && code[*k].reading != nullptr) {
          code[r].prev = static_cast<int64_t>(*k);
          if (code[r].reading != nullptr) {
            code[r].kind = ChangeKind(*code[*k].reading, *code[r].reading);
          }
          break;
        }
      }
      earlier.push_back(r);
    }
  }
  jobs.clear();
  jobs.shrink_to_fit();
  ReplayRun run(d, options, std::move(job_ids), std::move(users), std::move(code));
  RS_RETURN_IF_ERROR(run.Prepare());
  RS_RETURN_IF_ERROR(run.Run());
  nlohmann::json out = run.Document();
  out["seconds"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return out;
}

}  // namespace rightsize
