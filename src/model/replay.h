// Replay: honest accuracy on a cluster's own history.
//
// Jobs are replayed in submit order. The model for jobs submitted in [c, c + every) is trained
// at c on the jobs that had ended by c (with the features each had at its own submit time), so
// nothing from the future reaches a prediction; the baselines read the same history. Scores
// are taken on the later part of the jobs (`test_fraction`), the first part only trains. Each
// period's model starts from the previous one's risk correction, moved by the jobs that ended
// in between, as each `train` starts from the stored version before it; within a period the
// correction moves every `correct_every_s` of trace time, as an hourly `train` would move it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/job.h"
#include "core/status.h"
#include "model/code_change.h"
#include "model/predictor.h"

namespace rightsize {

struct EvalOptions {
  int64_t retrain_every_s = int64_t{7} * 86400;
  double test_fraction = 0.5;  // the later half is scored
  std::vector<double> risks = {0.005, 0.01, 0.02, 0.05};
  TrainOptions train;
  int threads = 0;  // models trained at once (one thread each); 0 = one per core
  // Carry the risk correction (TargetModel::risk_log_factor) from period to period, as `train`
  // does from version to version; off, every suggestion is made at its nominal risk.
  bool correct_risks = true;
  // How often the correction moves between retrains (0: only at each retrain): `train`, run
  // every hour, moves it every hour on the jobs that ended since, so the replay does too
  // without retraining the trees that often.
  int64_t correct_every_s = 3600;
  // Called after each retrain (done, total) for a progress bar.
  std::function<void(int, int)> progress;
  // Called with each scored job's prediction of each target beside the baselines and what the
  // job used (`eval --jobs`), target by target and period by period, in submit order within one.
  std::function<void(const nlohmann::ordered_json&)> on_scored_job;
  // Each job's code as read at its submission, by job id (model/code_change.h). A job whose
  // program (same user and job name) ran before with other facts has its prediction moved by
  // what the code says changed, calibrated on the changes that had ended before it was
  // submitted; a program never seen, whose user has no history, gets its code's calibrated
  // figure. Empty: the replay is the history's alone.
  std::unordered_map<std::string, CodeReading> code;
};

// Replays `jobs` (any order) and returns the rightsize.eval/v1 document (see README).
StatusOr<nlohmann::json> Replay(std::vector<JobRecord> jobs, const ClusterContext& cluster,
                                const EvalOptions& options);

}  // namespace rightsize
