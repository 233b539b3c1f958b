// LearnedFallback: a classifier trained on the project's failure corpora that names a class for a
// log the signatures call `unknown`.
//
// Features are hashed words of the lines the scan kept (its tail and its signature hits, so a
// 1 GiB log costs no more than a short paste): lowercased word unigrams and bigrams, with long
// numbers, hexadecimal values and paths reduced to their shape and base name. The model is a
// multi-class XGBoost ensemble (multi:softprob) over a CSR matrix of those features; the class
// `unknown` is one of its outputs. A match is reported only at a probability of at least
// kLearnedThreshold, with the words that weighed most for it (SHAP contributions) and the line
// that carried the most weight. The model shipped with the binary is trained by
// `diagnose_fallback_train` from test/data/failures/ (docs/diagnosis.md, "Learned fallback").
//
// Failure: a model that does not load is an error (Status); the text of a log never is. Thread-
// safe after the first call (the embedded model is loaded once, behind a function-local static).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "diagnose/log_scan.h"
#include "diagnose/signatures.h"

namespace rightsize {

class Booster;
struct SparseRows;

// The probability at or above which a learned match is reported (chosen by grouped
// cross-validation and the blind sets scored at first sight, docs/diagnosis.md; 0.6 since
// round 5).
inline constexpr double kLearnedThreshold = 0.6;

// One line the fallback reads: where it is and its text.
struct FallbackLine {
  std::string file;
  int64_t line = 0;
  std::string text;
};

// The lines of the scans the fallback reads: each scan's tail and its signature hits, in line
// order, without repeats.
std::vector<FallbackLine> FallbackLines(const std::vector<LogScan>& scans);

// Whether a line only reports routine progress: an INFO line (NCCL's, a logger's, glog's), a
// Python warning ("x.py:429: UserWarning: …"), a progress bar, a metrics line ("step 40 loss=0.113
// lr=3e-4"), a scheduler's report that a pod is still pending (Kubernetes' FailedScheduling, "0/4
// nodes are available: … No preemption victims found"). The line a learned match cites is never
// one: a class that only such lines weigh for is no match (a healthy NCCL-noisy log is not an NCCL
// failure, a pod waiting for a GPU was not preempted).
bool IsRoutineLine(std::string_view text);

// Whether a line is a scheduler refusing the job at submission (SLURM's "Batch job submission
// failed: …" and "Unable to allocate resources: …", PBS's "qsub: Job rejected …", LSF's "Job not
// submitted.", Grid Engine's "Unable to run job: …"). Such a job never ran, so a log that says so
// is `unknown` by the class boundaries and the learned fallback names no class for it.
bool IsSubmissionRefused(std::string_view text);

// The words of one line as the model sees them (unigrams, then "a b" bigrams).
std::vector<std::string> FallbackTerms(std::string_view line);

// The hashed feature column of a term.
unsigned FallbackColumn(std::string_view term);

// Appends the feature row of `lines` (binary presence of each term's column) to `rows`.
void AppendFallbackRow(const std::vector<FallbackLine>& lines, SparseRows* rows);

struct LearnedMatch {
  FailureClass cls = FailureClass::kUnknown;  // kUnknown: the model does not know either
  double probability = 0;                     // of cls
  std::vector<std::string> terms;             // the words that weighed most for cls
  std::optional<FallbackLine> cited;  // the non-routine line that carried the most weight; none:
                                      // no match
};

// A trained fallback model (XGBoost UBJSON bytes).
class LearnedFallback {
 public:
  LearnedFallback();
  ~LearnedFallback() noexcept;
  LearnedFallback(LearnedFallback&&) noexcept;
  LearnedFallback& operator=(LearnedFallback&&) noexcept;
  LearnedFallback(const LearnedFallback&) = delete;
  LearnedFallback& operator=(const LearnedFallback&) = delete;

  static StatusOr<LearnedFallback> Load(std::string_view model_bytes);
  // The model compiled into the binary (share/diagnose_fallback.ubj); loaded on first use.
  static StatusOr<const LearnedFallback*> Embedded();

  // The probability of each class (kFailureClassCount values) for these lines.
  StatusOr<std::vector<float>> Probabilities(const std::vector<FallbackLine>& lines) const;
  // The most probable class with its evidence; with `explain` false, only cls and probability.
  StatusOr<LearnedMatch> Classify(const std::vector<FallbackLine>& lines,
                                  bool explain = true) const;

 private:
  std::unique_ptr<Booster> booster_;
};

// Training parameters, fixed here so that the shipped model can be regenerated exactly.
struct LearnedTrainParams {
  int rounds = 40;
  int max_depth = 4;
  double eta = 0.3;
  double min_child_weight = 1;
  double colsample_bytree = 1.0;
};

// Trains a fallback on rows (AppendFallbackRow) with labels (FailureClass as int), one thread,
// fixed seed; returns the model's bytes.
StatusOr<std::string> TrainLearnedFallback(const SparseRows& rows, const std::vector<int>& labels,
                                           const LearnedTrainParams& params = {});

// The bytes of the embedded model ("" when the build has none).
std::string_view EmbeddedFallbackModel();

}  // namespace rightsize
