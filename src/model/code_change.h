// What a job's code says changed since its program last ran, and how far to trust it.
//
// A job keeps the facts its code analysis read at submission (code/report.h's FactsJson, stored
// by store/'s job_code table). When the same program (same user and job name) ran before with
// other facts, the prediction is what the last runs of the previous code measured (the mean of
// its newest same-code runs, at most kRepeatRuns) moved by what the code says changed: the ratio
// of the analytical figures between the new and the previous facts — peak host memory by the
// tensors' estimate (new − old, added to the last runs' measured peak), GPU memory by the
// estimate's ratio, run time by the work per run (parameters × samples × tokens or pixels per
// sample × 3 for training, 4 with full activation checkpointing, × steps where known). Run time has
// a part that does not grow with the work (start-up, imports, loading: ChangeFit::fixed, seconds
// fitted by least squares on the cluster's past changes, 0 without them), so only the rest is
// scaled. The ratio is then shrunk toward 1 by how well such ratios predicted past changes of the
// cluster (a least-squares slope of the measured log ratio on the code's, with a prior of 1 worth
// kPriorWeight; each kind of change, ChangeKind, has its own slope and offset where the cluster
// has seen it), and its residual spread widens the history's interval. All are fitted on the
// newest kMaxChanges past changes, kept as they were measured. When the same program runs the same
// code again (SameCode: the same files and facts), the prediction is the mean of those same-code
// runs, and its interval and requests come from how the cluster's past repeats missed such a mean
// (conformal, as the history groups'), not from the history's errors, which describe jobs whose
// code may have changed. A program with no past gets the code's figure calibrated by the cluster's
// median log ratio of measured to estimated, its spread widening the interval.
//
// Pure functions and plain values; thread-compatible. Malformed JSON gives an empty reading
// (no change, no estimate), never an error: the history's prediction then stands as it is.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/job.h"
#include "model/predictor.h"
#include "model/target.h"

namespace rightsize {

// A job's code as the change-aware prediction reads it.
struct CodeReading {
  std::string program;  // the entry file
  std::string code_hash;
  nlohmann::json facts = nlohmann::json::object();  // FactsJson's "facts" object
  std::optional<double> tensor_bytes;  // the estimate's terms less CUDA context and allocator
  std::optional<double> gpu_bytes;     // the estimate's p50 × the GPUs it spreads over
  std::optional<double> work;          // a FLOP proxy of the whole run
  bool Empty() const { return facts.empty() && !tensor_bytes && !work; }
};

// From stored JSON texts (either may be ""); an empty reading for malformed JSON.
CodeReading ReadCode(const std::string& facts_json, const std::string& estimate_json,
                     const std::string& program = "", const std::string& code_hash = "");

// Whether two readings are of the same code: the same (non-empty) hash of the files the analysis
// read and the same facts, arguments included (a torch version only one reading could read, as
// the job's environment was at hand for one of them, aside). A repeat of a program's last run.
bool SameCode(const CodeReading& a, const CodeReading& b);

// Whether `now` is known to differ from `before`: other facts (their values, or where and how
// they were read), or both hashes known and different. Code without a hash and the same facts
// may or may not be the same code.
bool CodeChanged(const CodeReading& before, const CodeReading& now);

// How many of a program's newest same-code runs a prediction averages (as last2 does for any
// job): identical runs vary by the allocator and the machine's noise only.
inline constexpr size_t kRepeatRuns = 2;

// The mean of `measured` (a program's newest same-code runs, at most kRepeatRuns); nullopt
// when empty.
std::optional<double> SameCodeMean(const std::vector<double>& measured);

// The kind of a change, the facts that differ in order joined by '+': a numeric fact by its
// name ("batch_size", "hidden+parameters"), any other with its values ("precision: fp32 → bf16
// autocast (mixed)"); "" when none does.
std::string ChangeKind(const CodeReading& before, const CodeReading& now);

// The facts that differ ("batch_size 16 → 32 at train.py:40"); empty when none does.
std::vector<std::string> ChangedFacts(const CodeReading& before, const CodeReading& now);

// The code's log ratio of `t` between the previous run and this one; nullopt where the code
// says nothing of `t` or the figures are missing. `before_measured` is the previous run's
// measured value (peak host memory: the tensors' change is added to it).
std::optional<double> CodeLogRatio(Target t, const CodeReading& before, const CodeReading& now,
                                   std::optional<double> before_measured);

// The code's own figure of `t` for a program with no past (before calibration); nullopt when
// it has none.
std::optional<double> CodeFigure(Target t, const CodeReading& r);

// What a cluster's past changes say of a new one (CodeCalibration::Fit): neutral (no fixed part,
// slope 1, no offset) without evidence.
struct ChangeFit {
  // Run time's part that does not scale with the work, in seconds (0 for the other targets and
  // without past changes that scaled the work).
  double fixed = 0;
  // The slope applied to Scaled's log ratio, in [0, 1.5]: the cluster's over every change, or,
  // for a kind of change seen before, that kind's own (a bigger batch may not slow a run as
  // much as a wider model does), shrunk toward the cluster's by kKindPriorChanges.
  double slope = 1;
  // For a kind seen before, its mean residual shrunk toward 0 by kKindPriorChanges: what a
  // change the code cannot size, a precision or an optimizer, did on this cluster.
  double offset = 0;
  double rss = 0;  // the residual sum of squares of the cluster's slope
  int64_t changes = 0, of_kind = 0;

