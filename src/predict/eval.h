// The chronological replay of a cluster's history (`rightsize eval`): the jobs of an accounting
// file (read into a private in-memory store) or of the store, replayed by model/replay with the
// model and the baselines side by side, each trained only on the past.
//
// With `jobs_path`, every scored job's line is written beside that path and renamed into place
// once the replay is done, so a replay that fails leaves an earlier file as it was. Failures:
// the trace's or store's, a replay with too few jobs (BadInput), a --jobs file that cannot be
// written (IoError). One replay per call; thread-compatible.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "model/replay.h"
#include "store/store.h"

namespace rightsize {

struct EvalRequest {
  std::string trace;      // an accounting file; "" = the store's jobs
  std::string format;     // of `trace`: swf, sacct, clustercockpit ("" = from the file name)
  std::string cluster;    // "" = the only one
  std::string jobs_path;  // also write every scored job here ("" = no)
  EvalOptions options;    // schedule, risks, progress; on_scored_job is set for jobs_path
};

struct EvalOutput {          // NOLINT(bugprone-exception-escape): json's move may throw
  nlohmann::json doc;        // rightsize.eval/v1, with "input" (the trace or "cluster NAME")
  std::string what;          // the same words
  std::string skipped_note;  // malformed trace lines, "" when none
};

// Replays `request.trace`, or the store's jobs when it is empty (`store` must then be given).
StatusOr<EvalOutput> EvalHistory(Store* store, EvalRequest request);

// The replay as `eval` prints it: per target, the model beside every baseline (MAE, AEA,
// underestimation), interval coverage by history group, and the saving curve.
std::string EvalText(const std::string& what, const nlohmann::json& doc);

}  // namespace rightsize