  // The code's log ratio `x` from `before` with the fixed part held: log((a + (before − a) e^x)
  // / before), a = fixed capped at 90 % of `before`.
  double Scaled(double x, double before) const;
  // The log ratio a prediction moves `before` by.
  double Applied(double x, double before) const { return slope * Scaled(x, before) + offset; }
  // The spread (sd of the log) the change adds to the interval.
  double Spread(double x, double before) const;
};

// How the cluster's past changes and past estimates bore out, per target. Neutral (slope 1,
// no fixed part, a prior spread) without evidence.
struct CodeCalibration {
  static constexpr double kPriorWeight = 0.25;  // in squared log ratios (a ×2 change is 0.48)
  static constexpr double kPriorSpread = 0.3;   // relative, per unit of log ratio
  // A past change: the code's log ratio, the measured log ratio, and the value it moved from
  // (the mean of the previous code's last runs).
  struct Change {
    double x = 0, y = 0, before = 0;
    std::string kind;  // ChangeKind's name of what changed ("" when unknown)
  };
  // A kind's own slope is shrunk toward the cluster's, and its offset toward 0, by this many
  // changes' worth.
  static constexpr double kKindPriorChanges = 2;
  static constexpr size_t kMaxChanges = 2000;
  std::array<std::vector<Change>, kNumTargets> changes{};             // newest last
  std::array<std::vector<double>, kNumTargets> estimate_log_ratio{};  // log measured / code
  // log measured / SameCodeMean of the program's runs before, per repeat, newest last; the
  // newest kMaxRepeats are kept.
  static constexpr size_t kMaxRepeats = 2000;
  std::array<std::vector<double>, kNumTargets> repeat_log_error{};

  void AddChange(Target t, double code_log_ratio, double measured_log_ratio, double before,
                 std::string kind = "");
  void AddEstimate(Target t, double measured, double code_figure);
  void AddRepeat(Target t, double measured, double same_code_mean);
  // The past repeats' errors as a conformal grid; nullptr under QuantileGrid::CountToBound(0.9)
  // of them (the history's interval then stands around the repeat's point).
  std::shared_ptr<const QuantileGrid> RepeatErrors(Target t) const;
  // What the past changes of target `t` (of `kind`, when given) say, fitted in one pass.
  ChangeFit Fit(Target t, const std::string& kind = "") const;
  // The median log ratio of measured to code and its spread; nullopt under 3 estimates.
  std::optional<std::pair<double, double>> EstimateCorrection(Target t) const;
  nlohmann::json ToJson() const;
  static CodeCalibration FromJson(const nlohmann::json& j);
};

// A program's identity for the change-aware prediction: the same user and job name.
std::string ProgramKey(const JobRecord& job);

// The calibration from a cluster's finished jobs (any order) and their code by job id: each job
// with code against its program's newest earlier run that had ended by its submission.
CodeCalibration CalibrateOnJobs(const std::vector<JobRecord>& jobs,
                                const std::unordered_map<std::string, CodeReading>& code);

// The cluster meta key `train` stores CalibrateOnJobs's ToJson() under.
inline constexpr const char* kCodeCalibrationMeta = "code_calibration";

// A prediction's quantile q (a log offset from its p50, g) widened by a normal of sd `s` added
// in quadrature: what an interval becomes with the code ratio's doubt in it.
double WidenLogOffset(double g, double q, double s);

}  // namespace rightsize
